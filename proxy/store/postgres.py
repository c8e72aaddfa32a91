"""PostgreSQL driver (asyncpg): many proxy processes, on many machines, one database.

The store's SQL is written once with ``?`` placeholders; this driver rewrites
them to ``$1, $2…`` (once per distinct statement) and runs them on a pool of
``pool_size`` connections. What SQLite gets from having one writer, this
driver gets from PostgreSQL:

- :meth:`write` runs its statements in one transaction (READ COMMITTED is
  enough: they are plain inserts and ``x = x + ?`` updates).
- :meth:`transact` runs a read-modify-write at SERIALIZABLE isolation and
  retries it on a serialization failure or deadlock, so ``fn`` sees what a
  single writer would. ``fn`` may therefore run more than once: it must do
  nothing but database work through its ``tx``.
- :meth:`lock` is exclusive across every process on the database
  (:mod:`proxy.store.pglocks`).

As with SQLite, a write that has started completes even if its caller is
cancelled (the driver owns it, and :meth:`close` waits for it). Everything
asyncpg raises leaves the driver as :class:`~proxy.errors.StorageError`.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from importlib import resources
from itertools import groupby
from typing import Any, TypeVar, cast
from urllib.parse import parse_qs, urlsplit, urlunsplit

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from proxy.errors import StorageError
from proxy.store.database import Row, Statement, Tx
from proxy.store.pglocks import CONNECTION_ERRORS, DRIVER_ERRORS, AdvisoryLocks, lock_id

__all__ = ["PostgresDatabase", "is_postgres_url", "migrate", "placeholders", "redact"]

logger = logging.getLogger("hermes.store")
T = TypeVar("T")
Connection = asyncpg.Connection | PoolConnectionProxy

DEFAULT_POOL_SIZE = 10
# Attempts of a transact() that keeps losing serialization conflicts.
ATTEMPTS = 10
RETRYABLE = (asyncpg.SerializationError, asyncpg.DeadlockDetectedError)
# Distinct statements remembered in their $n form; SQL built with a varying
# number of placeholders (IN lists) must not grow the cache without bound.
SQL_CACHE = 2048

# String literals, quoted identifiers and comments are copied as they are;
# a ``?`` anywhere else is a placeholder.
_TOKENS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/|\?", re.S)


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgres://", "postgresql://"))


def placeholders(sql: str) -> str:
    """``?`` → ``$1, $2…`` outside string literals, quoted identifiers and comments."""
    count = 0

    def number(match: re.Match[str]) -> str:
        nonlocal count
        if match.group() != "?":
            return match.group()
        count += 1
        return f"${count}"

    return _TOKENS.sub(number, sql)


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def _returns_rows(sql: str) -> bool:
    head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
    return head in ("SELECT", "WITH", "VALUES") or "RETURNING" in sql.upper()


def _rowcount(status: str) -> int:
    """Rows a command changed, from its status tag (``INSERT 0 1``, ``UPDATE 3``)."""
    last = status.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Pool reset for query connections: they never keep session state.

    asyncpg itself rolls back a transaction left open; its default reset would
    add a round trip per query to clear LISTENs, settings and advisory locks
    that these connections never take.
    """


