"""Session reset with memory carry-over, by hand or by policy.

A reset ends the live session under a key and starts a new one under the same
key, whose ``parent_id`` points back. First the pending compaction is
completed — the whole recent window folded into memory, with the configured
summarizer (which falls back to the extractive one) — so the ended session's
memory holds everything; then the new session starts with its facts ledger
and reversals (the user is still known) but neither the summary nor the
window (the conversation starts afresh).

Concurrency: the reset runs under the session lock, like a turn; across
processes (the CLI resetting while a server runs) the final write checks that
no turn is in flight and that nothing changed since it read the session, and
a turn only starts on a session that is still live (``open_turn``).

Automatic resets (:class:`AutoReset`) run at the start of a turn, under that
turn's lock, when the session's source policy says it is due. They never
reset a session that is busy: one with a turn in flight (``pending_turns``),
or one any registered :data:`BusyCheck` reports busy — the hook jobs and runs
use to keep their sessions from being reset under them::

    conversations.auto_reset.busy_checks.append(my_check)   # async (SessionRecord) -> bool
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from datetime import tzinfo

from compaction import Budget, Memory, Summarizer
from proxy.errors import Conflict, NotFound
from proxy.live import SessionCache
from proxy.reset_policy import ResetPolicies
from proxy.store import SessionRecord, SqlStore
from proxy.store.session_info import SessionInfo
from proxy.store.sessions import BUSY_WINDOW, SessionBusy, SessionChanged

__all__ = ["BUSY_WINDOW", "AutoReset", "BusyCheck", "Resetter", "carried_memory"]

logger = logging.getLogger("hermes.resets")

ATTEMPTS = 5

BusyCheck = Callable[[SessionRecord], Awaitable[bool]]
"""True when something (a job, a run) is in progress on the session."""


def carried_memory(memory: Memory) -> Memory:
    """What a new session inherits from an ended one: its facts and reversals only."""
    return Memory(facts=memory.facts, reversals=memory.reversals)


class Resetter:
    """Ends a live session and starts its successor with the facts carried over."""

    def __init__(
        self,
        store: SqlStore,
        summarizer: Summarizer,
        budget: Budget,
        *,
        cache: SessionCache | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.summarizer = summarizer
        self.budget = budget
        self.cache = cache
        self.clock = clock

    async def reset(self, tenant: str, key: str, reason: str = "reset") -> SessionInfo:
        """Reset the live session under ``key``; returns the new session."""
        async with self.store.session_lock(tenant, key):
            return await self.reset_locked(tenant, key, reason)

    async def reset_locked(self, tenant: str, key: str, reason: str = "reset") -> SessionInfo:
        """:meth:`reset`, for a caller that already holds the session lock."""
        try:
            for _ in range(ATTEMPTS):
                old = await self.store.live_info(tenant, key)
                if old is None:
                    raise NotFound(f"No live session under {key!r}.", code="session_not_found")
                version, memory = await self.store.load_memory(old.id)
                window = await self.store.load_messages(old.id, memory.through_seq)
                final, tokens = memory, 0
                if window:
                    summary = await self.summarizer.summarize(
                        memory, window, self.budget.memory_tokens
                    )
                    final, tokens = summary.memory, summary.tokens
                now = self.clock()
                try:
                    return await self.store.end_and_continue(
                        old,
                        version=version,
                        final=final,
                        carried=carried_memory(final),
                        compaction_tokens=tokens,
                        reason=reason,
                        now=now,
                        busy_since=now - BUSY_WINDOW,
                    )
                except SessionChanged:
                    continue  # a turn or a compaction landed meanwhile: fold it in too
                except SessionBusy:
                    raise Conflict(
                        f"Session {old.id} has a turn in progress; reset it when it has finished.",
                        code="session_busy",
                    ) from None
            raise Conflict(
                f"Session {key!r} kept changing while it was being reset; try again.",
                code="session_busy",
            )
        finally:
            # Whatever happened, the proxy's copy is reloaded at the next turn.
            if self.cache is not None:
                self.cache.drop(tenant, key)


class AutoReset:
    """Applies the reset policies at the start of a turn (the caller holds the lock).

    ``clock`` and ``tz`` (the timezone of daily hours; default local time) are
    injectable for tests.
    """

    def __init__(
        self,
        resetter: Resetter,
        policies: ResetPolicies,
        *,
        clock: Callable[[], float] = time.time,
        tz: tzinfo | None = None,
    ) -> None:
        self.resetter = resetter
        self.policies = policies
        self.clock = clock
        self.tz = tz
        self.busy_checks: list[BusyCheck] = []
        self.resets = 0

    async def before_turn(self, tenant: str, key: str) -> str | None:
        """Reset the live session under ``key`` if its policy says it is due.

        Called at the start of a turn, under the session lock, before the turn
        writes anything: the turn then opens the new session. Returns why it
        reset (``"idle"``, ``"daily"``), or ``None``.
        """
        if not self.policies:
            return None
        record = await self.resetter.store.live_session(tenant, key)
        if record is None or record.message_count == 0:
            return None
        policy = self.policies.for_source(record.source)
        reason = policy.due(last_active=record.updated_at, now=self.clock(), tz=self.tz)
        if reason is None or await self.busy(record):
            return None
        try:
            await self.resetter.reset_locked(tenant, key, reason)
        except Exception:
            # A reset that cannot happen now must not cost the user their turn.
            logger.exception("automatic %s reset of session %s failed", reason, record.id)
            return None
        self.resets += 1
        logger.info("session %s reset (%s policy %s)", record.id, record.source, policy)
        return reason

    async def busy(self, record: SessionRecord) -> bool:
        # Pending turns carry real timestamps, whatever clock policies use.
        since = time.time() - BUSY_WINDOW
        if await self.resetter.store.pending_count(record.id, since):
            return True
        for check in self.busy_checks:
            if await check(record):
                return True
        return False
