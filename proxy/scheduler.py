"""The scheduler: a worker that claims due jobs and runs them.

Every ``interval`` seconds it asks the store for due jobs and claims them
(:meth:`~proxy.store.jobs.JobStore.claim_due`): the claim moves the job's
``next_run_at`` past *now* in the same transaction that opens the run, before
anything runs. So an occurrence fires at most once — across restarts and
across processes sharing the database — and occurrences missed while no
scheduler was running collapse into one catch-up run. A failed run is
recorded and the job waits for its next occurrence; nothing retries in a loop.

Time comes from ``services.clock``, so tests drive schedules with a fake one.
"""

from __future__ import annotations

import asyncio
import logging

from proxy.app_state import Services
from proxy.jobs import JobRunner, next_run
from proxy.tasks import TaskSet

__all__ = ["Scheduler"]

logger = logging.getLogger("hermes.scheduler")

# Runs in flight per process; beyond that due jobs wait (or another replica takes them).
MAX_RUNNING = 8
# How long stopping waits for runs in flight before cancelling them.
STOP_GRACE = 5.0


class Scheduler:
    """Fires due jobs; started and stopped by the app's lifespan.

    >>> scheduler = Scheduler(interval=1.0)
    >>> await scheduler.start(services)  # doctest: +SKIP
    >>> scheduler.ticks  # passes made so far
    """

    def __init__(self, interval: float, *, max_running: int = MAX_RUNNING) -> None:
        self.interval = interval
        self.max_running = max_running
        self.grace = STOP_GRACE
        self.ticks = 0
        self._runs = TaskSet()
        self._loop: asyncio.Task[None] | None = None
        self._services: Services | None = None

    async def start(self, services: Services) -> None:
        self._services = services
        now = services.clock()
        # A run still "running" long after any upstream call could have ended
        # belongs to a process that died mid-run.
        stale = now - services.settings.upstream_timeout - 60
        if await services.store.interrupt_runs(stale, now):
            logger.warning("marked job runs interrupted by an earlier stop as errors")
        self._loop = asyncio.get_running_loop().create_task(self._run(), name="scheduler")

    async def stop(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
            await asyncio.gather(self._loop, return_exceptions=True)
            self._loop = None
        await self._runs.drain(self.grace)

    @property
    def running(self) -> int:
        return len(self._runs)

    async def tick(self) -> int:
        """One pass: claim what is due now and start running it; return how many."""
        svc = self._services
        assert svc is not None, "the scheduler is not started"
        free = self.max_running - len(self._runs)
        if free <= 0:
            return 0
        claimed = await svc.store.claim_due(svc.clock(), free, next_run)
        runner = JobRunner(svc.store, svc.conversations, svc.upstream, svc.clock)
        for job, run in claimed:
            logger.info("running job %s (%s), run %s", job.name, job.id, run.id)
            self._runs.spawn(runner.execute(job, run), name=f"job:{job.id}:{run.id}")
        return len(claimed)

    async def _run(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception:
                # A database hiccup skips one pass; the next one tries again.
                logger.exception("scheduler pass failed")
            self.ticks += 1
            await asyncio.sleep(self.interval)
