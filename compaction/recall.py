"""Recall from the archive, the pure half: what to search for and what to show.

The proxy runs a full-text query over the session's archived messages (those
older than the recent window) for every new message; this module picks the
query's words and cuts each hit down to the sentences that matter, so a
recalled excerpt costs a few dozen tokens, not a whole message.

    >>> query_terms("Why did we pick Kafka for the event pipeline, again?")
    ['Kafka', 'pipeline', 'event', 'pick']
    >>> m = Message("user", "Hi! We chose Kafka because we need replay. Anyway, lunch?", turn=7)
    >>> excerpt(m, ["Kafka"]).content
    'We chose Kafka because we need replay.'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from compaction.cues import sentences, tidy
from compaction.state import Memory, Message
from compaction.tokens import text_of

__all__ = ["excerpt", "known_sentences", "query_terms"]

MAX_TERMS = 4
MAX_EXCERPT_CHARS = 360
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+#/-]*[A-Za-z0-9+#]|[A-Za-z0-9]")
_STOP = frozenset(
    (
        "a about above after again against all also am an and any are aren't as at be because "
        "been before being below between both but by can can't cannot could couldn't did "
        "didn't do does doesn't doing don't down during each few for from further had hadn't "
        "has hasn't have haven't having he her here hers herself him himself his how i i'd "
        "i'll i'm i've if in into is isn't it it's its itself just let's me more most mustn't "
        "my myself no nor not now of off on once only or other ought our ours ourselves out "
        "over own same shan't she should shouldn't so some such than that that's the their "
        "theirs them themselves then there there's these they they'd they'll they're they've "
        "this those through to too under until up very was wasn't we we'd we'll we're we've "
        "were weren't what what's when when's where where's which while who who's whom why "
        "why's with won't would wouldn't you you'd you'll you're you've your yours yourself "
        "yourselves anyway remind tell told know remember please thanks thank okay ok yes yeah "
        "sure think thought currently current still right actually really quick quickly "
        "question questions answer like want need get got use used using go going say said "
        "mean back one thing things way kind sort lot bit something anything everything "
        "everyone someone since earlier later ago last next first today yesterday tomorrow "
        "time times much many well good great new old us let day days week weeks month months "
        "year years hour hours minute minutes happen happened happens come came make made done "
        "take took give gave find found look looked see saw seem seems work works worked "
        "working try tried help helped start started keep kept put set call called feel felt "
        "leave left turn turned show showed move moved live believe bring brought sit stand "
        "lose lost meet met include learn change changed lead understand watch follow stop "
        "speak allow add spend grow walk win offer love consider appear wait serve expect stay "
        "fall cut reach remain suggest raise pass require decide people person man woman child "
        "world life hand part place case point company number group problem fact stuff side "
        "end example idea reason area piece sense matter issue form fine best better worse "
        "worst big small large little long short high low early late important different able "
        "whole true real certain clear full free easy hard possible likely instead maybe "
        "perhaps probably definitely basically exactly pretty quite rather nowadays lately "
        "recently"
    ).split()
)


def query_terms(text: str, limit: int = MAX_TERMS) -> list[str]:
    """The words of a message worth searching for, most distinctive first.

    Names, numbers and versions first, then longer words: they are the ones
    that pick out the older turn a question is about.
    """
    seen: set[str] = set()
    ranked: list[tuple[int, int, int, str]] = []
    for position, match in enumerate(_WORD.finditer(text)):
        word = match.group(0).strip(".-/")
        lowered = word.lower()
        if lowered in seen or lowered in _STOP or (len(word) < 3 and not word.isdigit()):
            continue
        seen.add(lowered)
        special = any(c.isdigit() for c in word) or (word[0].isupper() and position > 0)
        ranked.append((0 if special else 1, -len(word), position, word))
    ranked.sort()
    return [word for *_, word in ranked[:limit]]


def _stem(word: str) -> str:
    word = word.lower()
    for suffix in ("ing", "ed", "es", "s", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def known_sentences(memory: Memory) -> set[str]:
    """Sentences the memory message already shows, which recall need not repeat."""
    known = {f.text for f in memory.facts}
    for r in memory.reversals:
        known.update((r.before, r.after))
    for line in memory.summary:
        _, _, text = line.partition("): ")
        known.add(text or line)
    return known


def excerpt(
    message: Message,
    terms: Sequence[str],
    known: Iterable[str] = (),
    max_chars: int = MAX_EXCERPT_CHARS,
) -> Message | None:
    """The one or two sentences of ``message`` that match ``terms``, as a message.

    ``None`` when every matching sentence is already ``known`` (shown in memory).
    """
    stems = [_stem(t) for t in terms]
    parts = [tidy(p) for p in sentences(text_of(message.content))]
    if not parts:
        return None
    known_set = set(known)
    scored = []
    for i, sentence in enumerate(parts):
        lowered = sentence.lower()
        hits = sum(1 for s in stems if s in lowered)
        if hits:
            scored.append((-hits, i, sentence))
    if scored:
        fresh = [item for item in scored if item[2] not in known_set]
        if not fresh:
            return None
        best = sorted(sorted(fresh)[:2], key=lambda item: item[1])
        text = " ".join(sentence for _, _, sentence in best)
    else:
        text = parts[0]
        if text in known_set:
            return None
    if len(text) > max_chars:
        text = text[: max_chars - 1].rstrip() + "…"
    return replace(message, content=text, tool_calls=None, tokens=0)
