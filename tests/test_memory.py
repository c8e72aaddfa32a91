"""The facts ledger and both summarizers: supersession, causes, survival, failure."""

from __future__ import annotations

import asyncio
import doctest
import importlib
from typing import Any

import orjson
import pytest

from compaction import (
    ExtractiveSummarizer,
    Ledger,
    LLMSummarizer,
    Memory,
    MemoryRenderer,
    Message,
    TiktokenCounter,
)
from compaction.render import render_memory_text
from compaction.subjects import subject_of
from compaction.summarizer import Completion, InvalidOutput, parse_update

RENDERER = MemoryRenderer(TiktokenCounter())
EXTRACTIVE = ExtractiveSummarizer(RENDERER)
FILLER = [
    "Could you help me think through naming things in a codebase?",
    "Because reviewers lose focus after about 40 minutes, shorter diffs get better feedback.",
    "Teams at Google and Shopify have written about this, and their advice is similar.",
    "I read that Netflix runs hundreds of microservices; is that typical?",
    "A friend's startup moved from MongoDB to DynamoDB in 2019; was that wise?",
    "Should we ever consider Cassandra for anything?",
    "Thanks, that helps a lot.",
    "In 2017, a lot of teams moved to containers, and the tooling improved quickly.",
]


def turns(*texts: str, start: int = 1) -> list[Message]:
    out = []
    for i, text in enumerate(texts):
        turn = start + i
        out.append(Message("user", text, seq=2 * turn - 1, turn=turn, created_at=1.7e9))
        out.append(Message("assistant", "Noted.", seq=2 * turn, turn=turn, created_at=1.7e9))
    return out


def fold(*texts: str, memory: Memory | None = None, limit: int = 2000, start: int = 1) -> Memory:
    return EXTRACTIVE.fold(memory or Memory(), turns(*texts, start=start), limit)


@pytest.mark.parametrize(
    ("before", "after", "subject"),
    [
        (
            "We're committed to microservices for the platform.",
            "We merged all the services back into a monolith because cross-service deploys "
            "kept breaking.",
            "architecture",
        ),
        (
            "Our main DB is MongoDB.",
            "We moved the database off MongoDB and onto PostgreSQL, since reporting needed joins.",
            "database",
        ),
        (
            "Our release cadence is weekly.",
            "We changed the release cadence to every two weeks because QA couldn't keep up.",
            "release cadence",
        ),
        (
            "The billing service is owned by Ines Moreau.",
            "Kofi Tanaka took over the billing service after Ines Moreau moved to the data team.",
            "billing service",
        ),
        (
            "We use RabbitMQ for background jobs.",
            "We replaced RabbitMQ with SQS because nobody wanted to babysit the broker.",
            "message queue",
        ),
    ],
)
def test_a_contradicted_fact_is_superseded_and_reported_as_a_reversal(
    before: str, after: str, subject: str
) -> None:
    memory = fold(before)
    memory = fold(*FILLER, memory=memory, start=2)
    memory = fold(after, memory=memory, start=20)
    texts = [f.text for f in memory.facts]
    assert after in texts and before not in texts
    (reversal,) = memory.reversals
    assert (reversal.subject, reversal.before, reversal.after) == (subject, before, after)
    assert (reversal.before_turn, reversal.turn) == (1, 20)
    assert reversal.reason
    rendered = render_memory_text(memory)
    assert f'"{before}" (turn 1), replaced at turn 20' in rendered
    assert "current as of turn 20" in rendered


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("We use Kafka for events.", "We use RabbitMQ for background jobs."),
        ("Our backend is written in Java.", "We run Python 3.12 in production."),
        ("Our database is MongoDB.", "A friend's startup moved from MongoDB to DynamoDB."),
        ("Our database is PostgreSQL 15 on RDS.", "Remember, our database is PostgreSQL 15."),
    ],
)
def test_other_subjects_hearsay_and_restatements_are_not_reversals(first: str, second: str) -> None:
    memory = fold(first, second)
    assert not memory.reversals
    assert first in [f.text for f in memory.facts]


