"""What a fact is about: subject keys that survive a change of wording.

A later fact supersedes an earlier one when both are about the same subject,
so the key must not depend on how the fact is phrased. "We're committed to
microservices" and "we merged all services back into a monolith" never name
their subject; "our main DB is MongoDB" and "we migrated the database to
PostgreSQL" name it two ways. :func:`keys_of` reads, in order of confidence:

1. an explicit subject — "our/the/my X is …", "… for/as our X", "moved the X
   to …", "my name is …", "I live in …" — normalized by :func:`canonical`
   (modifiers and plurals dropped, synonyms folded: "main DB" → "database");
2. the category of a known value — PostgreSQL → database, monolith →
   architecture, React → frontend framework — from a lexicon of the tools,
   platforms and practices software teams talk about.

    >>> keys_of("We're committed to microservices.")
    ['architecture']
    >>> keys_of("We merged all services back into a monolith because deploys took hours.")
    ['architecture']
    >>> keys_of("Our main DB is MongoDB.")
    ['database']
    >>> keys_of("We changed the release cadence to every two weeks.")
    ['release cadence']
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from compaction.lexicon import CATEGORIES, GENERIC_HEADS, MODIFIERS, SYNONYMS, VAGUE

__all__ = [
    "CATEGORIES",
    "Subject",
    "canonical",
    "category_of",
    "keys_of",
    "subject_of",
    "subject_with",
    "values_of",
]

_STOP = frozenset(
    (
        "a an the of to in on for and or but with we i you it is are was were be this that our my "
        "your their its at by from as so do did does have has had not no all any some these those "
        "there here just now also still then very really"
    ).split()
)
# Words that end a subject phrase read forward ("for the event pipeline because …").
_BOUNDARY = _STOP | frozenset(
    (
        "because since after before when while until so which who where due instead now again "
        "back into onto over under about across per every each is are was were will would should "
        "can could"
    ).split()
)

_EXPLICIT = (
    # "our database is …", "the launch deadline slipped to …"
    re.compile(
        # Not "their": someone else's.
        r"\b(?:our|my|the)\s+((?:[a-z][\w/.-]*\s+){0,3}?[a-z][\w/.-]*)\s+"
        r"(?:is|are|was|were|will be|has been|have been|became|has become|'s|runs on|run on|"
        r"runs|lives|sits|slipped|moved|moves|changed|got|now|listens|uses|takes|handles|needs|"
        r"has|have|costs|holds|serves|supports|includes|contains|targets|requires|expects|starts|"
        r"ends|ships|deploys|stores|belongs|goes|went|needed|took|used|started)\b",
        re.I,
    ),
    # "we changed the release cadence to …", "moved the standup from …"
    re.compile(
        r"\b(?:chang(?:e|ed|ing)|mov(?:e|ed|ing)|push(?:ed)?|rais(?:e|ed)|bump(?:ed)?|cut|"
        r"increas(?:e|ed)|reduc(?:e|ed)|lower(?:ed)?|set|switch(?:ed)?|slipp(?:ed)?|updat(?:e|ed)|"
        r"extend(?:ed)?|shorten(?:ed)?|rename[d]?|migrat(?:e|ed)|rewr(?:ote|ite)|replac(?:e|ed)|"
        r"rebuil[dt]|redesign(?:ed)?|reimplement(?:ed)?|redid|redo|port(?:ed)?|"
        r"swapp?(?:ed)?|upgrad(?:e|ed)|downgrad(?:e|ed))\s+(?:our|the|my)\s+"
        r"((?:[a-z][\w/.-]*\s+){0,3}?[a-z][\w/.-]*)\s+(?:to|from|back|over|with|in|into|for)\b",
        re.I,
    ),
)
# "Background jobs run on SQS now", "Billing is Ines's now": a bare noun phrase opening
# the sentence (the phrase must not be a tool's name: "Kafka is great" is an opinion).
# "Kofi took over the billing service", "Priya owns the API": who is in charge of what.
_OWNER = re.compile(
    r"\b(?:owns?|owned by|took over|takes over|taking over|inherited|leads?|led|manages?|managed|"
    r"maintains?|maintained|(?:is|are) responsible for|in charge of)\s+(?:the|our)\s+(?=[a-z])",
    re.I,
)
_OPENING = re.compile(
    r"^((?:[A-Z][a-z][\w/.-]*)(?:\s+[a-z][\w/.-]*){0,2}?)\s+"
    r"(?:is|are|was|were|will be|has been|have been|became|runs on|run on|runs|run|lives|sits)\b"
)
_FOR_AS = re.compile(
    r"\b(?:for|as)\s+(?:(?:our|the|my|a|an)\s+)?([a-z][\w/.-]*(?:\s+[a-z][\w/.-]*){0,3})",
    re.I,
)
_PERSONAL = (
    (re.compile(r"\b(?:my name is|i'm called|call me|i am called)\b", re.I), "name"),
    (
        re.compile(r"\b(?:i live in|i'm based in|i am based in|i moved to|i'm in)\b", re.I),
        "location",
    ),
    (re.compile(r"\b(?:i work (?:at|for)|i'm (?:at|with) |i joined)\b", re.I), "employer"),
    (
        re.compile(
            r"\b(?:team of \d+|\d+ (?:engineers|developers|people) on (?:the|our) team|"
            r"(?:have|has|are) \d+ (?:engineers|developers|people))\b",
            re.I,
        ),
        "team size",
    ),
    (re.compile(r"\btime ?zone\b", re.I), "time zone"),
)


@functools.cache
def _lexicon() -> tuple[tuple[re.Pattern[str], dict[str, str]], ...]:
    """Two matchers over :data:`CATEGORIES`: one case-folded, one exact-case."""
    folded: dict[str, str] = {}
    exact: dict[str, str] = {}
    for category, terms in CATEGORIES.items():
        for term in terms:
            if term.islower() or not term[:1].isalpha():
                folded[term.lower()] = category
            else:
                exact[term] = category

    def alternation(terms: Iterable[str]) -> str:
        return "|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True))

    edge = r"(?<![\w.+#/-])({})(?![\w+#/-]|\.\w)"
    return (
        (re.compile(edge.format(alternation(folded)), re.I), folded),
        (re.compile(edge.format(alternation(exact))), exact),
    )


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is", "os")):
        return word[:-1]
    return word


def canonical(phrase: str) -> str:
    """A subject phrase normalized: lowercase, no modifiers or plurals, synonyms folded.

    >>> canonical("The main DBs"), canonical("our Message Bus"), canonical("release schedule")
    ('database', 'message queue', 'release cadence')
    """
    words = [w.strip(".,;:!?\"'()") for w in phrase.lower().split()]
    if "of" in words:  # "the rest of the team" is about "rest", not "team"
        words = words[: words.index("of")]
    words = [w for w in words if w and w not in _STOP and w not in MODIFIERS]
    if not words:
        return ""
    last = words[-1]
    for form in (_singular(last), last[:-1] if last.endswith("s") else last, last):
        joined = " ".join([*words[:-1], form])
        if joined in SYNONYMS or joined in CATEGORIES:
            return SYNONYMS.get(joined, joined)
        # "postgres database" → "database"; "kafka cluster" stays itself.
        tail = " ".join([*words[1:-1], form]) if len(words) > 1 else ""
        if tail in SYNONYMS or tail in CATEGORIES:
            return SYNONYMS.get(tail, tail)
    return " ".join([*words[:-1], _singular(last)])


def category_of(text: str) -> list[str]:
    """Categories of the known values in ``text``, most mentioned first."""
    counts: dict[str, int] = {}
    order: dict[str, int] = {}
    for pattern, table in _lexicon():
        for match in pattern.finditer(text):
            term = match.group(1)
            category = table.get(term) or table.get(term.lower())
            if category is None:
                continue
            counts[category] = counts.get(category, 0) + 1
            order.setdefault(category, match.start())
    return sorted(counts, key=lambda c: (-counts[c], order[c]))


def _phrase_after(text: str, start: int) -> str:
    words = []
    for word in text[start:].split():
        bare = word.strip(".,;:!?\"'()").lower()
        if not bare or bare in _BOUNDARY or not bare[0].isalpha():
            break
        words.append(bare)
        if word[-1:] in ".,;:!?)" or len(words) == 3:
            break
    return " ".join(words)


def _good(key: str) -> bool:
    return bool(key) and key.split()[-1] not in VAGUE and len(key) <= 40


@dataclass(frozen=True, slots=True)
class Subject:
    """What a fact is about: explicit subject phrases and categories of its values."""

    explicit: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    named: tuple[str, ...] = ()
    """Every key the sentence names outright ("our database is …"), category or not."""

    @property
    def keys(self) -> tuple[str, ...]:
        return self.explicit + tuple(c for c in self.categories if c not in self.explicit)

    def same_as(self, other: Subject) -> bool:
        """Whether two facts are about the same thing, so the later one supersedes.

        Two explicit subjects must agree ("for background jobs" is not "for
        events", though both name a queue); values of different kinds are
        different subjects even under one name (the backend's language is
        not the backend's cloud).
        """
        if self.explicit and other.explicit:
            if not set(self.explicit) & set(other.explicit):
                return False
            mine, theirs = set(self.categories), set(other.categories)
            return not mine or not theirs or bool(mine & theirs)
        return bool(set(self.categories) & set(other.categories))


def subject_with(extra: str, sentence: str) -> Subject:
    """:func:`subject_of` with one more explicit subject (one a model named)."""
    found = subject_of(sentence)
    key = canonical(extra)
    if not _good(key):
        return found
    named = (key, *(n for n in found.named if n != key))
    if key in CATEGORIES:
        categories = (key, *(c for c in found.categories if c != key))
        return Subject(found.explicit, categories, named)
    return Subject((key, *(e for e in found.explicit if e != key)), found.categories, named)


@functools.lru_cache(maxsize=8192)
def subject_of(sentence: str) -> Subject:
    """The subject of a fact (empty when none can be read)."""
    explicit: list[str] = []
    categories: list[str] = []
    named: list[str] = []

    def add(key: str, stated: bool = True) -> None:
        if not _good(key):
            return
        target = categories if key in CATEGORIES else explicit
        if key not in target:
            target.append(key)
        if stated and key not in named:
            named.append(key)
        # "the billing service" is also "billing" — a weaker key: "billing's
        # owner" and "billing became its own service" are not one subject.
        words = key.split()
        if len(words) > 1 and words[-1] in GENERIC_HEADS:
            add(" ".join(words[:-1]), stated=False)

    for pattern, key in _PERSONAL:
        if pattern.search(sentence):
            add(key)
    for pattern in _EXPLICIT:
        for match in pattern.finditer(sentence):
            add(canonical(match.group(1)))
    for match in _OWNER.finditer(sentence):
        add(canonical(_phrase_after(sentence, match.end())))
    opening = _OPENING.match(sentence)
    if opening and not category_of(opening.group(1)):
        add(canonical(opening.group(1)))
    for match in _FOR_AS.finditer(sentence):
        add(canonical(_phrase_after(sentence, match.start(1))))
    for category in category_of(sentence):
        add(category, stated=False)
    return Subject(tuple(explicit), tuple(categories), tuple(named))


def keys_of(sentence: str) -> list[str]:
    """Subject keys of a fact, most confident first (may be empty)."""
    return list(subject_of(sentence).keys)


_VALUE = re.compile(
    r"\d[\w.,:%/-]*|(?<=[\s(\"'/,])[A-Z][\w.+#-]*[a-z0-9][\w.+#-]*|\b[A-Z]{2,}\d*\b|"
    r"\b[A-Za-z][\w-]*[./][\w-]+(?:[./][\w-]+)*"  # hosts, paths: stg-eu-12.internal, acme/core
)


@functools.lru_cache(maxsize=8192)
def values_of(sentence: str) -> frozenset[str]:
    """The concrete values a sentence states: numbers, names, known tools (lowercased)."""
    found = {m.group(0).rstrip(".,").lower() for m in _VALUE.finditer(sentence)}
    for pattern, _ in _lexicon():
        found.update(m.group(1).lower() for m in pattern.finditer(sentence))
    return frozenset(found)
