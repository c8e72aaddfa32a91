"""Planted scenarios for bench.memory_data: dated events and reversals."""

from __future__ import annotations

from bench.memory_pools import COMPANIES, Scenario, dated, pairs, pick

__all__ = ["EVENTS", "REVERSALS"]

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
