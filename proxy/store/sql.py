"""The store: one class over any :class:`~proxy.store.database.Database`.

Each feature keeps its queries in a module of its own, as a class extending
:class:`~proxy.store.core.CoreStore`; :class:`SqlStore` combines them.
"""

from __future__ import annotations

from proxy.store.archive import SessionArchive
from proxy.store.fts import FtsIndex
from proxy.store.jobs import JobStore
from proxy.store.recall import RecallStore
from proxy.store.runs import RunStore
from proxy.store.search import SessionSearch
from proxy.store.sessions import SessionAdmin
from proxy.store.threads import ThreadStore

__all__ = ["SqlStore"]


class SqlStore(
    RunStore,
    ThreadStore,
    JobStore,
    SessionAdmin,
    SessionSearch,
    SessionArchive,
    FtsIndex,
    RecallStore,
):
    pass
