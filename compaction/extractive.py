"""The extractive summarizer: deterministic, no model, always available.

It reads the evicted messages sentence by sentence (see :mod:`compaction.cues`)
and keeps, verbatim, what a session must not lose:

* **facts** — the user's statements about their own situation that name a
  subject (:mod:`compaction.subjects`) and carry a value or a decision: names,
  numbers, versions, dates, tools, preferences. They go through the
  :class:`~compaction.ledger.Ledger`, so a later statement about the same
  subject supersedes an earlier one and the change is kept as a reversal, with
  its reason. A cause given in the next sentence ("That's because …") stays
  with its fact.
* **timeline lines** — other statements with a cause, a reversal or a date
  ("after the outage in March we turned off autoscaling"), prefixed with
  their turn, oldest first: *why* and *in what order*.

Questions, requests, hypotheticals ("should we…", "what if…"), hearsay
("a friend's team uses…") and generic advice are not facts; pleasantries and
filler carry no cues at all. The raw transcript stays in the archive for
recall, so what is dropped here can still be found.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from compaction.cues import Cues, cause_of, read, salience, sentences, tidy
from compaction.ledger import Ledger
from compaction.render import MemoryRenderer, day, fit_memory
from compaction.state import Memory, Message
from compaction.subjects import subject_of
from compaction.tokens import text_of

__all__ = ["ExtractiveSummarizer", "timeline_line"]

MAX_FACT_CHARS = 320
MAX_LINE_CHARS = 320
FACT_SALIENCE = 3
LINE_SALIENCE = 3
_ADDRESSED = re.compile(r"\b(?:you|your|yours|we|our|us)\b", re.I)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def timeline_line(message: Message, text: str) -> str:
    who = "" if message.role == "user" else f", {message.role}"
    return f"turn {message.turn} ({day(message.created_at)}{who}): {_clip(text, MAX_LINE_CHARS)}"


def is_fact(sentence: str, cues: Cues) -> bool:
    """A statement of the user's own situation, about a subject, carrying a value."""
    if cues.question or cues.hearsay or cues.hypothetical or cues.request or cues.generic:
        return False
    subject = subject_of(sentence)
    if not subject.keys:
        # No subject to file it under, but a decision with a value ("we pinned
        # numpy to 1.26"): a fact that nothing supersedes. Dated or explained
        # events go to the timeline instead.
        return (
            cues.about_us
            and cues.decision
            and cues.concrete
            and not (cues.date or cues.causal or cues.temporal)
            and salience(cues) >= 5
        )
    # "Our X …" and "the X is …" are both about this conversation's things.
    if not (cues.first_person or subject.named):
        return False
    if not (cues.concrete or cues.decision or cues.reversal or subject.categories):
        return False
    return salience(cues) + (2 if subject.named else 0) >= FACT_SALIENCE


def is_timeline(role: str, sentence: str, cues: Cues) -> bool:
    # The one cue a timeline line needs comes first: most sentences have none,
    # and each cue is a search (see Cues).
    if not (cues.causal or cues.reversal or cues.date):
        return False
    if cues.question or cues.request or cues.hypothetical or cues.generic or cues.hearsay:
        return False
    if role == "user":
        return (cues.first_person or cues.concrete) and salience(cues) >= LINE_SALIENCE
    # The assistant's lines count when they are about this conversation's
    # concrete things ("your …", "we …"), not general advice.
    return (
        cues.concrete
        and (cues.causal or cues.reversal)
        and bool(_ADDRESSED.search(sentence))
        and salience(cues) >= LINE_SALIENCE - 2
    )


class ExtractiveSummarizer:
    """Folds evicted messages into memory by cue-based extraction.

    >>> from compaction.tokens import TiktokenCounter
    >>> s = ExtractiveSummarizer(MemoryRenderer(TiktokenCounter()))
    >>> m = s.fold(Memory(), [Message("user", "Our database is PostgreSQL 15.", turn=3)], 500)
    >>> m.facts[0].subject, m.facts[0].text
    ('database', 'Our database is PostgreSQL 15.')
    """

    name = "extractive"

    def __init__(self, renderer: MemoryRenderer) -> None:
        self.renderer = renderer

    async def summarize(
        self, memory: Memory, evicted: Sequence[Message], max_tokens: int
    ) -> Memory:
        return self.fold(memory, evicted, max_tokens)

    def fold(self, memory: Memory, evicted: Sequence[Message], max_tokens: int) -> Memory:
        """``memory`` with ``evicted`` folded in, costing at most ``max_tokens``."""
        ledger = Ledger(memory)
        summary = list(memory.summary)
        seen = set(summary)
        for message in evicted:
            if message.role not in ("user", "assistant"):
                continue
            parts = [tidy(p) for p in sentences(text_of(message.content))]
            skip = False
            for i, sentence in enumerate(parts):
                if skip:
                    skip = False
                    continue
                cues = read(sentence)
                if message.role == "user" and is_fact(sentence, cues):
                    text, reason = sentence, cause_of(sentence)
                    following = parts[i + 1] if i + 1 < len(parts) else ""
                    if not reason and following and _explains(following):
                        text, reason, skip = f"{sentence} {following}", following, True
                    ledger.add(
                        _clip(text, MAX_FACT_CHARS),
                        turn=message.turn,
                        at=message.created_at,
                        reason=_clip(reason, 200),
                    )
                elif is_timeline(message.role, sentence, cues):
                    line = timeline_line(message, sentence)
                    if line not in seen:
                        seen.add(line)
                        summary.append(line)
        folded = replace(ledger.memory(memory), summary=tuple(summary)).advanced(evicted)
        return fit_memory(folded, max_tokens, self.renderer)


def _explains(sentence: str) -> bool:
    """A sentence that gives the reason for the one before it."""
    cues = read(sentence)
    if not cues.causal or cues.question or cues.request:
        return False
    lowered = sentence.lower()
    return (
        lowered.startswith(
            (
                "because",
                "that's because",
                "that is because",
                "the reason",
                "it was because",
                "due to",
            )
        )
        or not subject_of(sentence).keys
    )
