"""Full-text search over a tenant's messages, grouped by session, on either backend.

The query syntax is :mod:`proxy.store.textsearch`'s (words, ``"exact
phrase"``, ``OR``, ``NOT``/``-word``, ``deploy*``), the same on SQLite (FTS5)
and PostgreSQL (``tsvector``). Text that is not valid syntax (``C++``,
``"unterminated``, ``hello AND``, ``gpt-4o``) is not an error the user has to
debug: it is read as plain words, and the result says so and shows the query
as it was run. Only a query with no word at all (``NOT``) is an error.
"""

from __future__ import annotations

from dataclasses import dataclass

from proxy.store.fts import FtsIndex
from proxy.store.session_info import SessionInfo, load_infos
from proxy.store.textsearch import Match, SearchQuery, message_match

__all__ = ["Excerpt", "QueryError", "SearchHit", "SearchResult", "SessionSearch"]


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
    """The query as run (read as plain words where the original was not query syntax)."""
    rewritten: bool
    sessions: list[SearchHit]


class SessionSearch(FtsIndex):
    """``search_sessions``, written once: the dialect-specific fragments (FTS5
    ``MATCH`` and ``snippet``, or ``tsquery`` and ``ts_headline``) come from
    :func:`~proxy.store.textsearch.message_match`."""

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
        try:
            parsed = SearchQuery.parse(query)
        except ValueError as exc:
            raise QueryError(f"The search query {query!r} has no words to search for.") from exc
        match = message_match(self.db.dialect, parsed, marks)
        best = await self._best_sessions(tenant, match, limit, source)
        infos = await load_infos(self.db, [session_id for session_id, _, _ in best])
        found = [
            SearchHit(info, -rank, hits, await self._excerpts(session_id, match, excerpts))
            for session_id, rank, hits in best
            if (info := infos.get(session_id)) is not None  # not deleted in between
        ]
        return SearchResult(str(parsed) if parsed.lenient else query, parsed.lenient, found)

    async def _best_sessions(
        self, tenant: str, match: Match, limit: int, source: str | None
    ) -> list[tuple[str, float, int]]:
        """Sessions with matching messages: (id, best rank, matching messages), best first.

        The rank is ascending, best first (FTS5's bm25 ``rank``; PostgreSQL's
        ``ts_rank_cd`` negated); a session ranks by its best message.
        """
        filter_source = "AND s.source = ?" if source is not None else ""
        rows = await self.db.fetchall(
            "SELECT session_id, MIN(rank) AS best, COUNT(*) AS hits FROM ("
            f"  SELECT m.session_id AS session_id, {match.order} AS rank"
            f"  FROM messages m {match.join} JOIN sessions s ON s.id = m.session_id"
            f"  WHERE s.tenant = ? AND {match.where} {filter_source}"
            ") AS found GROUP BY session_id ORDER BY best, hits DESC, session_id LIMIT ?",
            (
                *match.join_args,
                tenant,
                *match.where_args,
                *((source,) if source is not None else ()),
                limit,
            ),
        )
        return [(row["session_id"], float(row["best"]), int(row["hits"])) for row in rows]

    async def _excerpts(self, session_id: str, match: Match, limit: int) -> list[Excerpt]:
        """The session's ``limit`` best-matching messages, excerpted, in transcript order."""
        rows = await self.db.fetchall(
            f"SELECT m.seq, m.turn, m.role, m.created_at, {match.snippet} AS text "
            f"FROM messages m {match.join} "
            f"WHERE m.session_id = ? AND {match.where} ORDER BY {match.order}, m.seq LIMIT ?",
            (*match.join_args, session_id, *match.where_args, limit),
        )
        return [
            Excerpt(r["seq"], r["turn"], r["role"], r["created_at"], r["text"])
            for r in sorted(rows, key=lambda r: r["seq"])
        ]
