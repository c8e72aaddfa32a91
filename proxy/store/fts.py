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
    async def index_pending(self, limit: int | None = None) -> int:
        """Index the messages stored since the last call (at most ``limit``); return how many.

        A bounded batch keeps the write lock for a few milliseconds at most,
        so turns waiting to write are never held up long.
        """
        if self.db.dialect != "sqlite":
            return 0
        batch = "SELECT id FROM fts_pending ORDER BY id" + (" LIMIT ?" if limit else "")
        args: tuple[int, ...] = (limit,) if limit else ()
        results = await self.db.write(
            [
                (f"SELECT COUNT(*) FROM ({batch})", args),
                (
                    "INSERT INTO messages_fts (rowid, content) "
                    f"SELECT m.id, m.content FROM messages m WHERE m.id IN ({batch})",
                    args,
                ),
                (
                    "INSERT INTO recall_fts (rowid, content) "
                    "SELECT (r.key << 24) + m.seq, m.content FROM messages m "
                    "JOIN recall_sessions r ON r.session_id = m.session_id "
                    f"WHERE m.id IN ({batch}) AND m.role IN ('user', 'assistant') "
                    "AND m.content <> '' AND m.seq < 16777216",
                    args,
                ),
                (f"DELETE FROM fts_pending WHERE id IN ({batch})", args),
            ]
        )
        count: int = results[0][0][0]
        return count
