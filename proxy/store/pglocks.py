"""Per-key locks that hold across every process sharing one PostgreSQL database.

A key (a session) is locked in two steps: first an in-process
:class:`~proxy.locks.KeyedLock`, so a process's own turns queue in arrival
order and only one of them at a time competes with other processes; then a
PostgreSQL session-level advisory lock on a 64-bit hash of the key.

Holding a session-level advisory lock ties up the connection that took it,
and a turn holds its lock for the whole upstream call. A connection per
turn in flight would exhaust ``max_connections`` long before the proxy ran
out of anything else, so uncontended locks are *multiplexed*: one holder
connection per process takes them with ``pg_try_advisory_lock`` (never
blocking) and can hold any number at once. Only when another process holds
the key does a turn take a dedicated connection and block in
``pg_advisory_lock``, which PostgreSQL grants in FIFO order across
processes; that connection is kept until the lock is released.

Acquisition and release survive cancellation: a cancelled acquisition
waits for PostgreSQL's answer and gives back a lock it turns out to hold;
a release always reaches the server before the in-process lock is freed.
If a connection dies, PostgreSQL drops its locks: the optimistic state
version and the ``UNIQUE (session_id, seq)`` constraint keep a turn that
lost its lock from corrupting the session.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import asyncpg

from proxy.errors import StorageError
from proxy.locks import KeyedLock

__all__ = ["CONNECTION_ERRORS", "DRIVER_ERRORS", "AdvisoryLocks", "finish", "lock_id", "outlast"]

T = TypeVar("T")

# Everything asyncpg raises for a database or connection problem. (A connection
# the server ended while it sat idle in a pool can surface as InternalClientError.)
DRIVER_ERRORS = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,
)
# The connection, not the statement, failed: a read can be tried again on another.
CONNECTION_ERRORS = (
    asyncpg.PostgresConnectionError,
    asyncpg.AdminShutdownError,
    asyncpg.InternalClientError,
    asyncpg.InterfaceError,
    OSError,
)

Release = Callable[[], Coroutine[Any, Any, None]]

# The holder connection answers every process-local try and unlock, one at a
# time: a server that stops answering must not hold them all up for ever.
HOLDER_TIMEOUT = 30.0


def lock_id(namespace: str, key: str) -> int:
    """A signed 64-bit advisory lock id for ``key`` within ``namespace`` (database, schema)."""
    digest = hashlib.blake2b(f"{namespace}\x00{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


async def outlast(coro: Coroutine[Any, Any, T]) -> tuple[T, bool]:
    """Run ``coro`` to its end even if the caller is cancelled meanwhile.

    Returns its result and whether the caller was cancelled (which the
    caller must then honour by raising :class:`asyncio.CancelledError`).
    """
    task = asyncio.ensure_future(coro)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled and task.exception() is not None:
        raise asyncio.CancelledError
    return task.result(), cancelled


async def finish(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end; if the caller was cancelled meanwhile, raise that after."""
    result, cancelled = await outlast(coro)
    if cancelled:
        raise asyncio.CancelledError
    return result


class AdvisoryLocks:
    """``async with locks("session…"):`` — exclusive across processes and machines."""

    def __init__(self, url: str, pool_size: int, namespace: str, **connect: Any) -> None:
        self.url = url
        self.namespace = namespace
        self._connect = connect
        self._pool_size = pool_size
        self._local = KeyedLock()
        self._holder: asyncpg.Connection | None = None
        self._holder_busy = asyncio.Lock()
        self._waiters: asyncpg.Pool | None = None
        self.contended = 0  # acquisitions that had to wait for another process

    async def open(self) -> None:
        # The default reset of a pooled connection runs pg_advisory_unlock_all(),
        # a second guarantee that a waiter's lock never outlives its turn.
        self._waiters = await asyncpg.create_pool(
            self.url, min_size=0, max_size=self._pool_size, **self._connect
        )

    async def close(self) -> None:
        if self._holder is not None:
            await self._holder.close()
            self._holder = None
        if self._waiters is not None:
            await self._waiters.close()
            self._waiters = None

    @asynccontextmanager
    async def __call__(self, key: str) -> AsyncIterator[None]:
        async with self._local(key):
            release = await self._acquire(lock_id(self.namespace, key))
            try:
                yield
            finally:
                await finish(release())

    async def _acquire(self, lock: int) -> Release:
        try:
            holder, cancelled = await outlast(self._try(lock))
        except DRIVER_ERRORS as exc:
            raise StorageError(f"cannot take a database lock: {exc}") from exc
        if cancelled:
            if holder is not None:
                await outlast(self._unlock_held(holder, lock))
            raise asyncio.CancelledError
        if holder is not None:
            return lambda: self._unlock_held(holder, lock)
        self.contended += 1
        return await self._wait(lock)

    async def _try(self, lock: int) -> asyncpg.Connection | None:
        """Take ``lock`` on the holder connection if nobody holds or awaits it."""
        async with self._holder_busy:
            if self._holder is None or self._holder.is_closed():
                self._holder = await asyncpg.connect(
                    self.url, timeout=HOLDER_TIMEOUT, **self._connect
                )
            holder = self._holder
            try:
                got = await holder.fetchval(
                    "SELECT pg_try_advisory_lock($1)", lock, timeout=HOLDER_TIMEOUT
                )
            except BaseException:
                # Whatever state it is in, its locks die with it.
                holder.terminate()
                self._holder = None
                raise
        return holder if got else None

    async def _unlock_held(self, holder: asyncpg.Connection, lock: int) -> None:
        async with self._holder_busy:
            if holder.is_closed():
                return  # the lock went with the connection
            try:
                await holder.fetchval("SELECT pg_advisory_unlock($1)", lock, timeout=HOLDER_TIMEOUT)
            except DRIVER_ERRORS:
                holder.terminate()
                if self._holder is holder:
                    self._holder = None

    async def _wait(self, lock: int) -> Release:
        """Queue for ``lock`` on a connection of its own, which then holds it."""
        assert self._waiters is not None, "locks are not open"
        waiters = self._waiters
        try:
            conn = await waiters.acquire()
        except DRIVER_ERRORS as exc:
            raise StorageError(f"cannot take a database lock: {exc}") from exc
        try:
            await conn.execute("SELECT pg_advisory_lock($1)", lock)
        except BaseException as exc:
            # Cancelled or failed while queued: the lock may have been granted
            # a moment ago. Ending the connection ends any claim it has.
            conn.terminate()
            await waiters.release(conn)
            if isinstance(exc, DRIVER_ERRORS):
                raise StorageError(f"cannot take a database lock: {exc}") from exc
            raise

        async def release() -> None:
            try:
                await conn.execute("SELECT pg_advisory_unlock($1)", lock)
            except DRIVER_ERRORS:
                conn.terminate()
            finally:
                await waiters.release(conn)

        return release
