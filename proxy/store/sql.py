"""The store: one class over any :class:`~proxy.store.database.Database`.

Each feature keeps its queries in a module of its own, as a class extending
:class:`~proxy.store.core.CoreStore`; :class:`SqlStore` combines them.
"""

from __future__ import annotations

from proxy.store.recall import RecallStore

__all__ = ["SqlStore"]


class SqlStore(RecallStore):
    pass
