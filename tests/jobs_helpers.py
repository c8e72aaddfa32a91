"""Helpers for the scheduled-jobs tests: a fake clock, a proxy that uses it, waiters."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import httpx

from proxy.app import create_app
from proxy.config import Settings
from proxy.scheduler import Scheduler
from tests.conftest import Proxy
from tests.databases import PostgresServer
from tests.fake_upstream import FakeUpstream
from tests.servers import running

__all__ = ["FakeClock", "api", "at", "jobs_proxy", "settle_jobs", "wait_for"]


class FakeClock:
    """The time the proxy's scheduler and API see; tests move it by hand."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def at(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


@contextmanager
def jobs_proxy(
    db: str,
    upstream: FakeUpstream,
    clock: FakeClock,
    postgres: PostgresServer | None,
    **flags: Any,
) -> Iterator[Proxy]:
    """The proxy on loopback on database ``db``, its schedules driven by ``clock``; the
    scheduler ticks fast. ``postgres``: the server, for ``Proxy.db()`` on PostgreSQL."""
    flags.setdefault("upstream", upstream.url)
    flags.setdefault("db", db)
    flags.setdefault("summarizer", "extractive")
    flags.setdefault("jobs_tick", 0.005)
    settings = Settings.load(flags=flags)
    app = create_app(settings, clock=clock)
    with running(app) as url:
        yield Proxy(url, settings, app, postgres)


def scheduler(proxy: Proxy) -> Scheduler:
    return next(w for w in proxy.app.state.workers if isinstance(w, Scheduler))


def wait_for(condition: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        time.sleep(0.005)


def settle_jobs(*proxies: Proxy) -> None:
    """Let every scheduler make two whole passes at the current time, and its runs finish."""
    for proxy in proxies:
        sched = scheduler(proxy)
        target = sched.ticks + 2
        wait_for(lambda sched=sched, target=target: sched.ticks >= target)  # type: ignore[misc]
    for proxy in proxies:
        sched = scheduler(proxy)
        wait_for(lambda sched=sched: sched.running == 0)  # type: ignore[misc]
        proxy.settle()


def api(
    proxy: Proxy,
    method: str,
    path: str,
    body: Any = None,
    *,
    key: str | None = None,
    expect: int | None = 200,
    **params: Any,
) -> Any:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    response = httpx.request(
        method,
        f"{proxy.url}/api/jobs{path}",
        json=body,
        headers=headers,
        params=params,
        timeout=30,
    )
    if expect is not None:
        assert response.status_code == expect, response.text
    return response.json()
