"""One search syntax, the same answers on SQLite (FTS5) and PostgreSQL (tsvector)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from compaction import Message
from proxy.store import SqlStore, TurnCommit, open_store
from proxy.store.textsearch import SearchQuery, Term, message_match

pytestmark = pytest.mark.anyio

CONVERSATIONS = {
    "cache": [
        "We removed Redis because stale prices caused three outages.",
        "The deployment of the new cache layer is planned for Friday.",
    ],
    "db": [
        "Our database is PostgreSQL 15.2 on RDS, reachable at ops@example.com.",
        "We tried gpt-4o for the summaries and kept it.",
    ],
    "hamlet": [
        "To be or not to be, that is the question.",
        "Memcached was considered and rejected; Redis stays out too.",
    ],
}


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[SqlStore]:
    store = await open_store(db_url)
    now = time.time()
    for key, texts in CONVERSATIONS.items():
        session = await store.create_session("default", key, now=now)
        messages = [
            Message(role="user", content=text, tokens=10, seq=i + 1, turn=i + 1, created_at=now)
            for i, text in enumerate(texts)
        ]
        await store.commit_turn(
            TurnCommit(
                session_id=session.id,
                pending_id="none",
                messages=messages,
                system=None,
                model=None,
                input_tokens=0,
                output_tokens=0,
                updated_at=now,
            )
        )
    # Noise in another tenant, which no search of "default" may return.
    other = await store.create_session("other", "cache", now=now)
    await store.commit_turn(
        TurnCommit(
            session_id=other.id,
            pending_id="none",
            messages=[Message(role="user", content="Redis stale prices", tokens=3, seq=1, turn=1)],
            system=None,
            model=None,
            input_tokens=0,
            output_tokens=0,
            updated_at=now,
        )
    )
    await store.index_pending()  # SQLite indexes in batches; searches run this first
    yield store
    await store.close()


async def search(store: SqlStore, text: str, tenant: str = "default") -> dict[str, list[str]]:
    """Hits grouped by session key, best first, each with its snippet."""
    match = message_match(store.db.dialect, SearchQuery.parse(text))
    rows = await store.db.fetchall(
        f"SELECT s.key, m.seq, {match.snippet} AS snippet "
        f"FROM messages m {match.join} JOIN sessions s ON s.id = m.session_id "
        f"WHERE s.tenant = ? AND {match.where} ORDER BY {match.order}, m.seq LIMIT ?",
        (*match.join_args, tenant, *match.where_args, 50),
    )
    grouped: dict[str, list[str]] = {}
    for row in rows:
        grouped.setdefault(row["key"], []).append(row["snippet"])
    return grouped


CASES = [
    ("redis", {"cache", "hamlet"}),
    ("Redis outages", {"cache"}),
    ('"stale prices"', {"cache"}),
    ('"prices stale"', set()),
    ("memcached OR outages", {"cache", "hamlet"}),
    ("redis -memcached", {"cache"}),
    ("redis NOT memcached", {"cache"}),
    ("outa*", {"cache"}),
    ("causes", {"cache"}),  # stemming: causes ~ caused
    ("postgres*", {"db"}),
    ("15.2", {"db"}),
    ("gpt-4o", {"db"}),
    ("ops@example.com", {"db"}),
    ('"to be or not to be"', {"hamlet"}),  # no stop words dropped
    ("question", {"hamlet"}),
    ("kubernetes", set()),
    ('redis "unbalanced', set()),
    ("it's", set()),
]


async def test_the_same_hits_on_both_backends(store: SqlStore) -> None:
    # One store for all cases: a fresh database per case would cost more than the searches.
    wrong = {}
    for query, sessions in CASES:
        found = set(await search(store, query))
        if found != sessions:
            wrong[query] = (found, sessions)
    assert not wrong, wrong


async def test_snippets_mark_the_hits(store: SqlStore) -> None:
    hits = await search(store, "outages")
    assert len(hits["cache"]) == 1
    assert "[outages]" in hits["cache"][0]


async def test_query_syntax_is_never_injected(store: SqlStore) -> None:
    for text in ["NEAR(a b)", "content:redis", "^redis", "a' OR '1'='1", "redis) OR (x", "*"]:
        try:
            query = SearchQuery.parse(text)
        except ValueError:
            continue
        await search(store, text)  # no syntax error from either engine
        assert query.groups


def test_parse() -> None:
    query = SearchQuery.parse('cache "stale  prices" OR outage* -redis NOT memcached')
    assert query.groups == ((Term("cache"),), (Term("stale prices"), Term("outage", prefix=True)))
    assert query.excluded == (Term("redis"), Term("memcached"))
    assert query.fts5() == '("cache") AND ("stale prices" OR "outage"*) NOT "redis" NOT "memcached"'
    for empty in ["", "   ", "-redis", "NOT x", "OR", '""', "*"]:
        with pytest.raises(ValueError, match="at least one word"):
            SearchQuery.parse(empty)


@pytest.mark.parametrize(
    ("text", "lenient", "shown"),
    [
        ("docker OR kubernetes", False, "docker OR kubernetes"),
        ('"docker builds" kube*', False, '"docker builds" kube*'),
        ("python NOT java -go", False, "python NOT java NOT go"),
        ("a AND b", False, "a b"),
        ("C++", True, '"C++"'),
        ('"unterminated', True, "unterminated"),
        ("hello AND", True, "hello"),
        ("OR hello", True, "hello"),
        ("hello OR", True, "hello"),
        ("gpt-4o", True, '"gpt-4o"'),
        ("a:b ___", True, '"a:b"'),
    ],
)
def test_text_that_is_not_syntax_is_read_as_plain_words(
    text: str, lenient: bool, shown: str
) -> None:
    query = SearchQuery.parse(text)
    assert (query.lenient, str(query)) == (lenient, shown)
    assert SearchQuery.parse(shown).groups == query.groups  # what is shown runs the same