class _Tx:
    """The :class:`~proxy.store.database.Tx` a :meth:`PostgresDatabase.transact` ``fn`` gets."""

    def __init__(self, conn: Connection, sql: Callable[[str], str]) -> None:
        self.conn = conn
        self.sql = sql

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        return _rowcount(await self.conn.execute(self.sql(sql), *args))

    async def fetchall(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        return cast(list[Row], await self.conn.fetch(self.sql(sql), *args))


class PostgresDatabase:
    """A :class:`~proxy.store.database.Database` on PostgreSQL, safe for many processes."""

    dialect = "postgresql"

    def __init__(self, url: str, *, pool_size: int = DEFAULT_POOL_SIZE) -> None:
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, not {pool_size}")
        self.url = url
        self.pool_size = pool_size
        self.namespace = ""
        self._pool: asyncpg.Pool | None = None
        self._locks: AdvisoryLocks | None = None
        self._sql: dict[str, str] = {}
        self._writes: set[asyncio.Task[Any]] = set()
        query = parse_qs(urlsplit(url).query)
        # Named connections show up in pg_stat_activity (unless the URL names them).
        self._connect: dict[str, Any] = {}
        if "application_name" not in query:
            self._connect["server_settings"] = {"application_name": "hermes-proxy"}

    async def open(self) -> None:
        try:
            self._pool = await asyncpg.create_pool(
                self.url,
                min_size=1,
                max_size=self.pool_size,
                reset=_keep_session,
                **self._connect,
            )
            async with self._pool.acquire() as conn:
                self.namespace = await conn.fetchval(
                    "SELECT current_database() || '.' || coalesce(current_schema(), '')"
                )
                await migrate(conn, self.namespace)
            self._locks = AdvisoryLocks(self.url, self.pool_size, self.namespace, **self._connect)
            await self._locks.open()
        except DRIVER_ERRORS as exc:
            await self.close()
            where = redact(self.url)
            raise StorageError(f"cannot open PostgreSQL database {where}: {exc}") from exc

    async def close(self) -> None:
        if self._writes:
            await asyncio.wait(set(self._writes))
        if self._locks is not None:
            await self._locks.close()
            self._locks = None
        if self._pool is not None:
            try:
                await asyncio.wait_for(self._pool.close(), 10)
            except TimeoutError:
                self._pool.terminate()
            self._pool = None

    def _ready(self) -> asyncpg.Pool:
        if self._pool is None:
            raise StorageError("database is closed")
        return self._pool

    def _translate(self, sql: str) -> str:
        translated = self._sql.get(sql)
        if translated is None:
            if len(self._sql) >= SQL_CACHE:
                self._sql.clear()
            translated = self._sql[sql] = placeholders(sql)
        return translated

    # -- reads ---------------------------------------------------------------

    async def fetchall(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        pool = self._ready()
        sql = self._translate(sql)
        for attempt in (1, 2):
            try:
                async with pool.acquire() as conn:
                    return cast(list[Row], await conn.fetch(sql, *args))
            except CONNECTION_ERRORS as exc:
                # A pooled connection the server dropped (restart, failover, idle
                # timeout) fails on first use; a read is safe to try once more.
                if attempt == 2:
                    raise StorageError(f"database read failed: {exc}") from exc
            except DRIVER_ERRORS as exc:
                raise StorageError(f"database read failed: {exc}") from exc
        raise AssertionError("unreachable")

    async def fetchone(self, sql: str, args: Sequence[Any] = ()) -> Row | None:
        rows = await self.fetchall(sql, args)
        return rows[0] if rows else None

    # -- writes --------------------------------------------------------------

    async def write(
        self, statements: Sequence[Statement], *, urgent: bool = False
    ) -> list[list[Row]]:
        # ``urgent`` changes nothing here: every write already goes straight
        # to a pooled connection.
        return await self._owned(self._write(list(statements)))

    async def transact(self, fn: Callable[[Tx], Awaitable[T]]) -> T:
        result: T = await self._owned(self._transact(fn))
        return result

    async def _owned(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a write as the driver's own task: a cancelled caller does not cut it short."""
        self._ready()
        task = asyncio.get_running_loop().create_task(coro, name="postgres-write")
        self._writes.add(task)
        task.add_done_callback(self._write_done)
        return await asyncio.shield(task)

    def _write_done(self, task: asyncio.Task[Any]) -> None:
        self._writes.discard(task)
        # Retrieved here: if its caller was cancelled, nobody else will.
        if not task.cancelled() and task.exception() is not None:
            logger.debug("a write failed: %s", task.exception())

    async def _write(self, statements: list[Statement]) -> list[list[Row]]:
        """Run the batch in one transaction; each statement's rows (SELECT, RETURNING)."""
        pool = self._ready()
        results: list[list[Row]] = []
        try:
            async with pool.acquire() as conn:
                if len(statements) == 1:
                    sql, args = statements[0]
                    return [cast(list[Row], await conn.fetch(self._translate(sql), *args))]
                async with conn.transaction():
                    # Consecutive runs of one row-less statement go as one pipelined executemany.
                    for sql, run in groupby(statements, key=lambda s: s[0]):
                        rows = [args for _, args in run]
                        if len(rows) > 1 and not _returns_rows(sql):
                            await conn.executemany(self._translate(sql), rows)
                            results.extend([] for _ in rows)
                            continue
                        for args in rows:
                            fetched = await conn.fetch(self._translate(sql), *args)
                            results.append(cast(list[Row], fetched))
        except DRIVER_ERRORS as exc:
            raise StorageError(f"database write failed: {exc}") from exc
        return results

    async def _transact(self, fn: Callable[[Tx], Awaitable[T]]) -> T:
        pool = self._ready()
        for attempt in range(1, ATTEMPTS + 1):
            try:
                async with pool.acquire() as conn, conn.transaction(isolation="serializable"):
                    return await fn(_Tx(conn, self._translate))
            except RETRYABLE as exc:
                if attempt == ATTEMPTS:
                    raise StorageError(f"database write kept conflicting: {exc}") from exc
                # Back off a little, at random, so the conflicting writers spread out.
                await asyncio.sleep(random.uniform(0, 0.002 * 2**attempt))
            except DRIVER_ERRORS as exc:
                raise StorageError(f"database write failed: {exc}") from exc
        raise AssertionError("unreachable")

    # -- locks ---------------------------------------------------------------

    def lock(self, key: str) -> AbstractAsyncContextManager[None]:
        if self._locks is None:
            raise StorageError("database is closed")
        return self._locks(key)

    @property
    def contended_locks(self) -> int:
        """Lock acquisitions that waited for another process (for metrics and tests)."""
        return self._locks.contended if self._locks is not None else 0


async def migrate(conn: Connection, namespace: str) -> list[int]:
    """Apply the ``postgres_*.sql`` migrations not applied yet; return their versions.

    One transaction under an advisory transaction lock: replicas starting at
    once apply each migration exactly once, and the ones that waited find the
    work done. PostgreSQL DDL is transactional, so a failure applies nothing.
    """
    folder = resources.files("proxy.store") / "migrations"
    scripts = sorted(
        (int(p.name.split("_")[1]), p)
        for p in folder.iterdir()
        if p.name.startswith("postgres_") and p.name.endswith(".sql")
    )
    done: list[int] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", lock_id(namespace, "migrations"))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION)"
        )
        applied = {row[0] for row in await conn.fetch("SELECT version FROM schema_migrations")}
        for version, script in scripts:
            if version in applied:
                continue
            logger.info("applying PostgreSQL migration %s", script.name)
            # No arguments: the simple query protocol runs the whole script.
            await conn.execute(script.read_text())
            await conn.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)",
                version,
                time.time(),
            )
            done.append(version)
    newer = sorted(applied - {version for version, _ in scripts})
    if newer:
        logger.warning(
            "the database has migrations this proxy does not know (%s): a newer version ran here",
            ", ".join(map(str, newer)),
        )
    return done
