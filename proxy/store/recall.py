"""Recall queries: the best-matching archived messages of one session.

PostgreSQL ranks a session's archived rows over the search ``tsvector``.
SQLite keeps a full-text index for recall alone (migration 0005): each
session's user and assistant messages sit under rowids ``(key << 24) + seq``,
a contiguous range per session, so a query reads only the session's own
postings and costs the same in a database of one session or ten thousand.
"""

from __future__ import annotations

from collections.abc import Sequence

from compaction import Message
from proxy.store.core import CoreStore, message_from_row
from proxy.store.textsearch import PG_CONFIG

__all__ = ["RecallStore", "fts5_match"]

RECALL_COLUMNS = (
    "m.seq, m.turn, m.role, m.content, m.parts, m.name, m.tool_calls, m.tool_call_id, "
    "m.token_count, m.created_at"
)
# Low bits of a recall rowid: the message's seq within its session.
SEQ_BITS = 24


def fts5_match(terms: Sequence[str]) -> str:
    """An FTS5 query matching any of ``terms``, each quoted so no word is read as syntax."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


class RecallStore(CoreStore):
    """Full-text search over a session's archive, for recall on the turn path."""

    async def recall_messages(
        self,
        session_id: str,
        through_seq: int,
        terms: Sequence[str],
        limit: int,
        *,
        required: Sequence[str] | None = None,
    ) -> list[Message]:
        """User and assistant messages with ``seq ≤ through_seq`` best matching any term.

        Best first, by BM25 over all ``terms``; with ``required``, only
        messages containing at least one of those words. Empty when there is
        nothing to search for.
        """
        if not terms or through_seq <= 0 or limit <= 0:
            return []
        if self.db.dialect == "postgresql":
            return await self._recall_postgres(session_id, through_seq, terms, limit, required)
        match = fts5_match(terms)
        if required and list(required) != list(terms):
            match = f"({fts5_match(required)}) AND ({match})"
        seq_mask = (1 << SEQ_BITS) - 1
        # Rank inside the index first, then read only the winners' rows.
        rows = await self.db.fetchall(
            f"SELECT {RECALL_COLUMNS} FROM ("
            "SELECT rowid AS hit, bm25(recall_fts) AS score FROM fts.recall_fts "
            "WHERE recall_fts MATCH ? AND rowid BETWEEN "
            f"(SELECT key << {SEQ_BITS} FROM recall_sessions WHERE session_id = ?) AND "
            f"(SELECT (key << {SEQ_BITS}) + ? FROM recall_sessions WHERE session_id = ?) "
            "ORDER BY score LIMIT ?) best "
            f"CROSS JOIN messages m ON m.session_id = ? AND m.seq = (best.hit & {seq_mask}) "
            "ORDER BY best.score",
            (match, session_id, through_seq, session_id, limit, session_id),
        )
        return [message_from_row(row) for row in rows]

    async def _recall_postgres(
        self,
        session_id: str,
        through_seq: int,
        terms: Sequence[str],
        limit: int,
        required: Sequence[str] | None,
    ) -> list[Message]:
        # The session's rows come through the (session_id, seq) index of
        # migration postgres_0005 and are ranked over the search tsvector;
        # each term is its own plainto_tsquery, OR-ed, so no word is syntax.
        def any_of(words: Sequence[str]) -> str:
            return " || ".join(f"plainto_tsquery('{PG_CONFIG}', ?)" for _ in words)

        needed = list(required or terms)
        rows = await self.db.fetchall(
            f"SELECT {RECALL_COLUMNS} FROM messages m, "
            f"(SELECT {any_of(terms)} AS q, {any_of(needed)} AS r) found "
            "WHERE m.session_id = ? AND m.seq <= ? AND m.role IN ('user', 'assistant') "
            "AND m.content_tsv @@ found.r "
            "ORDER BY ts_rank_cd(m.content_tsv, found.q) DESC, m.seq DESC LIMIT ?",
            (*terms, *needed, session_id, through_seq, limit),
        )
        return [message_from_row(row) for row in rows]
