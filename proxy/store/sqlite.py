"""SQLite driver: WAL, one writer with group commit, a separate reader.

Writes from every request go through one queue to one connection (SQLite
allows one writer at a time anyway). Whatever is queued while a transaction
runs is committed together in the next one, and same-shaped jobs (the same
statements, other values) run as one ``executemany`` each: under load a
hundred turn commits cost about as many thread hops as one. Each job keeps
its own savepoint, so one failing job fails alone.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from proxy.errors import StorageError
from proxy.locks import KeyedLock
from proxy.store.database import Row, Statement, Tx

__all__ = ["SqliteDatabase", "sqlite_path"]

logger = logging.getLogger("hermes.store")
T = TypeVar("T")

PRAGMAS = (
    # Before the first table exists, so a new database can hand pages freed by
    # pruning back to the filesystem (incremental vacuum); a no-op otherwise.
    "PRAGMA auto_vacuum=INCREMENTAL",
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=10000",
    "PRAGMA temp_store=MEMORY",
)
MAX_BATCH = 512


def sqlite_path(url: str) -> str:
    """``sqlite:///abs/path``, ``sqlite:relative`` or a bare path → a filesystem path."""
    for prefix in ("sqlite:///", "sqlite://", "sqlite:"):
        if url.startswith(prefix):
            rest = url[len(prefix) :]
            return "/" + rest if prefix == "sqlite:///" and not rest.startswith("/") else rest
    return url


@dataclass
class _Batch:
    statements: Sequence[Statement]
    future: asyncio.Future[Any] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    @property
    def shape(self) -> tuple[str, ...]:
        return tuple(sql for sql, _ in self.statements)


