"""Planted scenarios for bench.memory_data: facts and decisions, and the Scenario type."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["DECISIONS", "FACTS", "Scenario", "dated", "pairs", "pick"]

Values = Callable[[random.Random], dict[str, str]]


@dataclass(frozen=True)
class Scenario:
    kind: str
    statements: tuple[str, ...]
    questions: tuple[str, ...]
    answer: tuple[str, ...]
    values: Values
    later: tuple[str, ...] = ()
    """Reversals: how the new value is stated."""
    old: tuple[str, ...] = ()


def pick(**options: tuple[str, ...]) -> Values:
    return lambda rng: {k: rng.choice(v) for k, v in options.items()}


def pairs(*choices: tuple[str, str], **more: tuple[str, ...]) -> Values:
    """An old and a new value that differ, plus any other slots."""

    def values(rng: random.Random) -> dict[str, str]:
        a, b = rng.choice(choices)
        if rng.random() < 0.5:
            a, b = b, a
        return {"a": a, "b": b, **{k: rng.choice(v) for k, v in more.items()}}

    return values


def numbers(**ranges: tuple[int, int]) -> Values:
    return lambda rng: {k: str(rng.randint(lo, hi)) for k, (lo, hi) in ranges.items()}


def _day(rng: random.Random) -> str:
    year, month, day = rng.randint(2021, 2024), rng.randint(1, 12), rng.randint(1, 28)
    months = "January February March April May June July August September October November"
    names = (months + " December").split()
    return rng.choice(
        (
            f"{year}-{month:02d}-{day:02d}",
            f"{names[month - 1]} {day}, {year}",
            f"{day} {names[month - 1]} {year}",
            f"Q{(month - 1) // 3 + 1} {year}",
        )
    )


def dated(**more: tuple[str, ...]) -> Values:
    return lambda rng: {"date": _day(rng), **{k: rng.choice(v) for k, v in more.items()}}


def _merge(*makers: Values) -> Values:
    def values(rng: random.Random) -> dict[str, str]:
        out: dict[str, str] = {}
        for make in makers:
            out.update(make(rng))
        return out

    return values


FIRST = ("Priya", "Tomas", "Ines", "Kofi", "Mei", "Lars", "Aisha", "Diego", "Hana", "Sven")
LAST = ("Okafor", "Lindqvist", "Moreau", "Tanaka", "Haddad", "Kowalski", "Brennan", "Ferreira")
CODENAMES = ("Bluefin", "Kestrel", "Marigold", "Quasar", "Tamarind", "Halcyon", "Sorrel", "Vireo")
CITIES = ("Lisbon", "Tallinn", "Porto", "Montreal", "Nairobi", "Krakow", "Osaka", "Valencia")
COMPANIES = ("Northwind", "Globex", "Initech", "Vandelay", "Tyrell", "Soylent", "Cyberdyne")

FACTS = (
    Scenario(
        "fact",
        ("My name is {f} {l}.", "I should introduce myself: my name is {f} {l}, I lead the team."),
        ("What's my name?", "Do you remember who I am?"),
        ("{f} {l}",),
        pick(f=FIRST, l=LAST),
    ),
    Scenario(
        "fact",
        ("Our team has {n} engineers.", "We're a team of {n} engineers right now."),
        ("How many engineers are on our team?", "How big is our engineering team?"),
        ("{n}", "engineers"),
        numbers(n=(11, 29)),
    ),
    Scenario(
        "fact",
        ("The project codename is {c}.", "Our project codename is {c}, by the way."),
        ("What's the project's codename?", "What do we call the project internally?"),
        ("{c}",),
        pick(c=CODENAMES),
    ),
    Scenario(
        "fact",
        ("We run Python {v} in production.", "Our production services are on Python {v}."),
        ("Which Python version runs in production?", "What Python do our services use?"),
        ("{v}",),
        lambda rng: {"v": f"3.{rng.randint(8, 12)}.{rng.randint(1, 19)}"},
    ),
    Scenario(
        "fact",
        ("Our staging server is {h}.", "The staging host is {h} if you need it."),
        ("What's the staging server's hostname?", "Which host is staging?"),
        ("{h}",),
        lambda rng: {"h": f"stg-{rng.choice(('eu', 'us', 'ap'))}-{rng.randint(10, 99)}.internal"},
    ),
    Scenario(
        "fact",
        (
            "Our biggest customer is {c}, about {p}% of revenue.",
            "Our largest account is {c} at roughly {p}% of revenue.",
        ),
        ("Who is our biggest customer?", "Which customer brings in the most revenue?"),
        ("{c}",),
        _merge(pick(c=COMPANIES), numbers(p=(12, 40))),
    ),
    Scenario(
        "fact",
        ("I live in {c}.", "I'm based in {c}, so keep time zones in mind."),
        ("Which city am I based in?", "Where do I live?"),
        ("{c}",),
        pick(c=CITIES),
    ),
    Scenario(
        "fact",
        ("Our cloud budget is ${k}k a month.", "The monthly cloud budget is ${k}k."),
        ("What's our monthly cloud budget?", "How much can we spend on cloud per month?"),
        ("${k}k",),
        numbers(k=(12, 90)),
    ),
    Scenario(
        "fact",
        ("Our uptime target is {x}%.", "The SLA we promise customers is {x}% uptime."),
        ("What uptime do we promise customers?", "What's our uptime target?"),
        ("{x}%",),
        pick(x=("99.5", "99.9", "99.95", "99.99")),
    ),
    Scenario(
        "fact",
        ("Our API listens on port {p}.", "The internal API port is {p}."),
        ("Which port does the API listen on?", "What port is the API on?"),
        ("{p}",),
        numbers(p=(7000, 9900)),
    ),
    Scenario(
        "fact",
        ("Our main repository is {o}/{r} on GitHub.", "The main repository lives at {o}/{r}."),
        ("Where is our main repository?", "What's the main repo called?"),
        ("{o}/{r}",),
        pick(o=("acme-labs", "northwind-eng", "tidal-io"), r=("core", "platform", "monolith-api")),
    ),
    Scenario(
        "fact",
        ("My manager is {f} {l}.", "My manager is {f} {l}, she runs the platform group."),
        ("Who is my manager?", "Who do I report to?"),
        ("{f} {l}",),
        pick(f=FIRST, l=LAST),
    ),
    Scenario(
        "fact",
        ("Our test coverage target is {x}%.", "We require {x}% test coverage on new code."),
        ("What test coverage do we require?", "What's our coverage target?"),
        ("{x}%",),
        numbers(x=(70, 95)),
    ),
    Scenario(
        "fact",
        ("Our sprints are {n} days long.", "Our sprint length is {n} working days."),
        ("How long are our sprints?", "What's our sprint length?"),
        ("{n}", "days"),
        pick(n=("8", "9", "12", "15")),
    ),
)

DECISIONS = (
    Scenario(
        "decision",
        (
            "We chose {v} for the event pipeline because we need to replay events after outages.",
            "We went with {v} for the event pipeline, mainly because we need to replay events "
            "after outages.",
        ),
        ("Why did we pick our event pipeline technology?", "What drove the event pipeline choice?"),
        ("{v}", "replay events"),
        pick(v=("Kafka", "Redpanda", "Pulsar")),
    ),
    Scenario(
        "decision",
        (
            "We moved CI to {v} because builds on the old runners took {n} minutes.",
            "Builds on the old runners took {n} minutes, so we moved CI to {v}.",
        ),
        ("Why did we change our CI system, and to what?", "What happened with our CI and why?"),
        ("{v}", "{n} minutes"),
        _merge(pick(v=("Buildkite", "CircleCI", "GitHub Actions")), numbers(n=(35, 55))),
    ),
    Scenario(
        "decision",
        (
            "We added a read replica because reporting queries were slowing down checkout.",
            "Reporting queries were slowing down checkout, so we added a read replica.",
        ),
        ("Why did we add the read replica?", "What was the read replica for?"),
        ("read replica", "reporting queries"),
        pick(),
    ),
    Scenario(
        "decision",
        (
            "We pinned numpy to {v} because version 2 broke our pickled models.",
            "We pinned numpy to {v}, since version 2 broke our pickled models.",
        ),
        ("Why is numpy pinned?", "What's the story with the numpy pin?"),
        ("{v}", "pickled models"),
        pick(v=("1.26.4", "1.26.2", "1.25.2")),
    ),
    Scenario(
        "decision",
        (
            "We adopted {v} for feature flags after a bad deploy took down login for an hour.",
            "A bad deploy took down login for an hour, which is why we adopted {v} for feature "
            "flags.",
        ),
        ("Why did we start using a feature flag service?", "What led to the feature flags tool?"),
        ("{v}", "took down login"),
        pick(v=("LaunchDarkly", "Unleash", "Flagsmith")),
    ),
    Scenario(
        "decision",
        (
            "We turned off autoscaling on the import workers because it thrashed during batch "
            "imports.",
            "We disabled autoscaling for the import workers since it kept thrashing during "
            "batch imports.",
        ),
        ("Why is autoscaling off for the import workers?", "What's up with import autoscaling?"),
        ("autoscaling", "batch imports"),
        pick(),
    ),
    Scenario(
        "decision",
        (
            "We split billing into its own service because its test suite took {n} minutes.",
            "Billing became its own service, since its test suite took {n} minutes.",
        ),
        ("Why is billing a separate service?", "Why did billing get split out?"),
        ("billing", "{n} minutes"),
        numbers(n=(22, 48)),
    ),
    Scenario(
        "decision",
        (
            "We set the public rate limit to {n} requests per minute to stop scrapers hammering "
            "search.",
            "Scrapers were hammering search, so we set the public rate limit to {n} requests "
            "per minute.",
        ),
        ("Why do we have the public rate limit we have?", "What set our public rate limit?"),
        ("{n} requests", "scrapers"),
        numbers(n=(60, 600)),
    ),
    Scenario(
        "decision",
        (
            "We turned on TypeScript strict mode because null errors kept reaching production.",
            "Null errors kept reaching production, so we turned on TypeScript strict mode.",
        ),
        ("Why did we enable strict mode?", "What made us switch on strict type checking?"),
        ("strict mode", "null errors"),
        pick(),
    ),
    Scenario(
        "decision",
        (
            "We made the on-call rotation weekly because daily handoffs kept dropping incidents.",
            "Daily handoffs kept dropping incidents, so we made the on-call rotation weekly.",
        ),
        ("Why is the on-call rotation weekly?", "How did we settle on the on-call rotation?"),
        ("weekly", "handoffs"),
        pick(),
    ),
)
