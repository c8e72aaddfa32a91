"""Full-text search over a tenant's messages, grouped by session.

The query language is the engine's: on SQLite, FTS5 (keywords, ``"exact
phrase"``, ``OR``, ``NOT``, ``deploy*``). A query the engine cannot parse
(``C++``, ``"unterminated``, ``hello AND``, ``gpt-4o``) is not an error the
user has to debug: it is run again as plain words — each whitespace-separated
chunk a quoted phrase, operators dropped — and the result says so.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

from proxy.errors import StorageError
from proxy.store.fts import FtsIndex
from proxy.store.session_info import SessionInfo, load_infos

__all__ = ["Excerpt", "QueryError", "SearchHit", "SearchResult", "SessionSearch", "plain_query"]

OPERATORS = frozenset({"AND", "OR", "NOT", "NEAR"})
_WORDY = re.compile(r"\w", re.UNICODE)


class QueryError(ValueError):
    """The query has nothing that can be searched for."""


@dataclass(frozen=True, slots=True)
class Excerpt:
    seq: int
    turn: int
    role: str
    created_at: float
    text: str


@dataclass(frozen=True, slots=True)
class SearchHit:
    session: SessionInfo
    score: float
    """Relevance of the session's best message; higher is better."""
    hits: int
    """How many of its messages match."""
    excerpts: list[Excerpt]


@dataclass(frozen=True, slots=True)
class SearchResult:
    query: str
    """The query as run (the plain-words form when the original could not be parsed)."""
    rewritten: bool
    sessions: list[SearchHit]


def plain_query(query: str) -> str:
    """The query as plain words: every chunk a phrase, prefix ``*`` kept, operators dropped."""
    phrases = []
    for chunk in query.split():
        if chunk in OPERATORS:
            continue
        prefix = chunk.endswith("*")
        text = chunk.replace('"', " ").strip("* ")
        if not _WORDY.search(text):
            continue
        phrases.append(f'"{text}"' + (" *" if prefix else ""))
    return " ".join(phrases)


class SessionSearch(FtsIndex):
    """``search_sessions``: the one place with dialect-specific search SQL."""

    async def search_sessions(
        self,
        tenant: str,
        query: str,
        *,
        limit: int = 3,
        source: str | None = None,
        excerpts: int = 2,
        marks: tuple[str, str] = ("**", "**"),
    ) -> SearchResult:
        """The ``limit`` best-matching sessions of ``tenant``, best first, each with
        up to ``excerpts`` short excerpts around its best hits (hits between ``marks``)."""
        await self.index_pending()  # the last few messages are not indexed yet
        if not query.strip():
            raise QueryError("The search query is empty.")
        if self.db.dialect == "sqlite":
            try:
                return await self._search_fts5(tenant, query, limit, source, excerpts, marks)
            except StorageError as exc:
                if not isinstance(exc.__cause__, sqlite3.OperationalError):
                    raise
            plain = plain_query(query)
            if not plain:
                raise QueryError(f"The search query {query!r} has no words to search for.")
            result = await self._search_fts5(tenant, plain, limit, source, excerpts, marks)
            return SearchResult(result.query, True, result.sessions)
        # PostgreSQL (issue 4): the same two steps over a tsvector of
        # messages.content with websearch_to_tsquery, ts_rank and ts_headline.
        raise StorageError(f"Full-text search is not available on {self.db.dialect} yet.")

    async def _search_fts5(
        self,
        tenant: str,
        query: str,
        limit: int,
        source: str | None,
        excerpts: int,
        marks: tuple[str, str],
    ) -> SearchResult:
        # bm25() cannot be aggregated directly; the hidden ``rank`` column
        # (bm25 by default, lower is better) can, from a subquery.
        filter_source = "AND s.source = ?" if source is not None else ""
        rows = await self.db.fetchall(
            "SELECT session_id, MIN(rank) AS best, COUNT(*) AS hits FROM ("
            "  SELECT m.session_id AS session_id, messages_fts.rank AS rank"
            "  FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
            "  JOIN sessions s ON s.id = m.session_id"
            f"  WHERE messages_fts MATCH ? AND s.tenant = ? {filter_source}"
            ") GROUP BY session_id ORDER BY best, hits DESC, session_id LIMIT ?",
            (query, tenant, *((source,) if source is not None else ()), limit),
        )
        infos = await load_infos(self.db, [row["session_id"] for row in rows])
        found = []
        for row in rows:
            info = infos.get(row["session_id"])
            if info is None:  # deleted in between
                continue
            snippets = await self.db.fetchall(
                "SELECT m.seq, m.turn, m.role, m.created_at, "
                "snippet(messages_fts, 0, ?, ?, '…', 16) AS text "
                "FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
                "WHERE messages_fts MATCH ? AND m.session_id = ? "
                "ORDER BY messages_fts.rank, m.seq LIMIT ?",
                (marks[0], marks[1], query, row["session_id"], excerpts),
            )
            found.append(
                SearchHit(
                    session=info,
                    score=-float(row["best"]),
                    hits=int(row["hits"]),
                    excerpts=[
                        Excerpt(r["seq"], r["turn"], r["role"], r["created_at"], r["text"])
                        for r in sorted(snippets, key=lambda r: r["seq"])
                    ],
                )
            )
        return SearchResult(query, False, found)
