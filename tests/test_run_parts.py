"""The pure parts of runs: what a step sends, inherited facts, event wakeups."""

from __future__ import annotations

import asyncio

import pytest

from compaction import ExtractiveSummarizer, Fact, Memory, MemoryRenderer, Message, TiktokenCounter
from compaction.carryover import long_term_memory
from proxy.events import EventHub
from proxy.run_step import NOT_RUN, step_messages
from proxy.store.runs import RunInput

CALLS = [
    {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
    {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
]


def given(*messages: dict[str, object]) -> list[RunInput]:
    return [RunInput(i, "run", 0, dict(m), 0.0) for i, m in enumerate(messages)]


def test_tool_results_come_first_in_call_order_and_missing_ones_are_answered() -> None:
    tail = [Message("user", "do it"), Message("assistant", None, tool_calls=CALLS)]
    inputs = given(
        {"role": "user", "content": "also this"},
        {"role": "tool", "tool_call_id": "b", "content": "B"},
    )
    sent = [m.to_openai() for m in step_messages(tail, inputs, "Be brief.")]
    assert sent == [
        {"role": "system", "content": "Be brief."},
        {"role": "tool", "content": NOT_RUN, "tool_call_id": "a"},
        {"role": "tool", "content": "B", "tool_call_id": "b"},
        {"role": "user", "content": "also this"},
    ]


def test_nothing_dangles_once_answered_or_after_a_user_message() -> None:
    answered = [
        Message("assistant", None, tool_calls=CALLS),
        Message("tool", "A", tool_call_id="a"),
        Message("tool", "B", tool_call_id="b"),
        Message("assistant", "done"),
    ]
    inputs = given({"role": "user", "content": "next"})
    assert [m.role for m in step_messages(answered, inputs, None)] == ["user"]
    moved_on = [Message("assistant", None, tool_calls=CALLS), Message("user", "hm")]
    assert [m.role for m in step_messages(moved_on, inputs, None)] == ["user"]


def test_long_term_memory_merges_threads_and_the_newest_fact_wins() -> None:
    extractive = ExtractiveSummarizer(MemoryRenderer(TiktokenCounter()))
    old = Memory(facts=(Fact("database", "Our database is MySQL 8.", 3, 10.0),), summary=("x",))
    window = [Message("user", "Our database is PostgreSQL 15.", turn=9, created_at=20.0)]
    other = [Message("user", "My name is Alex.", turn=1, created_at=5.0)]
    merged = long_term_memory([(old, window), (Memory(), other)], extractive, 500)
    assert [f.text for f in merged.facts] == ["My name is Alex.", "Our database is PostgreSQL 15."]
    assert [(r.before, r.after) for r in merged.reversals] == [
        ("Our database is MySQL 8.", "Our database is PostgreSQL 15.")
    ]
    assert merged.summary == () and merged.through_seq == 0
    assert long_term_memory([(old, window)], extractive, 0).facts == ()


@pytest.mark.anyio
async def test_the_hub_wakes_readers_and_never_misses_a_notification() -> None:
    hub = EventHub()
    with hub.subscribe("t", "thread") as version:
        seen = version()
        hub.notify("t", "thread")  # between reading the store and waiting
        assert await hub.wait("t", "thread", seen, within=5) is True
        seen = version()
        waiter = asyncio.ensure_future(hub.wait("t", "thread", seen, within=5))
        await asyncio.sleep(0.01)
        hub.notify("t", "other")
        assert not waiter.done()
        hub.notify("t", "thread")
        assert await waiter is True
        assert await hub.wait("t", "thread", version(), within=0.01) is False
    assert hub._channels == {}


@pytest.mark.anyio
async def test_with_a_shared_database_readers_poll() -> None:
    hub = EventHub(poll_interval=0.01)
    with hub.subscribe("t", "thread") as version:
        loop = asyncio.get_running_loop()
        start = loop.time()
        assert await hub.wait("t", "thread", version(), within=10) is False
        assert loop.time() - start < 5
