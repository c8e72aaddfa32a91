"""Full-text search over messages with one query syntax on both backends.

The syntax (DESIGN §5): words (all must match), ``"exact phrases"``,
``OR`` between alternatives, ``NOT word`` or ``-word`` to exclude, and
``prefix*``. :meth:`SearchQuery.parse` reads it once; each backend gets it in
its own terms — an FTS5 ``MATCH`` expression on SQLite, a ``tsquery`` built
by ``phraseto_tsquery``/``to_tsquery`` on PostgreSQL. (``websearch_to_tsquery``
would do on PostgreSQL alone, but has no prefix operator, and SQLite would
then speak a different syntax.) Every term is tokenized by the backend's own
document tokenizer, so ``15.2``, ``gpt-4o`` or an e-mail address match the
way they were indexed. User text never becomes query syntax: it is passed as
an argument, quoted.

A search query, on either backend::

    query = SearchQuery.parse('redis "stale prices" -memcached')
    match = message_match(store.db.dialect, query)
    rows = await store.db.fetchall(
        f"SELECT m.session_id, m.seq, {match.snippet} AS snippet "
        f"FROM messages m {match.join} JOIN sessions s ON s.id = m.session_id "
        f"WHERE s.tenant = ? AND {match.where} ORDER BY {match.order} LIMIT ?",
        (*match.join_args, tenant, *match.where_args, limit),
    )
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Match", "SearchQuery", "Term", "message_match"]

OPERATORS = frozenset({"AND", "OR", "NOT"})

# The text search configuration of postgres_0001 (English stemming, no stop words).
PG_CONFIG = "hermes_english"

_TOKENS = re.compile(r'"([^"]*)("?)|(\S+)')
# A character both tokenizers index (FTS5 unicode61 and PostgreSQL's parser
# treat "_" as a separator, so a term of underscores would match nothing).
_WORD = re.compile(r"[^\W_]", re.UNICODE)
_PLAIN_WORD = re.compile(r"\w+", re.UNICODE)
_BARE_PREFIX = re.compile(r"\w+\*", re.UNICODE)


@dataclass(frozen=True, slots=True)
class Term:
    """Words that must appear together, in order; ``prefix``: the last may go on."""

    text: str
    prefix: bool = False

    def fts5(self) -> str:
        quoted = '"' + self.text.replace('"', '""') + '"'
        return quoted + "*" if self.prefix else quoted

    def tsquery(self) -> tuple[str, list[Any]]:
        if self.prefix:
            # A prefix term is one bare word (see parse): quote it for to_tsquery.
            return f"to_tsquery('{PG_CONFIG}', ?)", ["'" + self.text + "':*"]
        return f"phraseto_tsquery('{PG_CONFIG}', ?)", [self.text]

    def __str__(self) -> str:
        if self.prefix:
            return self.text + "*"
        if _PLAIN_WORD.fullmatch(self.text) and self.text not in OPERATORS:
            return self.text
        return '"' + self.text.replace('"', " ") + '"'


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A parsed query: every group must match (any term of it); no excluded term may."""

    groups: tuple[tuple[Term, ...], ...]
    excluded: tuple[Term, ...] = ()
    lenient: bool = False
    """Part of the text was not query syntax and was read as plain words: a
    quote left open, an operator with nothing to apply to, punctuation inside
    a word (``C++``, ``gpt-4o``, ``a:b``), a chunk with no word in it."""

    @classmethod
    def parse(cls, text: str) -> SearchQuery:
        """Read the query syntax, leniently; ``ValueError`` if nothing is left to look for."""
        groups: list[list[Term]] = []
        excluded: list[Term] = []
        pending_or = negate = lenient = False
        operator = False  # an operator waits for the term it applies to
        for match in _TOKENS.finditer(text):
            phrase, closed, bare = match.groups()
            if bare in ("OR", "|"):
                pending_or = bool(groups)
                lenient = lenient or not groups or operator
                operator = True
                continue
            if bare in ("NOT", "AND"):
                lenient = lenient or (operator and not (bare == "NOT" and pending_or))
                negate = negate or bare == "NOT"
                operator = True
                continue
            if bare is not None and bare.startswith("-") and len(bare) > 1:
                negate, bare = True, bare[1:]
            if phrase is not None and not closed:
                lenient = True
            term = _term(phrase, bare)
            if term is None:
                lenient = True
                continue
            if bare is not None and not term.prefix and not _PLAIN_WORD.fullmatch(bare):
                lenient = True
            if negate:
                excluded.append(term)
            elif pending_or:
                groups[-1].append(term)
            else:
                groups.append([term])
            pending_or = negate = operator = False
        if not groups:
            raise ValueError(
                "the search query needs at least one word to look for "
                '(words, "phrases", OR, NOT or -word, prefix*)'
            )
        return cls(tuple(tuple(g) for g in groups), tuple(excluded), lenient or operator)

    def __str__(self) -> str:
        """The query in its own syntax, as it is run."""
        positive = " ".join(" OR ".join(map(str, group)) for group in self.groups)
        return positive + "".join(f" NOT {t}" for t in self.excluded)

    def fts5(self) -> str:
        """The query as an SQLite FTS5 ``MATCH`` expression."""
        positive = " AND ".join(
            "(" + " OR ".join(t.fts5() for t in group) + ")" for group in self.groups
        )
        return positive + "".join(f" NOT {t.fts5()}" for t in self.excluded)

    def tsquery(self) -> tuple[str, list[Any]]:
        """The query as a PostgreSQL ``tsquery`` expression and its arguments."""
        args: list[Any] = []

        def render(term: Term) -> str:
            sql, term_args = term.tsquery()
            args.extend(term_args)
            return sql

        parts = ["(" + " || ".join(render(t) for t in group) + ")" for group in self.groups]
        parts += [f"!!{render(t)}" for t in self.excluded]
        return "(" + " && ".join(parts) + ")", args


