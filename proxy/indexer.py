"""The background worker that keeps SQLite's full-text index current."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from proxy.app_state import Services

__all__ = ["FtsIndexer"]

# Changes applied per transaction of the index file: bounded, so a search
# (which applies what is left first) never waits long behind the indexer.
BATCH = 256

logger = logging.getLogger("hermes.indexer")


class FtsIndexer:
    """Indexes newly stored messages in batches, every ``interval`` seconds (SQLite only)."""

    def __init__(self, interval: float = 0.25) -> None:
        self.interval = interval
        self._task: asyncio.Task[None] | None = None

    async def start(self, services: Services) -> None:
        if services.store.db.dialect != "sqlite":
            return
        await services.store.index_pending()  # what an earlier process left
        self._task = asyncio.create_task(self._run(services), name="fts-indexer")

    async def _run(self, services: Services) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                while await services.store.index_pending(BATCH) == BATCH:
                    pass
                await services.store.trim_index_log()
            except Exception:
                logger.exception("full-text indexing failed; retrying")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
