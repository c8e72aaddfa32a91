"""Recall on the turn path: archived excerpts that match the new message.

For each new user message the proxy searches the session's archive — the
messages already folded into memory, no longer in the recent window — and
hands the best-matching sentences to the prompt builder, which sends those
that fit the recall share in a message of their own after the window. What
the summary dropped can still be found.

Nothing is searched before anything is archived, so a young session pays
nothing for it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from compaction import MemoryRenderer, Message, excerpt, known_sentences, query_terms
from compaction.tokens import text_of
from proxy.live import LiveSession
from proxy.store.recall import RecallStore

__all__ = ["ArchiveRecall"]

# Candidates fetched per turn; the builder keeps what fits the recall share.
RECALL_LIMIT = 6
RECENT_QUERIES = 4096
# Archived messages (~1,000 turns) up to which every match is ranked; ~2 ms
# when every one of them matches (bench.recall, 2 shared cores).
FULL_RANK_ARCHIVE = 2000


class ArchiveRecall:
    """The :data:`~proxy.turns.Recall` hook over the store's full-text index."""

    def __init__(
        self, store: RecallStore, renderer: MemoryRenderer, limit: int = RECALL_LIMIT
    ) -> None:
        self.store = store
        self.renderer = renderer
        self.limit = limit
        # The archive only changes when compaction advances it, so a query
        # repeated before then has the same answer.
        self._recent: OrderedDict[
            tuple[str, int, tuple[str, ...], tuple[str, ...]], list[Message]
        ] = OrderedDict()

    async def __call__(self, live: LiveSession, new: Sequence[Message]) -> list[Message]:
        through = live.memory.through_seq
        if through <= 0:
            return []
        terms = query_terms(" ".join(text_of(m.content) for m in new if m.role == "user"))
        unseen = live.unseen(terms, self.memory_text(live)) if terms else []
        if not unseen:
            # Everything the message names is still in view: nothing to recall
            # (and no archive query on the turn path).
            return []
        key = (live.id, through, tuple(terms), tuple(unseen))
        hits = self._recent.get(key)
        if hits is None:
            # Ranking costs one BM25 score per archived message naming any
            # term: a word on every line of a long archive scores them all.
            # Past FULL_RANK_ARCHIVE messages only those naming a word that
            # is out of view are ranked (still on every term), which keeps
            # the query as cheap as that word is rare.
            required = unseen if through > FULL_RANK_ARCHIVE else None
            hits = await self.store.recall_messages(
                live.id, through, terms, self.limit, required=required
            )
            self._recent[key] = hits
            if len(self._recent) > RECENT_QUERIES:
                self._recent.popitem(last=False)
        if not hits:
            return []
        known = known_sentences(live.memory)
        out = []
        for hit in hits:
            cut = excerpt(hit, terms, known)
            if cut is not None:
                out.append(cut)
        return out

    def memory_text(self, live: LiveSession) -> str:
        message = self.renderer.render(live.memory).message
        return str(message["content"]) if message else ""