@dataclass
class _Call:
    fn: Callable[[Tx], Awaitable[Any]]
    future: asyncio.Future[Any] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class _WriterTx:
    def __init__(self, conn: aiosqlite.Connection) -> None:
        self.conn = conn

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        cursor = await self.conn.execute(sql, args)
        return cursor.rowcount

    async def fetchall(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        return list(await self.conn.execute_fetchall(sql, args))


class SqliteDatabase:
    dialect = "sqlite"

    def __init__(self, path: str) -> None:
        self.path = path
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._queue: asyncio.Queue[_Batch | _Call | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self.lock: Callable[[str], AbstractAsyncContextManager[None]] = KeyedLock()
        self.batches = 0  # transactions committed, for metrics and tests

    async def open(self) -> None:
        if self.path != ":memory:":
            self.path = _prepare_directory(self.path)
        try:
            self._writer = await self._connect()
            await migrate(self._writer)
            self._reader = await self._connect()
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open SQLite database {self.path}: {exc}") from exc
        self._task = asyncio.create_task(self._run(), name="sqlite-writer")

    async def _connect(self) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(self.path, isolation_level=None)
        conn.row_factory = sqlite3.Row
        for pragma in PRAGMAS:
            await conn.execute(pragma)
        return conn

    async def close(self) -> None:
        if self._task is not None:
            await self._queue.put(None)
            await self._task
            self._task = None
        for conn in (self._reader, self._writer):
            if conn is not None:
                await conn.close()
        self._reader = self._writer = None

    async def fetchall(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        assert self._reader is not None, "database is not open"
        try:
            return list(await self._reader.execute_fetchall(sql, args))
        except sqlite3.Error as exc:
            raise StorageError(f"database read failed: {exc}") from exc

    async def fetchone(self, sql: str, args: Sequence[Any] = ()) -> Row | None:
        rows = await self.fetchall(sql, args)
        return rows[0] if rows else None

    async def write(self, statements: Sequence[Statement]) -> None:
        job = _Batch(statements)
        await self._submit(job)
        await job.future

    async def transact(self, fn: Callable[[Tx], Awaitable[T]]) -> T:
        job = _Call(fn)
        await self._submit(job)
        result: T = await job.future
        return result

    async def _submit(self, job: _Batch | _Call) -> None:
        if self._task is None or self._task.done():
            raise StorageError("database is closed")
        # The writer finishes a job even if its submitter is cancelled:
        # a write is never left half-done.
        self._queue.put_nowait(job)

    async def _run(self) -> None:
        stop = False
        while not stop:
            job = await self._queue.get()
            if job is None:
                break
            jobs = [job]
            while len(jobs) < MAX_BATCH and not self._queue.empty():
                nxt = self._queue.get_nowait()
                if nxt is None:
                    stop = True
                    break
                jobs.append(nxt)
            await self._commit(jobs)

    async def _commit(self, jobs: list[_Batch | _Call]) -> None:
        conn = self._writer
        assert conn is not None
        results: dict[int, Any] = {}
        failures: dict[int, BaseException] = {}
        try:
            await conn.execute("BEGIN IMMEDIATE")
            if len(jobs) == 1:
                results[0] = await self._run_job(conn, jobs[0])
            else:
                await self._run_grouped(conn, jobs, results, failures)
            await conn.execute("COMMIT")
        except Exception as exc:
            if conn.in_transaction:
                await conn.execute("ROLLBACK")
            error = _storage_error(exc)
            for i in range(len(jobs)):
                failures.setdefault(i, error)
            results.clear()
        self.batches += 1
        for i, job in enumerate(jobs):
            if job.future.done():
                continue
            if i in failures:
                job.future.set_exception(failures[i])
            else:
                job.future.set_result(results.get(i))

    async def _run_grouped(
        self,
        conn: aiosqlite.Connection,
        jobs: list[_Batch | _Call],
        results: dict[int, Any],
        failures: dict[int, BaseException],
    ) -> None:
        groups: dict[tuple[str, ...], list[int]] = {}
        calls: list[int] = []
        for i, job in enumerate(jobs):
            if isinstance(job, _Batch):
                groups.setdefault(job.shape, []).append(i)
            else:
                calls.append(i)
        for shape, members in groups.items():
            if len(members) > 1:
                await conn.execute("SAVEPOINT grouped")
                try:
                    for position, sql in enumerate(shape):
                        rows = [jobs[i].statements[position][1] for i in members]  # type: ignore[union-attr]
                        await conn.executemany(sql, rows)
                    await conn.execute("RELEASE grouped")
                    continue
                except sqlite3.Error:
                    # Someone in the group fails: redo them one by one, below.
                    await conn.execute("ROLLBACK TO grouped")
                    await conn.execute("RELEASE grouped")
            calls.extend(members)
        for i in sorted(calls):
            await conn.execute("SAVEPOINT job")
            try:
                results[i] = await self._run_job(conn, jobs[i])
                await conn.execute("RELEASE job")
            except Exception as exc:
                await conn.execute("ROLLBACK TO job")
                await conn.execute("RELEASE job")
                failures[i] = _storage_error(exc)

    @staticmethod
    async def _run_job(conn: aiosqlite.Connection, job: _Batch | _Call) -> Any:
        if isinstance(job, _Batch):
            for sql, args in job.statements:
                await conn.execute(sql, args)
            return None
        return await job.fn(_WriterTx(conn))


def _prepare_directory(path: str) -> str:
    resolved = Path(path).expanduser()
    resolved.parent.mkdir(parents=True, exist_ok=True)
    return str(resolved)


def _storage_error(exc: BaseException) -> BaseException:
    if isinstance(exc, sqlite3.Error):
        return StorageError(f"database write failed: {exc}")
    return exc


async def migrate(conn: aiosqlite.Connection) -> None:
    """Apply the numbered ``sqlite_*.sql`` migrations not applied yet."""
    await conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(version INTEGER PRIMARY KEY, applied_at REAL)"
    )
    applied = {
        row[0] for row in await conn.execute_fetchall("SELECT version FROM schema_migrations")
    }
    folder = resources.files("proxy.store") / "migrations"
    scripts = sorted(
        (int(p.name.split("_")[1]), p)
        for p in folder.iterdir()
        if p.name.startswith("sqlite_") and p.name.endswith(".sql")
    )
    for version, script in scripts:
        if version in applied:
            continue
        logger.info("applying SQLite migration %s", script.name)
        await conn.execute("BEGIN IMMEDIATE")
        try:
            # Statements one by one: executescript would commit on its own.
            for statement in _split_sql(script.read_text()):
                await conn.execute(statement)
            await conn.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                (version, time.time()),
            )
            await conn.execute("COMMIT")
        except BaseException:
            await conn.execute("ROLLBACK")
            raise


def _split_sql(script: str) -> list[str]:
    """Split a script into statements, keeping ``BEGIN … END;`` trigger bodies whole."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        if line.strip().startswith("--") and not current.strip():
            continue
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip():
        statements.append(current.strip())
    return statements
