"""The extractive summarizer: deterministic, no model, always available.

It reads the evicted messages sentence by sentence and keeps, verbatim, what
carries information a session must not lose:

* **facts** — sentences stating names, numbers, versions, dates, preferences
  or decisions, keyed by their subject so a later statement about the same
  subject supersedes the earlier one (recorded as a reversal);
* **summary lines** — sentences with causal, temporal or reversal cues, which
  keep *why* and *in what order* things happened.

Everything else (pleasantries, filler, long explanations) is dropped; the raw
transcript stays in the archive for recall.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from compaction.render import MemoryRenderer, day, fit_memory
from compaction.state import Fact, Memory, Message, Reversal
from compaction.tokens import text_of

__all__ = ["ExtractiveSummarizer", "sentences", "subject_of"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_NUMBER = re.compile(r"\d")
_VERSION = re.compile(r"\bv?\d+(?:\.\d+)+\b")
_NAME = re.compile(r"(?<!^)(?<![.!?]\s)\b[A-Z][a-zA-Z0-9]+|\b[A-Z]{2,}\b")
_CAUSAL = re.compile(
    r"\b(because|due to|caused|causing|since|so that|therefore|as a result|led to|"
    r"in order to|thanks to|owing to|hence)\b",
    re.I,
)
_TEMPORAL = re.compile(
    r"\b(Q[1-4]|\d{4}-\d{2}-\d{2}|january|february|march|april|may|june|july|august|"
    r"september|october|november|december|monday|tuesday|wednesday|thursday|friday|"
    r"yesterday|today|tomorrow|last (?:week|month|year|sprint)|next (?:week|month|year|sprint)|"
    r"then|after|before|later|until|afterwards|previously|initially|finally)\b",
    re.I,
)
_REVERSAL = re.compile(
    r"\b(revert(?:ed)?|switched back|went back|moved back|rolled back|no longer|instead|"
    r"replaced|abandon(?:ed)?|dropped|undid|undo|back to|back into|changed (?:our|my) mind|"
    r"actually|not anymore|migrated (?:away|off)|moved away from|scrapped|ditched)\b",
    re.I,
)
_DECISION = re.compile(
    r"\b(we (?:use|used|chose|picked|decided|agreed|will|are using|switched|migrated|moved|"
    r"merged|removed|added|adopted|run|deploy)|i (?:prefer|like|love|hate|use|want|need)|"
    r"my name is|i am|i'm|we're|our \w+ (?:is|are)|my \w+ (?:is|are)|decided|decision|"
    r"prefer(?:s|red)?|deadline|budget|must|always|never)\b",
    re.I,
)
# "our database is …", "my name is …", "the deadline was …"
_SUBJECT = re.compile(
    r"\b(?:our|my|the|their|his|her|your)\s+((?:[\w-]+\s+){0,2}?[\w-]+)\s+"
    r"(?:is|are|was|were|will be|has become|became|runs on|lives in)\b",
    re.I,
)
_STOP = frozenset(
    (
        "a an the of to in on for and or but with we i you it is are was were be this that our my "
        "your their its at by from as so do did does have has had not no"
    ).split()
)
MAX_FACT_CHARS = 300
MAX_LINE_CHARS = 400


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if len(s.strip()) > 3]


def subject_of(sentence: str) -> str | None:
    """The subject a fact is about, normalized, when one can be found."""
    match = _SUBJECT.search(sentence)
    if match:
        words = [w for w in match.group(1).lower().split() if w not in _STOP]
        if words:
            return " ".join(words)
    return None


def _fact_score(sentence: str) -> int:
    score = 0
    score += 2 if _VERSION.search(sentence) else 1 if _NUMBER.search(sentence) else 0
    score += 1 if _NAME.search(sentence) else 0
    score += 2 if _DECISION.search(sentence) else 0
    return score


def _summary_score(sentence: str) -> int:
    return (
        2 * bool(_CAUSAL.search(sentence))
        + 2 * bool(_REVERSAL.search(sentence))
        + bool(_TEMPORAL.search(sentence))
    )


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


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
        facts = list(memory.facts)
        reversals = list(memory.reversals)
        summary = list(memory.summary)
        for message in evicted:
            if message.role not in ("user", "assistant"):
                continue
            for sentence in sentences(text_of(message.content)):
                if message.role == "user" and _fact_score(sentence) >= 2:
                    self._add_fact(facts, reversals, sentence, message)
                elif _summary_score(sentence) >= 2:
                    who = "user" if message.role == "user" else "assistant"
                    summary.append(
                        f"turn {message.turn} ({day(message.created_at)}), {who}: "
                        f"{_clip(sentence, MAX_LINE_CHARS)}"
                    )
        folded = replace(
            memory, facts=tuple(facts), reversals=tuple(reversals), summary=tuple(summary)
        ).advanced(evicted)
        return fit_memory(folded, max_tokens, self.renderer)

    @staticmethod
    def _add_fact(
        facts: list[Fact], reversals: list[Reversal], sentence: str, message: Message
    ) -> None:
        text = _clip(sentence, MAX_FACT_CHARS)
        subject = subject_of(sentence) or " ".join(
            w for w in re.findall(r"[a-z0-9.]+", text.lower()) if w not in _STOP
        )
        for i, old in enumerate(facts):
            if old.subject != subject:
                continue
            if old.text == text:
                return
            del facts[i]
            cause = _CAUSAL.search(sentence)
            reversals.append(
                Reversal(
                    subject=subject,
                    before=old.text,
                    after=text,
                    turn=message.turn,
                    at=message.created_at,
                    before_turn=old.turn,
                    reason=_clip(sentence[cause.start() :], 160) if cause else "",
                )
            )
            break
        facts.append(Fact(subject=subject, text=text, turn=message.turn, at=message.created_at))
