"""The run executor: the app's :class:`~proxy.app.Worker` that owns every task running a run.

A run is executed by one process at a time, the holder of its *lease*
(``runs.lease_owner``/``lease_until``), renewed every :data:`TICK_SECONDS`.
Each tick also picks up running runs nobody executes — after a crash, or
created by another replica — and stops executing runs cancelled elsewhere.
A run that waits on a human holds no lease, task or connection: it is a row
until input sets it running again.

At start, a SQLite database belongs to this process alone (its session locks
are in-process too), so every ``running`` run is resumed at once; with a
shared database (PostgreSQL) a run is resumed once its lease has expired.
At stop, executors finish their current step (up to :data:`STOP_GRACE`
seconds, then they are cancelled and the step is redone later) and the
leases are released.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from contextlib import suppress

from proxy.app_state import Services
from proxy.config import Settings
from proxy.run_step import StepRunner
from proxy.runs import Runs
from proxy.store import SqlStore
from proxy.store.runs import RunRecord
from proxy.tasks import TaskSet

__all__ = ["LEASE_SECONDS", "RunWorker", "STOP_GRACE", "TICK_SECONDS"]

logger = logging.getLogger("hermes.runs")

LEASE_SECONDS = 30.0
TICK_SECONDS = 5.0
STOP_GRACE = 5.0
INTERNAL_ERROR = {
    "message": "The proxy failed unexpectedly while running this step; see its log.",
    "type": "server_error",
    "code": "internal_error",
}


class RunWorker:
    """Executes runs: one owned task per run being executed, plus a signal/tick loop."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._tasks = TaskSet()
        self._executing: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        self._loop: asyncio.Task[None] | None = None
        self._stopping = False

    @property
    def executing(self) -> frozenset[str]:
        return frozenset(self._executing)

    async def start(self, services: Services) -> None:
        self.runs: Runs = services.runs
        self.store: SqlStore = services.store
        self.steps = StepRunner(
            services.runs,
            services.conversations,
            services.upstream,
            max_attempts=self.settings.run_attempts,
            retry_delay=self.settings.run_retry_delay,
        )
        force = self.store.db.dialect == "sqlite"
        resumed = await self.store.claimable_runs(force=force, limit=100_000)
        for run_id in resumed:
            await self._launch(run_id, force=force)
        if resumed:
            logger.info("resuming %d interrupted run(s)", len(resumed))
        self._loop = asyncio.create_task(self._serve(), name="run-worker")

    async def stop(self) -> None:
        self._stopping = True
        if self._loop is not None:
            self._loop.cancel()
            with suppress(asyncio.CancelledError):
                await self._loop
        await self._tasks.drain(STOP_GRACE)
        await self.store.release_leases(self.owner)

    async def _serve(self) -> None:
        next_tick = time.monotonic() + TICK_SECONDS
        while True:
            try:
                kind, run_id = await asyncio.wait_for(
                    self.runs.signals.get(), max(0.0, next_tick - time.monotonic())
                )
            except TimeoutError:
                next_tick = time.monotonic() + TICK_SECONDS
                kind, run_id = "tick", ""
            try:
                if kind == "cancel":
                    self._cancel(run_id)
                elif kind == "run":
                    await self._launch(run_id)
                else:
                    await self._tick()
            except Exception:
                logger.exception("run worker: handling %s %s failed", kind, run_id)

    async def _tick(self) -> None:
        statuses = await self.store.renew_leases(
            self.owner, list(self._executing), time.time() + LEASE_SECONDS
        )
        for run_id, status in statuses.items():
            if status != "running":
                self._cancel(run_id)  # cancelled, or taken over, elsewhere
        for run_id in await self.store.claimable_runs(force=False):
            await self._launch(run_id)

    def _cancel(self, run_id: str) -> None:
        task = self._executing.get(run_id)
        if task is not None:
            task.cancel()

    async def _launch(self, run_id: str, *, force: bool = False) -> None:
        if self._stopping:
            return
        if run_id in self._executing:
            # Its executor may be just finishing: look again when it has.
            self._again.add(run_id)
            return
        until = time.time() + LEASE_SECONDS
        if not await self.store.claim_run(run_id, self.owner, until, force=force):
            return
        task = self._tasks.spawn(self._execute(run_id), name=f"run:{run_id}")
        self._executing[run_id] = task
        task.add_done_callback(lambda _: self._finished(run_id))

    def _finished(self, run_id: str) -> None:
        self._executing.pop(run_id, None)
        if run_id in self._again:
            self._again.discard(run_id)
            if not self._stopping:
                self._tasks.spawn(self._launch(run_id), name=f"relaunch:{run_id}")

    async def _execute(self, run_id: str) -> None:
        run: RunRecord | None = await self.store.get_run(run_id)
        try:
            while (
                run is not None
                and run.status == "running"
                and run.lease_owner == self.owner
                and not self._stopping
            ):
                run = await self.steps.run_step(run, self.owner)
        except Exception:
            logger.exception("run %s failed unexpectedly", run_id)
            if run is not None:
                await self.runs.attempt_failed(run, run.attempt, INTERNAL_ERROR, retrying=False)
