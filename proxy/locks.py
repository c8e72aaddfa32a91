"""Per-key asyncio locks that disappear when nobody holds or awaits them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["KeyedLock"]


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class KeyedLock:
    """``async with locks("session-1"): ...`` — FIFO per key, so turns keep arrival order."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def locked(self, key: str) -> bool:
        entry = self._entries.get(key)
        return entry is not None and entry.lock.locked()

    @asynccontextmanager
    async def __call__(self, key: str) -> AsyncIterator[None]:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._entries[key]