def _term(phrase: str | None, bare: str | None) -> Term | None:
    if phrase is not None:
        text = " ".join(phrase.split())
        return Term(text) if _WORD.search(text) else None
    assert bare is not None
    if _BARE_PREFIX.fullmatch(bare):
        return Term(bare[:-1], prefix=True)
    # Anything else is taken as a phrase of its words: "gpt-4o", "15.2", "a.b@c.d".
    text = bare.rstrip("*")
    return Term(text) if _WORD.search(text) else None


@dataclass(frozen=True, slots=True)
class Match:
    """SQL fragments that find messages (alias ``m``) matching a query.

    ``join`` goes after ``FROM messages m``, ``where`` into the WHERE clause,
    ``order`` into ORDER BY (ascending: best first), ``snippet`` into the
    select list (an excerpt with the hits in ``[`` ``]``). Arguments: first
    ``join_args``, then ``where_args``, where their fragments stand.
    """

    join: str
    join_args: tuple[Any, ...]
    where: str
    where_args: tuple[Any, ...]
    order: str
    snippet: str


def message_match(dialect: str, query: SearchQuery, marks: tuple[str, str] = ("[", "]")) -> Match:
    """The fragments that run ``query`` on ``dialect``; excerpts put hits between ``marks``."""
    start, stop = marks
    if dialect == "sqlite":
        return Match(
            join="JOIN fts.messages_fts ON messages_fts.rowid = m.id",
            join_args=(),
            where="messages_fts MATCH ?",
            where_args=(query.fts5(),),
            order="messages_fts.rank",
            snippet=f"snippet(messages_fts, 0, {_literal(start)}, {_literal(stop)}, '…', 16)",
        )
    if dialect == "postgresql":
        tsquery, args = query.tsquery()
        options = (
            f"StartSel={_option(start)}, StopSel={_option(stop)}, "
            "MaxWords=16, MinWords=6, MaxFragments=1, FragmentDelimiter=…"
        )
        return Match(
            join=f"CROSS JOIN LATERAL (SELECT {tsquery} AS q) AS search",
            join_args=tuple(args),
            where="m.content_tsv @@ search.q",
            where_args=(),
            order="-ts_rank_cd(m.content_tsv, search.q)",
            snippet=(
                f"ts_headline('{PG_CONFIG}', coalesce(m.content, ''), search.q, "
                f"{_literal(options)})"
            ),
        )
    raise ValueError(f"no full-text search for dialect {dialect!r}")


def _literal(text: str) -> str:
    """``text`` as an SQL string literal (the marks are the caller's, never a user's)."""
    return "'" + text.replace("'", "''") + "'"


def _option(text: str) -> str:
    """A ``ts_headline`` option value: double-quoted, so spaces and commas are allowed."""
    return '"' + text.replace('"', '""') + '"'
