"""What the lifespan builds and every handler reads: one typed bundle."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import HTTPConnection

from proxy.compactor import Compactor
from proxy.config import Settings
from proxy.runs import Runs
from proxy.store import SqlStore
from proxy.tasks import TaskSet
from proxy.turns import Conversations
from proxy.upstream import Upstream

__all__ = ["Services", "services"]


@dataclass(frozen=True)
class Services:
    settings: Settings
    store: SqlStore
    upstream: Upstream
    conversations: Conversations
    compactor: Compactor
    tasks: TaskSet
    tenants: dict[str, str]
    runs: Runs
    # The time, in epoch seconds: what schedules run by (tests pass a fake one).
    clock: Callable[[], float] = time.time


def services(request: HTTPConnection) -> Services:
    svc: Services = request.state.services
    return svc
