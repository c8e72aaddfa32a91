"""Wording pools for bench.memory_data: planted scenarios and filler."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Scenario"]

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

EVENTS = (
    Scenario(
        "event",
        ("On {date} we launched the public beta.", "The public beta went live on {date}."),
        ("When did the public beta launch?", "When did we open the beta to the public?"),
        ("{date}", "public beta"),
        dated(),
    ),
    Scenario(
        "event",
        ("We signed {c} as a customer in {date}.", "{c} signed with us in {date}."),
        ("When did we sign {c}?", "When did {c} become a customer?"),
        ("{date}", "{c}"),
        dated(c=COMPANIES),
    ),
    Scenario(
        "event",
        (
            "The big outage happened on {date}, when the primary disk filled up.",
            "On {date} we had the big outage: the primary disk filled up.",
        ),
        ("When was the big outage?", "When did the disk-full outage happen?"),
        ("{date}", "outage"),
        dated(),
    ),
    Scenario(
        "event",
        ("We passed the SOC 2 audit on {date}.", "The SOC 2 audit was passed on {date}."),
        ("When did we pass SOC 2?", "When was the SOC 2 audit done?"),
        ("{date}", "SOC 2"),
        dated(),
    ),
    Scenario(
        "event",
        ("We hired our first SRE on {date}.", "Our first SRE joined on {date}."),
        ("When did our first SRE join?", "When did we hire the first SRE?"),
        ("{date}", "SRE"),
        dated(),
    ),
    Scenario(
        "event",
        ("Version {v} shipped on {date}.", "We shipped version {v} on {date}."),
        ("When did version {v} ship?", "When was {v} released?"),
        ("{date}", "{v}"),
        dated(v=("2.0", "3.0", "4.0")),
    ),
    Scenario(
        "event",
        ("We moved into the new office on {date}.", "On {date} we moved into the new office."),
        ("When did we move offices?", "When did we get into the new office?"),
        ("{date}", "office"),
        dated(),
    ),
    Scenario(
        "event",
        (
            "The data migration finished on {date} after three weekends of work.",
            "On {date} the data migration finally finished.",
        ),
        ("When did the data migration finish?", "When was the data migration done?"),
        ("{date}", "migration"),
        dated(),
    ),
    Scenario(
        "event",
        ("We closed the seed round on {date}.", "The seed round closed on {date}."),
        ("When did we close the seed round?", "When did the seed money come in?"),
        ("{date}", "seed round"),
        dated(),
    ),
)

REVERSALS = (
    Scenario(
        "reversal",
        ("We're committed to microservices for the platform.", "Our platform is microservices."),
        ("What architecture is the platform on now?", "How is the platform structured today?"),
        ("monolith", "services"),
        pick(),
        later=(
            "We merged all the services back into a monolith because cross-service deploys "
            "kept breaking.",
            "We consolidated everything into a single monolith, since debugging across services "
            "was eating our weeks.",
        ),
        old=("microservices", "platform"),
    ),
    Scenario(
        "reversal",
        ("Our database is {a}.", "We keep everything in a {a} database."),
        ("Which database do we use now?", "What's our database these days?"),
        ("{b}", "database"),
        pairs(("MongoDB", "PostgreSQL"), ("MySQL", "CockroachDB")),
        later=(
            "We migrated the database from {a} to {b} because we needed real joins.",
            "We moved the database off {a} and onto {b}, since reporting needed real joins.",
        ),
        old=("{a}", "database"),
    ),
    Scenario(
        "reversal",
        ("The public API is {a}.", "We're building the public API with {a}."),
        ("What style is the public API now?", "Is the public API still what we started with?"),
        ("{b}", "public API"),
        pairs(("GraphQL", "REST")),
        later=(
            "We switched the public API to {b} because {a} caused too many support tickets.",
            "We went with {b} for the public API in the end, since {a} confused our partners.",
        ),
        old=("{a}", "public API"),
    ),
    Scenario(
        "reversal",
        ("The dashboard is written in {a}.", "Our dashboard frontend is {a}."),
        ("What is the dashboard written in now?", "Which framework does the dashboard use?"),
        ("{b}", "dashboard"),
        pairs(("Angular", "React"), ("Vue", "Svelte")),
        later=(
            "We rewrote the dashboard in {b} because hiring {a} developers was too hard.",
            "We rebuilt the dashboard frontend with {b}, since nobody wanted to maintain {a}.",
        ),
        old=("{a}", "dashboard"),
    ),
    Scenario(
        "reversal",
        ("We host everything on {a}.", "Our cloud provider is {a}."),
        ("Which cloud are we on now?", "Where do we host things these days?"),
        ("{b}",),
        pairs(("AWS", "GCP"), ("Azure", "AWS"), ("Heroku", "Hetzner")),
        later=(
            "We moved everything to {b} after they offered us a year of credits.",
            "Our cloud provider is now {b}, because their credits cut the bill in half.",
        ),
        old=("{a}",),
    ),
    Scenario(
        "reversal",
        ("Our release cadence is weekly.", "We release weekly."),
        ("How often do we release now?", "What's the release cadence these days?"),
        ("every two weeks",),
        pick(),
        later=(
            "We changed the release cadence to every two weeks because QA couldn't keep up.",
            "Since QA couldn't keep up, our release cadence is now every two weeks.",
        ),
        old=("release", "weekly"),
    ),
    Scenario(
        "reversal",
        ("Our standup is at {a}.", "The daily standup is at {a}."),
        ("What time is standup now?", "When do we do the daily standup?"),
        ("{b}", "standup"),
        pairs(("9:30", "10:15"), ("9:00", "11:00")),
        later=(
            "We moved the standup to {b} so the Lisbon folks can join.",
            "The standup is at {b} now, because the Lisbon folks couldn't make the old time.",
        ),
        old=("{a}", "standup"),
    ),
    Scenario(
        "reversal",
        ("The launch deadline is {a}.", "Our launch deadline is {a}."),
        ("When is the launch deadline now?", "What's the current launch date?"),
        ("{b}", "deadline"),
        pairs(("June 30", "August 15"), ("March 1", "April 20")),
        later=(
            "The launch deadline slipped to {b} because the security audit ran late.",
            "We pushed the launch deadline to {b}, since the security audit ran late.",
        ),
        old=("{a}", "deadline"),
    ),
    Scenario(
        "reversal",
        ("We use {a} for background jobs.", "Background jobs run on {a}."),
        ("What runs our background jobs now?", "Which queue handles background jobs?"),
        ("{b}", "background jobs"),
        pairs(("RabbitMQ", "SQS"), ("Celery", "Sidekiq")),
        later=(
            "We replaced {a} with {b} for background jobs because nobody wanted to babysit the "
            "broker.",
            "Background jobs run on {b} now; we dropped {a} since nobody wanted to babysit it.",
        ),
        old=("{a}", "background jobs"),
    ),
    Scenario(
        "reversal",
        ("Our backend is written in {a}.", "The backend is {a}."),
        ("What language is the backend in now?", "Which language do we write the backend in?"),
        ("{b}", "backend"),
        pairs(("Python", "Go"), ("Ruby", "Elixir"), ("Java", "Kotlin")),
        later=(
            "We rewrote the backend in {b} because the {a} workers couldn't keep up with load.",
            "The backend is {b} now, since the old {a} code couldn't keep up with load.",
        ),
        old=("{a}", "backend"),
    ),
    Scenario(
        "reversal",
        ("{a} owns the billing service.", "The billing service is owned by {a}."),
        ("Who owns the billing service now?", "Who's responsible for billing these days?"),
        ("{b}", "billing"),
        pairs(("Priya Okafor", "Tomas Lindqvist"), ("Ines Moreau", "Kofi Tanaka")),
        later=(
            "{b} took over the billing service after {a} moved to the data team.",
            "Billing is {b}'s now, since {a} moved to the data team.",
        ),
        old=("{a}", "billing"),
    ),
)

OPENERS = (
    "Could you help me think through",
    "I was wondering about",
    "Let's talk a little about",
    "Give me a quick overview of",
    "What would you say regarding",
    "Any thoughts on",
    "Please walk me through",
    "I'd like your take on",
    "How would you approach",
    "What's a sensible way to handle",
    "Can you explain",
    "Remind me of the trade-offs in",
)
TOPICS = (
    "writing clearer commit messages",
    "naming things in a codebase",
    "keeping meetings short",
    "reviewing pull requests kindly",
    "organising a small team wiki",
    "picking good test names",
    "structuring a weekly planning session",
    "pairing with a new colleague",
    "keeping a tidy issue tracker",
    "writing a friendly onboarding guide",
    "indexing a database for time-series queries",
    "versioning a public API",
    "splitting a large pull request",
    "choosing between a monolith and microservices in general",
    "caching HTTP responses",
    "estimating work without lying to ourselves",
    "writing runbooks people actually read",
    "handling flaky tests",
    "designing idempotent endpoints",
    "setting up feature flags",
    "rolling out a schema migration safely",
    "keeping dependencies up to date",
    "logging without drowning in noise",
    "running a blameless postmortem",
)
CLOSERS = (
    "Keep it short, please.",
    "Bullet points are fine.",
    "No rush on this one.",
    "A rough sketch is enough.",
    "Examples would help.",
    "Thanks in advance!",
)
SMALL_TALK = (
    "Thanks, that helps a lot.",
    "Ha, fair enough.",
    "Okay, makes sense.",
    "I'm a bit tired today, so bear with me.",
    "Good morning!",
    "Let me think about that for a minute.",
    "Sorry, got pulled into a meeting.",
    "That's a great point, actually.",
)
TRAPS = (
    "I read that Netflix runs hundreds of microservices; is that typical?",
    "A friend's startup moved from MongoDB to DynamoDB in {year}; was that wise?",
    "Should we ever consider Cassandra for anything?",
    "What if we tried GraphQL for the internal tools someday?",
    "My friend {first}'s team uses Elixir and loves it.",
    "At my last job we used Jenkins and everyone hated it.",
    "Is Kafka overkill for a team of {n}?",
    "Would Svelte be a good fit for a small admin panel?",
    "Some teams deploy {nn} times a day; how do they manage that?",
    "Apparently {company} switched their whole stack to Rust last year.",
    "Could we run the reporting jobs on Snowflake instead, hypothetically?",
    "People say you should never rewrite from scratch; do you agree?",
    "How do companies like {company} handle on-call for {nn} services?",
    "I heard {company} moved back to a monolith in {year}.",
)
ACKS = (
    "Noted.",
    "Got it, thanks for the context.",
    "Makes sense.",
    "Understood.",
    "Thanks, that's useful to know.",
    "Okay, I'll keep that in mind.",
)
ADVICE = (
    "A good rule is to make each change small enough to review in one sitting.",
    "Because reviewers lose focus after about {nn} minutes, shorter diffs get better feedback.",
    "Start by writing down the problem in one sentence, then list the constraints.",
    "Teams at Google and Shopify have written about this, and their advice is similar.",
    "You should measure before optimising, since intuition about bottlenecks is often wrong.",
    "Martin Fowler's article on feature toggles is a useful reference here.",
    "After the first iteration, revisit the decision with real data.",
    "It's usually worth automating anything you do more than {n} times.",
    "In general, prefer boring technology unless there's a strong reason not to.",
    "Keep in mind that every abstraction has a maintenance cost.",
    "A checklist with {n} or {nn} items is easier to follow than a long document.",
    "The key is to agree on the goal before debating the approach.",
    "Many teams found that pairing for an hour saves a day of back-and-forth.",
    "Then, once the basics work, add monitoring so regressions show up early.",
    "Before you roll it out widely, try it with one team for two weeks.",
    "As a result, the feedback loop gets shorter and people stay engaged.",
    "Consider writing the runbook while the incident is still fresh.",
    "Since naming is hard, agree on a glossary early and keep it in the repo.",
    "One option is a weekly thirty-minute review where anyone can raise issues.",
    "The database should not be the first place you look for performance wins.",
    "If the API is public, version it from day one; changing it later is painful.",
    "Make sure tests fail for the right reason before you trust them.",
    "Kafka, RabbitMQ and SQS all work for queues; the operational cost differs most.",
    "Microservices help large organisations, but a monolith is simpler to run.",
    "In {year}, a lot of teams moved to containers, and the tooling improved quickly.",
    "Due to how caches work, invalidation deserves a written plan.",
)
