"""Scoring for bench.memory: is a planted item in the context sent upstream?

The context is cut into chunks — one per line of the memory message, of the
recalled or retrieved excerpts, one per verbatim message — each with the time
it speaks for: its turn, or, for a line the memory marks current (a current
fact, the "now" side of a change), the turn the memory is current as of. An
item is retained when one chunk holds all of its answer phrases together: the
value *with* its cause, the event *with* its date. A reversal is answered
with the current value marked current when the newest chunk with the new
value is newer than every chunk that has the old value without the new one —
so a memory that lists both as current facts fails, and a transcript where
the new statement comes after the old one passes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.memory_data import Item
from compaction.render import (
    CHANGES_HEADING,
    FACTS_HEADING,
    MEMORY_HEADER,
    RECALL_HEADER,
    SUMMARY_HEADING,
)
from compaction.tokens import text_of

__all__ = ["Chunk", "chunks_of", "score"]

NOW = float("inf")
_TURN_IN = re.compile(r"\(turn (\d+)")
_LEADING_TURN = re.compile(r"^turn (\d+)")
_AS_OF = re.compile(r"as of turn (\d+)")


@dataclass(frozen=True)
class Chunk:
    text: str
    time: float


def _turn_in(text: str, pattern: re.Pattern[str] = _TURN_IN) -> float:
    match = pattern.search(text)
    return float(match.group(1)) if match else 0.0


def _memory_chunks(content: str) -> list[Chunk]:
    """Lines of the memory message; current facts speak for the turn the memory reaches."""
    out: list[Chunk] = []
    section = ""
    now = NOW
    facts_prefix = FACTS_HEADING.split("{", 1)[0]
    for line in content.splitlines():
        if line.startswith(facts_prefix):
            section, now = FACTS_HEADING, _turn_in(line, _AS_OF)
            continue
        if line in (CHANGES_HEADING, SUMMARY_HEADING):
            section = line
            continue
        if not line.startswith("- "):
            continue
        body = line[2:]
        if section == FACTS_HEADING:
            out.append(Chunk(body, now))
        elif section == CHANGES_HEADING:
            for marker, later in ((' -> now "', now), (' -> later "', -1.0)):
                if marker in body:
                    before, after = body.split(marker, 1)
                    out.append(Chunk(before, _turn_in(before)))
                    out.append(Chunk(after, later if later > 0 else _turn_in(after)))
                    break
            else:
                out.append(Chunk(body, _turn_in(body)))
        elif section == SUMMARY_HEADING:
            out.append(Chunk(body, _turn_in(body, _LEADING_TURN)))
    return out


def _excerpt_chunks(content: str) -> list[Chunk]:
    out = []
    for line in content.splitlines():
        if line.startswith("- turn "):
            out.append(Chunk(line[2:], _turn_in(line[2:], _LEADING_TURN)))
    return out


def chunks_of(
    messages: Sequence[Mapping[str, Any]], turn_of: Callable[[Mapping[str, Any]], int]
) -> list[Chunk]:
    """The chunks of a prompt, the last message (the question being asked) left out."""
    out: list[Chunk] = []
    for message in messages[:-1]:
        content = text_of(message.get("content"))
        if content.startswith(MEMORY_HEADER):
            out.extend(_memory_chunks(content))
        elif content.startswith(RECALL_HEADER):
            out.extend(_excerpt_chunks(content))
        elif content:
            out.append(Chunk(content, float(turn_of(message))))
    return out


@functools.cache
def _phrase(phrase: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z0-9]){re.escape(phrase)}(?![A-Za-z0-9])", re.I)


def _has_all(text: str, phrases: Sequence[str]) -> bool:
    return all(_phrase(p).search(text) for p in phrases)


def score(item: Item, chunks: Sequence[Chunk]) -> bool:
    """Whether the context answers ``item`` (reversals: with the current value as current)."""
    with_answer = [c for c in chunks if _has_all(c.text, item.answer)]
    if item.kind != "reversal":
        return bool(with_answer)
    if not with_answer:
        return False
    newest = max(c.time for c in with_answer)
    answered = {id(c) for c in with_answer}
    stale = [c.time for c in chunks if id(c) not in answered and _has_all(c.text, item.old)]
    return newest > max(stale, default=-1.0)
