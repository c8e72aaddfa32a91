"""Per-key asyncio locks that disappear when nobody holds or awaits them."""

from __future__ import annotations

import asyncio
from types import TracebackType

__all__ = ["KeyedLock"]


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class _Hold:
    """``async with`` one key's lock (a class, not a generator: it is on every turn's path)."""

    __slots__ = ("_entries", "_key", "_entry")

    def __init__(self, entries: dict[str, _Entry], key: str) -> None:
        self._entries = entries
        self._key = key

    async def __aenter__(self) -> None:
        entry = self._entries.get(self._key)
        if entry is None:
            entry = self._entries[self._key] = _Entry()
        entry.users += 1
        self._entry = entry
        try:
            await entry.lock.acquire()
        except BaseException:
            self._leave()
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._entry.lock.release()
        self._leave()

    def _leave(self) -> None:
        self._entry.users -= 1
        if self._entry.users == 0:
            del self._entries[self._key]


class KeyedLock:
    """``async with locks("session-1"): ...`` — FIFO per key, so turns keep arrival order."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def locked(self, key: str) -> bool:
        entry = self._entries.get(key)
        return entry is not None and entry.lock.locked()

    def __call__(self, key: str) -> _Hold:
        return _Hold(self._entries, key)
