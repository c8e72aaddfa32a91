"""Synthetic long conversations with planted items at known turns (for bench.memory).

A conversation is filler in varied wording — questions about engineering
practice, small talk, requests, long generic answers — with planted items:

* **fact** — a value about the user or the project ("Our team has 14 engineers");
* **decision** — a choice with its cause ("We moved CI to Buildkite because …");
* **event** — something that happened on a date ("The public beta went live on …");
* **reversal** — a value stated early and replaced later, with a reason
  ("We're committed to microservices" … "we merged everything back into a monolith").

Filler also carries traps a careless extractor falls for: hearsay about other
teams' stacks, hypotheticals ("should we ever try Cassandra?"), questions that
name planted subjects, and answers full of causal words, names and numbers.

Everything is drawn from one ``random.Random(seed)``: the same seed gives the
same conversation, item for item.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from bench.memory_changes import EVENTS, REVERSALS
from bench.memory_filler import ACKS, ADVICE, CLOSERS, OPENERS, SMALL_TALK, TOPICS, TRAPS
from bench.memory_pools import DECISIONS, FACTS, Scenario

__all__ = ["Conversation", "Item", "generate"]


@dataclass(frozen=True)
class Item:
    """A planted item and how to check that it was kept."""

    kind: str
    turn: int
    question: str
    answer: tuple[str, ...]
    """Phrases that must appear together in one line or message of the context."""
    old: tuple[str, ...] = ()
    """Reversals: phrases of the superseded value, which must not look current."""
    old_turn: int = 0
    statement: str = ""


@dataclass
class Conversation:
    seed: int
    turns: list[tuple[str, str]] = field(default_factory=list)
    """(user, assistant) for turns 1..N."""
    items: list[Item] = field(default_factory=list)


def _filler_user(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.12:
        return rng.choice(SMALL_TALK)
    if roll < 0.30:
        return _fill(rng, rng.choice(TRAPS))
    text = f"{rng.choice(OPENERS)} {rng.choice(TOPICS)}?"
    if rng.random() < 0.4:
        text += " " + rng.choice(CLOSERS)
    return text


def _filler_assistant(rng: random.Random) -> str:
    return " ".join(_fill(rng, s) for s in rng.sample(ADVICE, rng.randint(3, 6)))


NAMES = "Priya Tomas Ines Kofi Mei Lars Aisha Diego Hana Olu Sven Yara Matteo Noor Felix".split()
SURNAMES = "Okafor Lindqvist Moreau Tanaka Haddad Kowalski Brennan Ferreira Nakamura Osei".split()
CITIES = "Lisbon Tallinn Porto Montreal Nairobi Krakow Osaka Valencia Leeds Ljubljana".split()
COMPANIES = "Northwind Globex Initech Umbrella Hooli Vandelay Stark Wayne Acme Tyrell".split()
WORDS = "amber cobalt granite juniper falcon heron lynx orca quartz saffron tundra zephyr".split()


def _fill(rng: random.Random, template: str) -> str:
    """Fill ``{name}``-style slots with fresh random values."""
    values = {
        "name": f"{rng.choice(NAMES)} {rng.choice(SURNAMES)}",
        "first": rng.choice(NAMES),
        "city": rng.choice(CITIES),
        "company": rng.choice(COMPANIES),
        "n": str(rng.randint(2, 9)),
        "nn": str(rng.randint(11, 97)),
        "year": str(rng.randint(2012, 2021)),
        "code": f"{rng.choice(WORDS).title()}{rng.choice(WORDS).title()}",
    }
    return template.format(**values)


def _plant(rng: random.Random, scenario: Scenario) -> tuple[str, Item]:
    values = scenario.values(rng)
    statement = rng.choice(scenario.statements).format(**values)
    item = Item(
        kind=scenario.kind,
        turn=0,
        question=rng.choice(scenario.questions).format(**values),
        answer=tuple(a.format(**values) for a in scenario.answer),
        statement=statement,
    )
    return statement, item


def generate(
    seed: int,
    turns: int = 1000,
    facts: int = 12,
    decisions: int = 8,
    events: int = 8,
    reversals: int = 8,
) -> Conversation:
    """A conversation of ``turns`` turns with the given numbers of planted items."""
    if not 200 <= turns <= 2000:
        raise ValueError("turns must be between 200 and 2000")
    rng = random.Random(seed)
    conversation = Conversation(seed)
    planted: dict[int, str] = {}
    items: list[Item] = []
    free = list(range(5, turns - 3))
    rng.shuffle(free)
    taken: set[int] = set()

    def take(lo: int, hi: int) -> int:
        for i, t in enumerate(free):
            if lo <= t <= hi and t not in taken:
                del free[i]
                taken.add(t)
                return t
        raise ValueError("not enough free turns for the planted items")

    for pool, count in ((FACTS, facts), (DECISIONS, decisions), (EVENTS, events)):
        for scenario in rng.sample(pool, min(count, len(pool))):
            statement, item = _plant(rng, scenario)
            turn = take(5, turns - 4)
            planted[turn] = statement
            items.append(_at(item, turn))
    for scenario in rng.sample(REVERSALS, min(reversals, len(REVERSALS))):
        values = scenario.values(rng)
        old = rng.choice(scenario.statements).format(**values)
        new = rng.choice(scenario.later).format(**values)
        first = take(5, int(turns * 0.6))
        second = take(first + turns // 10, turns - 4)
        planted[first], planted[second] = old, new
        items.append(
            Item(
                kind="reversal",
                turn=second,
                question=rng.choice(scenario.questions).format(**values),
                answer=tuple(a.format(**values) for a in scenario.answer),
                old=tuple(a.format(**values) for a in scenario.old),
                old_turn=first,
                statement=new,
            )
        )
    for turn in range(1, turns + 1):
        if turn in planted:
            user = planted[turn]
            roll = rng.random()
            if roll < 0.25:
                user = f"Quick context: {user} {_filler_user(rng)}"
            elif roll < 0.45:
                user = f"{user} {rng.choice(CLOSERS)}"
            assistant = f"{rng.choice(ACKS)} {_filler_assistant(rng)}"
        else:
            user, assistant = _filler_user(rng), _filler_assistant(rng)
        conversation.turns.append((user, assistant))
    conversation.items = sorted(items, key=lambda i: i.turn)
    return conversation


def _at(item: Item, turn: int) -> Item:
    return Item(item.kind, turn, item.question, item.answer, item.old, 0, item.statement)