def test_the_fact_named_outright_is_the_one_superseded() -> None:
    memory = fold(
        "The backend is Python.",
        "We run Python 3.12.6 in production.",
        "The backend is Go now, since the old Python code couldn't keep up with load.",
    )
    (reversal,) = memory.reversals
    assert reversal.before == "The backend is Python."
    assert "We run Python 3.12.6 in production." in [f.text for f in memory.facts]


def test_a_refinement_replaces_the_fact_without_a_reversal() -> None:
    memory = fold("Our database is PostgreSQL.", "Our database is PostgreSQL 15 on RDS.")
    assert [f.text for f in memory.facts] == ["Our database is PostgreSQL 15 on RDS."]
    assert not memory.reversals


def test_subjects_are_recognized_across_wordings() -> None:
    same = [
        ("We're committed to microservices.", "We merged all services back into a monolith."),
        ("Our main DB is MongoDB.", "We migrated the database to PostgreSQL."),
        ("The daily standup is at 9:30.", "We moved the standup to 10:15."),
        ("Background jobs run on Celery.", "We use Sidekiq for background jobs now."),
    ]
    for a, b in same:
        assert subject_of(a).same_as(subject_of(b)), (a, b)
    different = [
        ("We use Kafka for events.", "We use RabbitMQ for background jobs."),
        ("Our backend is written in Python.", "Our backend is hosted on AWS."),
    ]
    for a, b in different:
        assert not subject_of(a).same_as(subject_of(b)), (a, b)


def test_a_causal_statement_keeps_its_cause() -> None:
    memory = fold(
        "We removed Redis because stale prices caused 3 outages.",
        "We pinned numpy to 1.26.4. That's because version 2 broke our pickled models.",
        "After the outage in March we turned off autoscaling on the import workers.",
    )
    shown = render_memory_text(memory)
    assert "We removed Redis because stale prices caused 3 outages." in shown
    assert "pinned numpy to 1.26.4. That's because version 2 broke our pickled models." in shown
    assert "After the outage in March we turned off autoscaling" in shown


def test_the_timeline_keeps_order_and_dates() -> None:
    events = (
        "On 2024-03-14 we launched the public beta.",
        "The big outage happened on May 1, 2024, when the primary disk filled up.",
        "We tried GraphQL in Q1, then reverted in Q2 because of N+1 queries.",
        "We shipped version 2.0 on June 3, 2024.",
    )
    memory = fold(*events)
    shown = render_memory_text(memory)
    assert all(event in shown for event in events)
    turns_in_order = [int(line.split()[1]) for line in memory.summary]
    assert turns_in_order == sorted(turns_in_order) and len(turns_in_order) >= 3
    assert "On 2023-11-14:" in shown  # the day the turns happened, once


PLANTED = [
    "My name is Dana Whitfield.",
    "Our team has 14 engineers.",
    "Our staging server is stg-eu-12.internal.",
    "We chose Kafka for the event pipeline because we need to replay events.",
    "The launch deadline is June 30.",
    "Our uptime target is 99.95%.",
]


def test_facts_survive_many_rounds_of_compaction() -> None:
    memory = fold(*PLANTED, limit=400)
    turn = len(PLANTED) + 1
    for _ in range(150):
        memory = fold(*FILLER, memory=memory, limit=400, start=turn)
        turn += len(FILLER)
        assert RENDERER.render(memory).tokens <= 400
    assert [f.text for f in memory.facts] == PLANTED
    assert memory.through_turn == turn - 1


def test_filler_never_pushes_out_facts_when_memory_is_full() -> None:
    memory = fold(*PLANTED, limit=2000)
    noise = Memory(
        facts=memory.facts,
        summary=tuple(
            f"turn {t} (2024-01-01, assistant): Because of {t} things, it's fine."
            for t in range(200)
        ),
    )
    fitted = EXTRACTIVE.fold(noise, [], 300)
    assert [f.text for f in fitted.facts] == PLANTED
    assert RENDERER.render(fitted).tokens <= 300


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def llm(reply: str | Exception) -> LLMSummarizer:
    async def complete(messages: list[dict[str, Any]]) -> Completion:
        if isinstance(reply, Exception):
            raise reply
        return Completion(reply, tokens=42)

    return LLMSummarizer(complete, RENDERER, EXTRACTIVE)


