"""Properties of the prompt builder that hold for any conversation, budget and summarizer output.

For any turns (plain, with tool calls, with tool results still to come), any
budget ≥ MIN_BUDGET with any valid shares, any memory (including what a
broken model might leave) and any fold function (including one that ignores
its limit): either the system prompt and new messages alone exceed the
budget and ContextTooLarge says so, or the prompt — counted independently
with OpenAI's framing — is within budget, every tool result follows the call
it answers, and the latest user message is there verbatim.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import orjson
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from compaction import (
    MIN_BUDGET,
    Budget,
    ContextTooLarge,
    ExtractiveSummarizer,
    Fact,
    LLMSummarizer,
    Memory,
    MemoryRenderer,
    Message,
    Reversal,
    TiktokenCounter,
    build_context,
    message_tokens,
    plan_eviction,
    prompt_tokens,
    units,
)
from compaction.summarizer import Completion

COUNTER = TiktokenCounter()
RENDERER = MemoryRenderer(COUNTER)
EXTRACTIVE = ExtractiveSummarizer(RENDERER)

WORDS = (
    "we use PostgreSQL 15 because joins matter; then in Q2 we switched back to MySQL "
    "the deadline is March 3 our team has 12 engineers Kafka microservices monolith "
    "should we? hello thanks ok 2024-05-01 v1.2.3 🚀 naïve \n\n - * [End of memory]"
).split(" ")
text = st.lists(st.sampled_from(WORDS), max_size=60).map(" ".join)
garbage = st.text(max_size=300)


def counted(m: Message, seq: int, turn: int) -> Message:
    return Message(
        role=m.role,
        content=m.content,
        tool_calls=m.tool_calls,
        tool_call_id=m.tool_call_id,
        tokens=message_tokens(m.to_openai(), COUNTER),
        seq=seq,
        turn=turn,
        created_at=1_700_000_000.0 + turn * 3600,
    )


@st.composite
def turn(draw: st.DrawFn, index: int) -> list[Message]:
    """One user turn: a question, then an answer, possibly through tool calls."""
    out = [Message("user", draw(text) or "hi")]
    for round_ in range(draw(st.integers(0, 2))):
        calls: list[dict[str, Any]] = [
            {
                "id": f"call_{index}_{round_}_{k}",
                "type": "function",
                "function": {"name": "lookup", "arguments": orjson.dumps({"q": k}).decode()},
            }
            for k in range(draw(st.integers(1, 2)))
        ]
        out.append(Message("assistant", None, tool_calls=calls))
        out.extend(Message("tool", draw(text) or "{}", tool_call_id=call["id"]) for call in calls)
    out.append(Message("assistant", draw(text) or "ok"))
    return out


@st.composite
def conversation(draw: st.DrawFn) -> tuple[list[Message], list[Message]]:
    """(history, new): new is a user message, or tool results continuing the last turn."""
    turns = [draw(turn(i)) for i in range(draw(st.integers(0, 12)))]
    history: list[Message] = []
    for number, messages in enumerate(turns, start=1):
        start = len(history)
        history.extend([counted(m, start + i + 1, number) for i, m in enumerate(messages)])
    number = len(turns) + 1
    continuing: bool = draw(st.booleans())
    if history and continuing:
        # The model asked for tools in the turn in progress; the client sends the results.
        question = counted(Message("user", draw(text) or "q"), len(history) + 1, number)
        calls: list[dict[str, Any]] = [
            {"id": f"call_new_{k}", "type": "function", "function": {"name": "f"}} for k in (0, 1)
        ]
        asked = counted(Message("assistant", None, tool_calls=calls), len(history) + 2, number)
        history.extend([question, asked])
        new = [
            counted(
                Message("tool", draw(text) or "{}", tool_call_id=str(c["id"])),
                len(history) + i + 1,
                number,
            )
            for i, c in enumerate(calls)
        ]
    else:
        new = [counted(Message("user", draw(text) or "hello?"), len(history) + 1, number)]
    return history, new


memories = st.builds(
    Memory,
    facts=st.lists(
        st.builds(Fact, subject=garbage, text=garbage, turn=st.integers(0, 99), at=st.just(0.0)),
        max_size=25,
    ).map(tuple),
    reversals=st.lists(
        st.builds(
            Reversal,
            subject=garbage,
            before=garbage,
            after=garbage,
            turn=st.integers(0, 99),
            at=st.just(0.0),
            reason=garbage,
        ),
        max_size=10,
    ).map(tuple),
    summary=st.lists(garbage, max_size=30).map(tuple),
)


@st.composite
def budgets(draw: st.DrawFn) -> Budget:
    memory = draw(st.floats(0.0, 0.6))
    recall = draw(st.floats(0.0, 0.85 - memory))
    new = draw(st.floats(0.0, 0.89 - memory - recall))
    return Budget(
        draw(st.integers(MIN_BUDGET, 6000)),
        memory_share=memory,
        recall_share=recall,
        new_share=new,
        step=draw(st.floats(0.01, 0.49)),
    )


def careless_fold(memory: Memory, evicted: Sequence[Message], limit: int) -> Memory:
    """A fold that ignores its limit: the builder must bound the memory itself."""
    lines = tuple(f"turn {m.turn}: {m.content}" for m in evicted)
    return Memory(facts=memory.facts, reversals=memory.reversals, summary=memory.summary + lines)


def check_tool_pairs(messages: list[dict[str, Any]]) -> None:
    for i, message in enumerate(messages):
        if message["role"] != "tool":
            continue
        j = i - 1
        while messages[j]["role"] == "tool":
            j -= 1
        caller = messages[j]
        assert caller["role"] == "assistant", "a tool result does not follow a tool call"
        assert message["tool_call_id"] in {c["id"] for c in caller["tool_calls"]}


PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(
    conversation=conversation(),
    budget=budgets(),
    memory=memories,
    split=st.floats(0.0, 1.0),
    system=st.one_of(st.none(), text, st.text(min_size=2000, max_size=6000)),
    recalled=st.lists(garbage, max_size=8),
    careless=st.booleans(),
)
def test_the_prompt_never_exceeds_the_budget(
    conversation: tuple[list[Message], list[Message]],
    budget: Budget,
    memory: Memory,
    split: float,
    system: str | None,
    recalled: list[str],
    careless: bool,
) -> None:
    history, new = conversation
    # What background compaction would already have folded: a prefix of whole units.
    evicted = plan_eviction(history, budget, 0, 0) if split > 0.5 else []
    window = history[len(evicted) :]
    system_messages = [counted(Message("system", system), 0, 0)] if system is not None else []
    excerpts = [Message("user", t or "x", seq=i, turn=i) for i, t in enumerate(recalled)]
    try:
        built = build_context(
            system=system_messages,
            memory=memory,
            window=window,
            new=new,
            budget=budget,
            renderer=RENDERER,
            fold=careless_fold if careless else EXTRACTIVE.fold,
            recall=excerpts,
        )
    except ContextTooLarge as exc:
        event("too large")
        assert exc.required > budget.total
        return
    continuing = new[0].role == "tool"
    event(f"folded={built.folded} recalled={bool(built.recalled)} tool-results={continuing}")
    assert prompt_tokens(built.messages, COUNTER) == built.tokens <= budget.total
    check_tool_pairs(built.messages)
    assert built.messages[-len(new) :] == [m.to_openai() for m in new]
    latest_user = [m for m in [*history, *new] if m.role == "user"][-1]
    assert latest_user.to_openai() in built.messages
    if system_messages:
        assert built.messages[0] == system_messages[0].to_openai()


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | garbage,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(garbage, inner, max_size=5),
    max_leaves=40,
)
ALMOST_VALID = st.fixed_dictionaries(
    {
        "facts": st.lists(
            st.fixed_dictionaries(
                {"subject": garbage, "text": garbage, "turn": st.integers(-5, 500) | garbage}
            ),
            max_size=80,
        ),
        "changes": st.lists(JSON, max_size=10),
        "summary": st.lists(garbage | JSON, max_size=80),
    }
)
OUTPUTS = st.one_of(
    garbage,
    JSON.map(lambda v: orjson.dumps(v).decode()),
    ALMOST_VALID.map(lambda v: "```json\n" + orjson.dumps(v).decode() + "\n```"),
)


@PROPERTY
@given(
    conversation=conversation(),
    budget=budgets(),
    output=OUTPUTS,
    memory=memories,
    fails=st.booleans(),
)
def test_any_summarizer_output_keeps_memory_and_prompt_in_budget(
    conversation: tuple[list[Message], list[Message]],
    budget: Budget,
    output: str,
    memory: Memory,
    fails: bool,
) -> None:
    history, new = conversation
    evicted = plan_eviction(history, budget, 0, RENDERER.render(memory).tokens)
    if not evicted and history:
        evicted = units(history)[0]  # fold at least the first whole unit
    if not evicted:
        return

    async def complete(messages: list[dict[str, Any]]) -> Completion:
        if fails:
            raise ConnectionError("upstream down")
        return Completion(output, tokens=10)

    summarizer = LLMSummarizer(complete, RENDERER, EXTRACTIVE)
    summary = asyncio.run(summarizer.summarize(memory, evicted, budget.memory_tokens))
    assert RENDERER.render(summary.memory).tokens <= budget.memory_tokens
    assert summary.memory.through_seq == evicted[-1].seq
    assert (summary.error is not None) or not fails
    window = history[len(evicted) :]
    try:
        built = build_context(
            system=[],
            memory=summary.memory,
            window=window,
            new=new,
            budget=budget,
            renderer=RENDERER,
            fold=EXTRACTIVE.fold,
        )
    except ContextTooLarge:
        return
    assert prompt_tokens(built.messages, COUNTER) <= budget.total
    check_tool_pairs(built.messages)


@PROPERTY
@given(conversation=conversation(), budget=budgets())
def test_eviction_takes_whole_units_and_keeps_the_turn_in_progress(
    conversation: tuple[list[Message], list[Message]], budget: Budget
) -> None:
    history, _ = conversation
    evicted = plan_eviction(history, budget, 0, 0)
    rest = history[len(evicted) :]
    assert history[: len(evicted)] == evicted
    assert not rest or rest[0].role != "tool"
    users = [i for i, m in enumerate(history) if m.role == "user"]
    if users:
        assert len(evicted) <= users[-1]
