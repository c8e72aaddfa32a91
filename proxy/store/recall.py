"""Recall queries: the best-matching archived messages of one session."""

from __future__ import annotations

from collections.abc import Sequence

from compaction import Message
from proxy.store.core import CoreStore, message_from_row

__all__ = ["RecallStore", "fts5_match"]

RECALL_COLUMNS = (
    "m.seq, m.turn, m.role, m.content, m.parts, m.name, m.tool_calls, m.tool_call_id, "
    "m.token_count, m.created_at"
)


def fts5_match(terms: Sequence[str]) -> str:
    """An FTS5 query matching any of ``terms``, each quoted so no word is read as syntax."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


class RecallStore(CoreStore):
    """Full-text search over a session's archive, for recall on the turn path."""

    async def recall_messages(
        self, session_id: str, through_seq: int, terms: Sequence[str], limit: int
    ) -> list[Message]:
        """User and assistant messages with ``seq ≤ through_seq`` best matching any term.

        Best first, by BM25. Empty when there is nothing to search for.
        """
        if not terms or through_seq <= 0 or limit <= 0:
            return []
        if self.db.dialect != "sqlite":
            # PostgreSQL (issue 4) adds its branch here: the same filter over
            # a tsvector of messages.content, ranked by ts_rank_cd. Until then
            # a PostgreSQL session is simply not given recalled excerpts.
            return []
        rows = await self.db.fetchall(
            f"SELECT {RECALL_COLUMNS} FROM messages_fts "
            "JOIN messages m ON m.id = messages_fts.rowid "
            "WHERE messages_fts MATCH ? AND m.session_id = ? AND m.seq <= ? "
            "AND m.role IN ('user', 'assistant') "
            "ORDER BY bm25(messages_fts) LIMIT ?",
            (fts5_match(terms), session_id, through_seq, limit),
        )
        return [message_from_row(row) for row in rows]
