"""Recall from the archive, end to end through the proxy, and the recall index itself."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from compaction import Fact, Memory, MemoryRenderer, Message, TiktokenCounter
from compaction.render import MEMORY_HEADER, RECALL_HEADER
from proxy.errors import StorageError
from proxy.live import LiveSession
from proxy.recall import FULL_RANK_ARCHIVE, ArchiveRecall
from proxy.store import SqlStore, TurnCommit, database_for
from proxy.store.records import new_pending_id
from tests.conftest import Proxy, ProxyFactory
from tests.fake_upstream import FakeUpstream

SECRET = "The spare keys are in the blue tin behind the printer."
FILLER = [
    "Could you help me think through naming things in a codebase?",
    "Any thoughts on keeping meetings short?",
    "Please walk me through reviewing pull requests kindly.",
    "What would you say regarding picking good test names?",
]


def say(proxy: Proxy, text: str, key: str = "recall") -> dict[str, str]:
    response = proxy.client().chat.completions.with_raw_response.create(
        model="hermes",
        messages=[{"role": "user", "content": text}],
        extra_headers={"X-Hermes-Session-Id": key},
    )
    proxy.settle()
    return dict(response.headers)


def long_session(proxy: Proxy, turns: int = 40) -> None:
    say(proxy, "Hi there, a few things before we start.")
    say(proxy, SECRET)
    for i in range(turns):
        say(proxy, f"{FILLER[i % len(FILLER)]} (part {i})")


def content(message: dict[str, Any]) -> str:
    return str(message.get("content") or "")


def test_recall_brings_back_an_archived_sentence_the_memory_dropped(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    with make_proxy(budget=1000, recall_share=0.15) as proxy:
        long_session(proxy)
        headers = say(proxy, "Where are the spare keys again?")
        sent = upstream.chats[-1].messages
        assert int(headers["x-hermes-context-tokens"]) <= 1000
        recalled = sent[-2]
        assert content(recalled).startswith(RECALL_HEADER)
        assert "turn 2 (" in content(recalled) and SECRET in content(recalled)
        assert content(recalled).endswith("[End of excerpts]")
        assert sent[-1] == {"role": "user", "content": "Where are the spare keys again?"}
        # Only recall has it: it is neither in the memory nor in the recent window.
        assert not any(SECRET in content(m) for m in sent[:-2])
        # Order for prompt caching: memory (if any) first, the window, then the excerpts.
        assert all(not content(m).startswith(MEMORY_HEADER) for m in sent[1:])
        assert all(not content(m).startswith(RECALL_HEADER) for m in sent[:-2])


def test_recall_can_be_turned_off(make_proxy: ProxyFactory, upstream: FakeUpstream) -> None:
    with make_proxy(budget=1000, recall_share=0.15, recall=False) as proxy:
        long_session(proxy)
        say(proxy, "Where are the spare keys again?")
        sent = upstream.chats[-1].messages
        assert not any(content(m).startswith(RECALL_HEADER) for m in sent)
        assert not any(SECRET in content(m) for m in sent)


def counting(proxy: Proxy) -> list[int]:
    store = proxy.services.store
    calls: list[int] = []
    original: Callable[..., Any] = store.recall_messages

    async def recall_messages(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return await original(*args, **kwargs)

    store.recall_messages = recall_messages  # type: ignore[method-assign]
    return calls


def test_nothing_is_searched_before_anything_is_archived(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    with make_proxy(budget=1000, recall_share=0.15) as proxy:
        calls = counting(proxy)
        for text in FILLER:
            say(proxy, text)
        assert calls == []
        with proxy.db() as db:
            (memory,) = db.execute("SELECT memory FROM session_state").fetchone()
        assert '"through_seq":0' in memory
        long_session(proxy, turns=30)
        assert calls, "once turns are archived, each new message is searched for"


async def _store_turns(path: Path) -> tuple[SqlStore, list[str]]:
    store = SqlStore(database_for(str(path)))
    await store.open()
    ids = []
    for key, texts in (
        ("a", ["We keep the spare keys in a blue tin.", "Noted, a blue tin."]),
        ("b", ["My blue tin is full of buttons.", "Buttons, nice."]),
    ):
        record = await store.create_session("default", key)
        ids.append(record.id)
        messages = [
            Message(role, text, tokens=5, seq=i + 1, turn=1, created_at=1.0)
            for i, (role, text) in enumerate(zip(("user", "assistant"), texts, strict=True))
        ]
        tool = Message("tool", "blue tin inventory", tool_call_id="c1", tokens=5, seq=3, turn=1)
        pending = new_pending_id()  # no pending row: nothing waits on an upstream here
        await store.commit_turn(
            TurnCommit(record.id, pending, [*messages, tool], None, None, 0, 0, 1.0)
        )
    await store.index_pending()  # the server's indexer does this every 250 ms
    return store, ids


def test_the_recall_index_is_per_session_and_follows_deletes(tmp_path: Path) -> None:
    async def scenario() -> None:
        store, (a, b) = await _store_turns(tmp_path / "recall.db")
        try:
            found = await store.recall_messages(a, 3, ["spare", "keys", "blue"], 10)
            assert [m.content for m in found] == [
                "We keep the spare keys in a blue tin.",  # best first
                "Noted, a blue tin.",
            ]
            assert all(m.role != "tool" for m in found)
            # ``required``: only messages naming one of those words, ranked on all terms.
            narrowed = await store.recall_messages(a, 3, ["blue", "spare"], 10, required=["spare"])
            assert [m.content for m in narrowed] == ["We keep the spare keys in a blue tin."]
            assert [m.seq for m in await store.recall_messages(a, 1, ["blue"], 10)] == [1]
            other = await store.recall_messages(b, 3, ["buttons"], 10)
            assert {m.content for m in other} == {
                "Buttons, nice.",
                "My blue tin is full of buttons.",
            }
            assert await store.recall_messages(a, 3, ["buttons"], 10) == []
            assert await store.recall_messages(a, 0, ["blue"], 10) == []
            await store.db.write([("DELETE FROM sessions WHERE id = ?", (a,))])
            await store.index_pending()
            row = await store.db.fetchone(
                "SELECT count(*) AS n FROM fts.recall_fts WHERE recall_fts MATCH 'spare'"
            )
            assert row is not None and row["n"] == 0
            assert len(await store.recall_messages(b, 3, ["blue"], 10)) == 1
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_failing_recall_query_does_not_fail_the_turn(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    with make_proxy(budget=1000, recall_share=0.15) as proxy:
        long_session(proxy, turns=30)

        async def broken(*args: Any, **kwargs: Any) -> Any:
            raise StorageError("database read failed: disk I/O error")

        proxy.services.store.recall_messages = broken  # type: ignore[method-assign]
        headers = say(proxy, "Where are the spare keys again?")
        assert int(headers["x-hermes-context-tokens"]) <= 1000
        assert not any(content(m).startswith(RECALL_HEADER) for m in upstream.chats[-1].messages)
        assert proxy.pending() == []
        assert proxy.transcript("recall")[-1]["role"] == "assistant"


class CountingStore:
    """A recall store that records each archive query it is asked."""

    def __init__(self) -> None:
        self.queries: list[list[str]] = []
        self.required: list[list[str]] = []

    async def recall_messages(
        self,
        session_id: str,
        through_seq: int,
        terms: Sequence[str],
        limit: int,
        *,
        required: Sequence[str] | None = None,
    ) -> list[Message]:
        self.queries.append(list(terms))
        self.required.append(list(required or terms))
        return [Message("user", "Kubernetes was dropped in March over its cost.", seq=1, turn=1)]


def test_recall_skips_the_archive_when_the_context_already_names_everything() -> None:
    window = [
        Message("user", "The deployment pipeline keeps failing on staging.", seq=11, turn=6),
        Message("assistant", "Let us look at the staging deployment logs.", seq=12, turn=6),
    ]
    live = LiveSession(
        id="s",
        tenant="default",
        key="k",
        last_seq=12,
        last_turn=6,
        version=1,
        memory=Memory(
            facts=(Fact("bus", "We picked Kafka for the event bus.", 1, 0.0),), through_seq=10
        ),
        system=(),
        window=window,
    )
    store = CountingStore()
    recall = ArchiveRecall(store, MemoryRenderer(TiktokenCounter()))  # type: ignore[arg-type]

    async def scenario() -> None:
        assert await recall(live, [Message("user", "Why does the staging deployment fail?")]) == []
        assert await recall(live, [Message("user", "Is Kafka still our event bus?")]) == []
        assert store.queries == []  # every word is in the window or the memory
        found = await recall(
            live, [Message("user", "What did we decide about Kubernetes for staging?")]
        )
        assert len(store.queries) == 1 and {"Kubernetes", "staging"} <= set(store.queries[0])
        assert store.required == store.queries  # a short archive: every match is ranked
        assert [m.content for m in found] == ["Kubernetes was dropped in March over its cost."]
        await recall(live, [Message("user", "What did we decide about Kubernetes for staging?")])
        assert len(store.queries) == 1  # the same question, same archive: answered from memory
        # A long archive: only excerpts naming what is out of view are ranked.
        live.memory = replace(live.memory, through_seq=FULL_RANK_ARCHIVE + 1)
        await recall(live, [Message("user", "What did we decide about Kubernetes for staging?")])
        assert store.required[-1] == ["Kubernetes"]

    asyncio.run(scenario())
