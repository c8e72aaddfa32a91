"""Long-term memory: what a new conversation inherits from earlier ones.

A new thread starts with an empty conversation but still knows the customer:
its memory holds the facts ledger (facts and their reversals) merged from the
customer's earlier conversations — no summary, no recent turns. Facts still
in a conversation's verbatim window (not compacted yet) are extracted the
way the extractive summarizer would, so a fact stated a minute ago carries
over too.
"""

from __future__ import annotations

from collections.abc import Sequence

from compaction.extractive import ExtractiveSummarizer
from compaction.render import fit_memory
from compaction.state import Fact, Memory, Message, Reversal

__all__ = ["long_term_memory"]

# Room for folding a window before the merged ledger is fitted to its budget.
_UNBOUNDED = 1 << 30


def long_term_memory(
    sources: Sequence[tuple[Memory, Sequence[Message]]],
    extractive: ExtractiveSummarizer,
    max_tokens: int,
) -> Memory:
    """The merged facts ledger of ``sources`` (each a memory and its unfolded window).

    Per subject, the most recently stated fact holds; when conversations
    disagree, the older statement becomes a reversal, as within one session.
    The result fits ``max_tokens`` (oldest items go first).

    >>> from compaction import MemoryRenderer, TiktokenCounter
    >>> ex = ExtractiveSummarizer(MemoryRenderer(TiktokenCounter()))
    >>> window = [Message("user", "My name is Alex.", turn=1, created_at=1.0)]
    >>> [f.text for f in long_term_memory([(Memory(), window)], ex, 500).facts]
    ['My name is Alex.']
    """
    facts: dict[str, Fact] = {}
    reversals: dict[tuple[str, str, str], Reversal] = {}
    for memory, window in sources:
        ledger = Memory(facts=memory.facts, reversals=memory.reversals)
        folded = extractive.fold(ledger, window, _UNBOUNDED)
        for r in folded.reversals:
            reversals.setdefault((r.subject, r.before, r.after), r)
        for fact in folded.facts:
            old = facts.get(fact.subject)
            if old is not None and old.at > fact.at:
                fact, old = old, fact
            facts[fact.subject] = fact
            if old is not None and old.text != fact.text:
                reversals.setdefault(
                    (fact.subject, old.text, fact.text),
                    Reversal(
                        subject=fact.subject,
                        before=old.text,
                        after=fact.text,
                        turn=fact.turn,
                        at=fact.at,
                        before_turn=old.turn,
                    ),
                )
    merged = Memory(
        facts=tuple(sorted(facts.values(), key=lambda f: f.at)),
        reversals=tuple(sorted(reversals.values(), key=lambda r: r.at)),
    )
    return fit_memory(merged, max_tokens, extractive.renderer)
