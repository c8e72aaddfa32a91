"""Batched full-text indexing of messages (SQLite).

The indexes live in a file of their own (:mod:`proxy.store.fts_file`); each
stored or deleted message is logged in ``fts_log`` and reaches them in the
next batch. The server's :class:`~proxy.indexer.FtsIndexer` applies batches
every fraction of a second and every search applies what is left first, so no
search ever misses a stored message. PostgreSQL keeps its ``tsvector`` column
in the message row itself, so there is nothing to do there.
"""

from __future__ import annotations

from proxy.store.core import CoreStore
from proxy.store.sqlite import SqliteDatabase

__all__ = ["FtsIndex"]

# A message's created_at is set just before the write that stores it; a
# batch that started this much later surely saw that write committed.
COMMIT_MARGIN = 1.0


class FtsIndex(CoreStore):
    async def index_pending(self, limit: int | None = None) -> int:
        """Index the messages stored (or un-index those deleted) since the last call.

        At most ``limit`` changes, or all of them; returns how many. With no
        limit, the applied changes are also trimmed from the log.
        """
        if not isinstance(self.db, SqliteDatabase):
            return 0
        return await self.db.index_pending(limit)

    async def index_stored_by(self, when: float) -> None:
        """Make sure every message stored by ``when`` (wall clock) is indexed.

        Cheap when the indexer has caught up since (the usual case): recall
        reads only messages compaction has archived, and compaction calls
        this first, so a fast conversation never outruns the index.
        """
        if isinstance(self.db, SqliteDatabase) and self.db.indexed_through < when + COMMIT_MARGIN:
            await self.index_pending()

    async def trim_index_log(self) -> None:
        """Forget the logged changes the indexes already hold."""
        if isinstance(self.db, SqliteDatabase):
            await self.db.trim_index_log()
