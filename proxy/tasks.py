"""Owned background tasks: every task the proxy starts is tracked and ended."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

__all__ = ["TaskSet"]

logger = logging.getLogger("hermes.tasks")


class TaskSet:
    """Starts tasks, forgets them when done, and waits for or cancels the rest.

    Work that must not be lost (storing a finished turn) is awaited with
    :meth:`drain` at shutdown; long-running loops are cancelled.
    """

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("background task %s failed", task.get_name(), exc_info=task.exception())

    async def drain(self, grace: float) -> None:
        """Wait for running tasks (up to ``grace`` seconds), then cancel what is left."""
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
