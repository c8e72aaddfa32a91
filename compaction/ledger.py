"""The facts ledger: a new fact supersedes the one it replaces, and the change is kept.

Both summarizers write through :class:`Ledger`, so a fact a model returned and
a fact the extractive summarizer read are keyed, compared and superseded the
same way. For a new fact about a subject the ledger already holds:

* the same values again ("our database is PostgreSQL 15", said twice) — a
  restatement: nothing changes;
* more detail on the same values ("PostgreSQL 15" → "PostgreSQL 15 on RDS")
  — a refinement: the fact is replaced, no reversal is recorded;
* anything else, or any reversal cue ("no longer", "switched back",
  "merged … back into") — a change: the old fact leaves the ledger and a
  :class:`~compaction.state.Reversal` keeps both sides, the turns and the
  reason.

    >>> ledger = Ledger()
    >>> ledger.add("We're committed to microservices.", turn=40, at=0.0)
    >>> ledger.add("We merged all services back into a monolith because deploys "
    ...            "took hours.", turn=212, at=0.0)
    >>> [f.text for f in ledger.facts]
    ['We merged all services back into a monolith because deploys took hours.']
    >>> r = ledger.reversals[0]
    >>> r.subject, r.before_turn, r.turn, r.reason
    ('architecture', 40, 212, 'because deploys took hours')
"""

from __future__ import annotations

from dataclasses import replace

from compaction.cues import cause_of, read
from compaction.state import Fact, Memory, Reversal
from compaction.subjects import Subject, subject_of, subject_with, values_of

__all__ = ["Ledger", "fact_subject"]


def fact_subject(fact: Fact) -> Subject:
    """What a stored fact is about: its text read again, plus the subject it was filed under."""
    return subject_with(fact.subject, fact.text) if fact.subject else subject_of(fact.text)


class Ledger:
    """A working copy of a memory's facts and reversals, changed fact by fact."""

    def __init__(self, memory: Memory | None = None) -> None:
        self.facts: list[Fact] = list(memory.facts) if memory else []
        self.reversals: list[Reversal] = list(memory.reversals) if memory else []
        self._texts = {f.text for f in self.facts}

    def add(
        self,
        text: str,
        *,
        turn: int,
        at: float,
        subject: str = "",
        reason: str = "",
        change: bool = False,
        before: str = "",
    ) -> None:
        """File one fact; ``change`` says it is known to replace an earlier one.

        ``subject`` is a hint (a model's key); ``before`` the replaced text when
        the caller knows it but the ledger may not hold it any more.
        """
        text = text.strip()
        if not text or text in self._texts:
            return
        about = subject_with(subject, text) if subject else subject_of(text)
        old = self._match(about, text, before)
        is_change = change or read(text).change
        if old is not None and not is_change:
            mine, theirs = values_of(text), values_of(old.text)
            if mine and mine <= theirs:
                return  # a restatement
            if not (theirs and theirs <= mine):
                is_change = True
        key = _shared_key(about, fact_subject(old)) if old is not None else ""
        key = key or (about.keys[0] if about.keys else "")
        if old is not None:
            self._remove(old)
        if old is not None and is_change:
            self.reversals.append(
                Reversal(
                    subject=key,
                    before=old.text,
                    after=text,
                    turn=turn,
                    at=at,
                    before_turn=old.turn,
                    reason=reason or cause_of(text),
                )
            )
        elif old is None and (change or before) and before.strip():
            self.reversals.append(
                Reversal(key, before.strip(), text, turn, at, 0, reason or cause_of(text))
            )
        self.facts.append(Fact(subject=key, text=text, turn=turn, at=at))
        self._texts.add(text)

    def memory(self, memory: Memory) -> Memory:
        """``memory`` with this ledger's facts and reversals."""
        return replace(memory, facts=tuple(self.facts), reversals=tuple(self.reversals))

    def _match(self, about: Subject, text: str, before: str) -> Fact | None:
        if before:
            for fact in reversed(self.facts):
                if fact.text == before.strip():
                    return fact
        if not about.keys:
            return None
        # Two facts that share only a kind of value (both name a language)
        # are one subject only when the new one says the value changed:
        # "we run Python 3.9" does not replace "the backend is Java".
        loose = read(text).change
        candidates = [
            f
            for f in self.facts
            if fact_subject(f).same_as(about)
            and (loose or _shared_explicit(fact_subject(f), about))
        ]
        if not candidates:
            return None
        mine = values_of(text)
        # The fact whose values the new one mentions ("replaced RabbitMQ with
        # SQS", "billing is Tomas's now, since Priya moved"), then one filed
        # under a subject the new one names outright ("the backend is Go now"
        # replaces "the backend is Python", not "we run Python 3.12"), then
        # the most recent.
        return max(
            candidates,
            key=lambda f: (
                len(values_of(f.text) & mine),
                _shared_explicit(fact_subject(f), about),
                f.turn,
            ),
        )

    def _remove(self, fact: Fact) -> None:
        self.facts.remove(fact)
        self._texts.discard(fact.text)


def _shared_explicit(a: Subject, b: Subject) -> bool:
    return bool(set(a.named) & set(b.named))


def _shared_key(a: Subject, b: Subject) -> str:
    for key in a.keys:
        if key in b.keys:
            return key
    return ""
