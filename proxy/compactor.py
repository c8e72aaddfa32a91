"""Background compaction: fold the oldest window turns into memory, off the response path.

After a turn is stored, a session whose recent window outgrew its share gets
one compaction task (never two at once). The summarizer runs without the
session lock, on a snapshot; the result is applied under the lock and only if
the memory is still the version it started from, so a late compaction never
overwrites newer state.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from compaction import Budget, MemoryRenderer, Summarizer, plan_eviction
from proxy.live import SessionCache
from proxy.store import SqlStore
from proxy.tasks import TaskSet

__all__ = ["CompactionStats", "Compactor"]

logger = logging.getLogger("hermes.compaction")


@dataclass
class CompactionStats:
    runs: int = 0
    applied: int = 0
    conflicts: int = 0
    failures: int = 0
    """Summarizer errors (the fallback ran instead)."""
    tokens: int = 0


class Compactor:
    def __init__(
        self,
        *,
        store: SqlStore,
        summarizer: Summarizer,
        renderer: MemoryRenderer,
        budget: Budget,
        cache: SessionCache,
        tasks: TaskSet,
        concurrency: int = 4,
    ) -> None:
        self.store = store
        self.summarizer = summarizer
        self.renderer = renderer
        self.budget = budget
        self.cache = cache
        self.tasks = tasks
        self.stats = CompactionStats()
        self._running: set[str] = set()
        self._again: set[str] = set()
        self._slots = asyncio.Semaphore(concurrency)
        self._idle = asyncio.Event()
        self._idle.set()

    def request(self, tenant: str, key: str, session_id: str) -> None:
        """Compact the session soon, unless a compaction of it is already running."""
        if session_id in self._running:
            self._again.add(session_id)
            return
        self._running.add(session_id)
        self._idle.clear()
        self.tasks.spawn(self._run(tenant, key, session_id), name=f"compact:{session_id}")

    async def idle(self) -> None:
        """Wait until no compaction is running (for tests and orderly shutdown)."""
        await self._idle.wait()

    async def _run(self, tenant: str, key: str, session_id: str) -> None:
        try:
            while True:
                async with self._slots:
                    await self.compact(tenant, key, session_id)
                if session_id not in self._again:
                    break
                self._again.discard(session_id)
        except Exception:
            logger.exception("compaction of session %s failed", session_id)
        finally:
            self._running.discard(session_id)
            if not self._running:
                self._idle.set()

    async def compact(self, tenant: str, key: str, session_id: str) -> bool:
        """One incremental compaction; True if it changed the memory."""
        live = self.cache.get(tenant, key)
        if live is not None and live.id == session_id:
            # The turn path keeps the session current in memory: no need to
            # read it back (a stale copy only fails the version check below).
            version, memory, window = live.version, live.memory, list(live.window)
            system_tokens, window_tokens = live.system_tokens, live.window_tokens
        else:
            version, memory = await self.store.load_memory(session_id)
            window = await self.store.load_messages(session_id, memory.through_seq)
            record = await self.store.get_session(session_id)
            system_tokens = sum(m.tokens for m in record.system) if record else 0
            window_tokens = sum(m.tokens for m in window)
        memory_tokens = self.renderer.render(memory).tokens
        evicted = plan_eviction(window, self.budget, system_tokens, memory_tokens, window_tokens)
        if not evicted:
            return False
        self.stats.runs += 1
        # Recall searches what this fold archives: it must be in the index
        # before the fold is saved (indexed meanwhile, on the index's thread).
        indexed = asyncio.ensure_future(
            self.store.index_stored_by(max(m.created_at for m in evicted))
        )
        try:
            summary = await self.summarizer.summarize(memory, evicted, self.budget.memory_tokens)
        finally:
            await indexed
        self.stats.tokens += summary.tokens
        if summary.error is not None:
            self.stats.failures += 1
            logger.warning(
                "summarizer failed for %s, used extractive: %s", session_id, summary.error
            )
        async with self.store.session_lock(tenant, key):
            saved = await self.store.save_memory(
                session_id, version, summary.memory, summary.tokens
            )
            live = self.cache.get(tenant, key)
            if live is not None and live.id == session_id:
                if saved and live.version == version:
                    live.folded(summary.memory)
                else:
                    self.cache.drop(tenant, key)
        if not saved:
            self.stats.conflicts += 1
            return False
        self.stats.applied += 1
        return True
