"""Batched full-text indexing of messages (SQLite).

Stored messages wait in ``fts_pending`` (see migration 0006) until
:meth:`FtsIndex.index_pending` adds them to ``messages_fts`` (search) and
``recall_fts`` (recall) in one transaction. The server's
:class:`~proxy.indexer.FtsIndexer` runs it every fraction of a second and
every search runs it first, so no search ever misses a stored message.
PostgreSQL keeps its ``tsvector`` column in the message row itself, so
there is nothing to do there.
"""

from __future__ import annotations

from proxy.store.core import CoreStore

__all__ = ["FtsIndex"]


class FtsIndex(CoreStore):
    async def index_pending(self) -> int:
        """Index the messages stored since the last call; return how many."""
        if self.db.dialect != "sqlite":
            return 0
        results = await self.db.write(
            [
                ("SELECT COUNT(*) FROM fts_pending", ()),
                (
                    "INSERT INTO messages_fts (rowid, content) "
                    "SELECT m.id, m.content FROM fts_pending p JOIN messages m ON m.id = p.id",
                    (),
                ),
                (
                    "INSERT INTO recall_fts (rowid, content) "
                    "SELECT (r.key << 24) + m.seq, m.content FROM fts_pending p "
                    "JOIN messages m ON m.id = p.id "
                    "JOIN recall_sessions r ON r.session_id = m.session_id "
                    "WHERE m.role IN ('user', 'assistant') AND m.content <> '' "
                    "AND m.seq < 16777216",
                    (),
                ),
                ("DELETE FROM fts_pending", ()),
            ]
        )
        count: int = results[0][0][0]
        return count