@pytest.mark.parametrize(
    "reply",
    [ConnectionError("upstream down"), "not json at all", "[]", '{"other": 1}', ""],
)
def test_a_summarizer_failure_loses_no_information(reply: str | Exception) -> None:
    evicted = turns(*PLANTED, *FILLER)
    summary = run(llm(reply).summarize(Memory(), evicted, 1000))
    assert summary.error is not None
    assert [f.text for f in summary.memory.facts] == PLANTED
    assert summary.memory.through_seq == evicted[-1].seq


def test_the_model_update_is_validated_and_merged_into_the_ledger() -> None:
    before = fold("We're committed to microservices for the platform.", "Our team has 9 engineers.")
    update = {
        "facts": [
            {"subject": "team size", "text": "The team grew to 12 engineers.", "turn": 30},
            {"subject": "user name", "text": "The user is Dana.", "turn": "thirty"},
            {"text": ""},
            "not an object",
        ],
        "changes": [
            {
                "subject": "architecture",
                "before": "We're committed to microservices for the platform.",
                "after": "We merged the services back into a monolith.",
                "turn": 31,
                "reason": "deploys kept breaking",
            }
        ],
        "summary": ["turn 31: merged the services back because deploys kept breaking", 7],
    }
    evicted = turns("filler", start=30) + turns("more filler", start=31)
    summary = run(
        llm("```json\n" + orjson.dumps(update).decode() + "\n```").summarize(before, evicted, 1000)
    )
    assert summary.error is None and summary.tokens == 42
    facts = {f.text: f for f in summary.memory.facts}
    assert set(facts) == {
        "The team grew to 12 engineers.",
        "The user is Dana.",
        "We merged the services back into a monolith.",
    }
    assert facts["The user is Dana."].turn == 31  # an invalid turn becomes the last evicted one
    changes = {r.subject: r for r in summary.memory.reversals}
    assert changes["architecture"].reason == "deploys kept breaking"
    assert changes["architecture"].before_turn == 1
    assert changes["team size"].before == "Our team has 9 engineers."
    assert summary.memory.summary[-1].startswith("turn 31: merged")
    parsed = parse_update(orjson.dumps(update).decode(), 30, 31)
    assert parsed.rejected == 3  # the empty fact, the string, the number in the summary


@pytest.mark.parametrize("text", ["", "no braces", "[1, 2]", '{"facts": 3', '{"x": []}'])
def test_unusable_model_output_is_rejected(text: str) -> None:
    with pytest.raises(InvalidOutput):
        parse_update(text, 1, 2)


def test_the_ledger_records_a_change_it_cannot_match() -> None:
    ledger = Ledger()
    ledger.add("We host on GCP now.", turn=5, at=0.0, before="We hosted on AWS.", change=True)
    (reversal,) = ledger.reversals
    assert (reversal.before, reversal.after, reversal.before_turn) == (
        "We hosted on AWS.",
        "We host on GCP now.",
        0,
    )


@pytest.mark.parametrize(
    "module",
    [
        "compaction.cues",
        "compaction.subjects",
        "compaction.ledger",
        "compaction.recall",
        "compaction.extractive",
        "compaction.context",
        "compaction.tokens",
    ],
)
def test_documented_examples(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0


def test_a_chain_of_changes_marks_only_the_latest_value_current() -> None:
    memory = fold(
        "Our standup is at 9:00.",
        "We moved the standup to 9:30 because of the school run.",
        "We moved the standup to 10:15 so the Lisbon folks can join.",
    )
    shown = render_memory_text(memory).splitlines()
    assert [f.text for f in memory.facts] == [
        "We moved the standup to 10:15 so the Lisbon folks can join."
    ]
    changes = [line for line in shown if line.startswith("- standup: ")]
    assert changes == [
        '- standup: "Our standup is at 9:00." (turn 1) -> later "We moved the standup to 9:30 '
        'because of the school run." (turn 2)',
        '- standup: "We moved the standup to 9:30 because of the school run." (turn 2), '
        "replaced at turn 3",
    ]
    # With the current fact trimmed away, its change line says which value holds.
    trimmed = render_memory_text(Memory(reversals=memory.reversals))
    assert '-> now "We moved the standup to 10:15' in trimmed
