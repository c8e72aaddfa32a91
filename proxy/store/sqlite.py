"""SQLite driver: WAL, one writer thread with group commit, one reader thread.

Each connection lives in a thread of its own and is handed whole jobs — a
batch of statements, or a function — so a turn's write is one thread hop,
not one per statement. Writes from every request go through one queue to the
writer (SQLite allows one writer at a time anyway); whatever is queued while
a transaction runs is committed together in the next one, each job under a
savepoint of its own so one failing job fails alone.

(aiosqlite, the usual choice, runs one *statement* per hop; a turn is two
batches of two to six statements, and under CPU contention every hop is a
GIL hand-off: profiled at ~100 µs each on this 2-core machine.)

An *urgent* batch — one a client is waiting on, like opening a turn — is
first tried right on the event loop when the writer thread is idle, on a
connection of its own that never waits: ``BEGIN IMMEDIATE`` with no busy
timeout either gets the write lock at once or fails (another process has it),
and then the batch goes through the queue like any other. While the writer
thread has a transaction in flight urgent batches queue too: racing it for
the lock would put one of the two to sleep in SQLite's busy handler.
That connection never checkpoints (``wal_autocheckpoint=0``; the writer
thread does), so an inline batch costs tens of microseconds, never a wait.

Neither does the writer: copying the WAL back into the database file (and
syncing it) took tens of milliseconds here, and every write queued behind it.
A checkpointer thread of its own runs passive checkpoints — which never block
readers or writers — every half second instead.

The full-text indexes are in a file of their own with a thread of their own
(see :mod:`proxy.store.fts_file`): indexing never holds this file's write lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from proxy.errors import StorageError
from proxy.locks import KeyedLock
from proxy.store.database import Row, Statement, Tx
from proxy.store.fts_file import INDEX_SCHEMA, index_batch, index_path
from proxy.store.fts_file import prepare as prepare_index

__all__ = ["SqliteDatabase", "connect", "migrate", "sqlite_path"]

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
CHECKPOINT_SECONDS = 0.5


def sqlite_path(url: str) -> str:
    """``sqlite:///abs/path``, ``sqlite:relative`` or a bare path → a filesystem path."""
    for prefix in ("sqlite:///", "sqlite://", "sqlite:"):
        if url.startswith(prefix):
            rest = url[len(prefix) :]
            return "/" + rest if prefix == "sqlite:///" and not rest.startswith("/") else rest
    return url


def connect(path: str) -> sqlite3.Connection:
    """A connection configured the way every hermes-proxy connection is."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    for pragma in PRAGMAS:
        conn.execute(pragma)
    return conn


class _ConnectionThread:
    """One connection, one thread; :meth:`run` hands it a function and awaits the result."""

    def __init__(
        self, path: str, name: str, setup: Callable[[sqlite3.Connection], object] | None = None
    ) -> None:
        self.path = path
        self._setup = setup
        self._jobs: queue.SimpleQueue[
            tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]] | None
        ] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._ready: asyncio.Future[None] | None = None
        self.conn: sqlite3.Connection | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._loop = loop
        self._thread.start()
        await self._ready

    def _serve(self) -> None:
        assert self._ready is not None
        try:
            self.conn = connect(self.path)
            if self._setup is not None:
                self._setup(self.conn)
        except BaseException as exc:
            self._loop.call_soon_threadsafe(_settle, self._ready, None, exc)
            return
        self._loop.call_soon_threadsafe(_settle, self._ready, None, None)
        while (job := self._jobs.get()) is not None:
            fn, future = job
            try:
                result, error = fn(self.conn), None
            except BaseException as exc:
                result, error = None, exc
            self._loop.call_soon_threadsafe(_settle, future, result, error)
        self.conn.close()

    def run(self, fn: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        future: asyncio.Future[T] = self._loop.create_future()
        self._jobs.put((fn, future))
        return future

    async def stop(self) -> None:
        self._jobs.put(None)
        await asyncio.to_thread(self._thread.join)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _execute_batch(conn: sqlite3.Connection, statements: Sequence[Statement]) -> list[list[Row]]:
    return [conn.execute(sql, args).fetchall() for sql, args in statements]


@dataclass
class _Batch:
    statements: Sequence[Statement]
    future: asyncio.Future[Any] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


@dataclass
class _Call:
    fn: Callable[[Tx], Awaitable[Any]]
    future: asyncio.Future[Any] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class _ThreadTx:
    """A :class:`Tx` whose statements run, one hop each, on the writer thread."""

    def __init__(self, writer: _ConnectionThread) -> None:
        self.writer = writer

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        cursor: sqlite3.Cursor = await self.writer.run(lambda conn: conn.execute(sql, args))
        return cursor.rowcount

    async def fetchall(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        return await self.writer.run(lambda conn: conn.execute(sql, args).fetchall())


class SqliteDatabase:
    dialect = "sqlite"

    def __init__(self, path: str) -> None:
        self.path = path
        self._writer: _ConnectionThread | None = None
        self._reader: _ConnectionThread | None = None
        self._inline: sqlite3.Connection | None = None
        self._queue: asyncio.Queue[_Batch | _Call | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        # True while the writer thread has a transaction in flight: an inline
        # write then goes through the queue instead of racing it for the lock
        # (the loser of that race would sleep in SQLite's busy handler).
        self._writing = False
        self._checkpointer: _ConnectionThread | None = None
        self._checkpoints: asyncio.Task[None] | None = None
        self._indexer: _ConnectionThread | None = None
        self._index_applied = self._index_trimmed = 0
        # Wall-clock time before the last batch that left nothing to index:
        # every write committed by then is in the indexes.
        self.indexed_through = 0.0
        self.lock: Callable[[str], AbstractAsyncContextManager[None]] = KeyedLock()
        self.transactions = 0  # committed, for metrics and tests

    async def open(self) -> None:
        if self.path != ":memory:":
            self.path = await asyncio.to_thread(_prepare_directory, self.path)
        try:
            self._writer = _ConnectionThread(self.path, "sqlite-writer")
            await self._writer.start()
            await self._writer.run(migrate)
            await self._writer.run(lambda conn: conn.execute("PRAGMA wal_autocheckpoint=0"))
            self._checkpointer = _ConnectionThread(self.path, "sqlite-checkpoint")
            await self._checkpointer.start()
            # The full-text indexes, in a file of their own (see fts_file).
            indexes = index_path(self.path)
            self._indexer = await self._open_indexes(indexes)
            self._reader = _ConnectionThread(
                self.path,
                "sqlite-reader",
                lambda conn: conn.execute(f"ATTACH DATABASE ? AS {INDEX_SCHEMA}", (indexes,)),
            )
            await self._reader.start()
            self._inline = connect(self.path)
            self._inline.execute("PRAGMA busy_timeout=0")
            self._inline.execute("PRAGMA wal_autocheckpoint=0")
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open SQLite database {self.path}: {exc}") from exc
        self._task = asyncio.create_task(self._run(), name="sqlite-writer")
        self._checkpoints = asyncio.create_task(self._checkpoint(), name="sqlite-checkpoint")

    async def _open_indexes(self, indexes: str) -> _ConnectionThread:
        def start() -> _ConnectionThread:
            return _ConnectionThread(
                indexes, "sqlite-index", lambda conn: prepare_index(conn, self.path)
            )

        thread = start()
        try:
            await thread.start()
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):
                raise  # locked, unreadable directory: nothing a rebuild would fix
            # Derived data: a damaged index file is replaced, not repaired.
            logger.warning("the index file %s is damaged (%s); rebuilding it", indexes, exc)
            await asyncio.to_thread(_remove_sqlite_file, indexes)
            thread = start()
            await thread.start()
        return thread

    async def _checkpoint(self, every: float = CHECKPOINT_SECONDS) -> None:
        assert self._checkpointer is not None
        while True:
            await asyncio.sleep(every)
            try:
                await self._checkpointer.run(
                    lambda conn: conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                )
            except sqlite3.Error:
                logger.warning("WAL checkpoint failed; retrying", exc_info=True)

    async def close(self) -> None:
        if self._checkpoints is not None:
            self._checkpoints.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._checkpoints
            self._checkpoints = None
        if self._task is not None:
            await self._queue.put(None)
            await self._task
            self._task = None
        if self._checkpointer is not None:
            # Leave the database file whole for whoever opens it next.
            with contextlib.suppress(sqlite3.Error):
                await self._checkpointer.run(
                    lambda conn: conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                )
        if self._indexer is not None:
            with contextlib.suppress(sqlite3.Error):
                await self._indexer.run(
                    lambda conn: conn.execute("PRAGMA main.wal_checkpoint(TRUNCATE)").fetchone()
                )
        for thread in (self._reader, self._writer, self._checkpointer, self._indexer):
            if thread is not None:
                await thread.stop()
        if self._inline is not None:
            self._inline.close()
        self._reader = self._writer = self._inline = self._checkpointer = self._indexer = None

    async def index_pending(self, limit: int | None = None) -> int:
        """Bring the full-text indexes up to date by ``limit`` (or all) logged changes.

        Runs on the index file's own thread and write lock; returns how many
        changes it applied. With no limit the log is trimmed too; after
        bounded batches, :meth:`trim_index_log` does that.
        """
        assert self._indexer is not None, "database is not open"
        started = time.time()
        try:
            count, applied = await self._indexer.run(lambda conn: index_batch(conn, limit))
        except sqlite3.Error as exc:
            raise StorageError(f"full-text indexing failed: {exc}") from exc
        self._index_applied = max(self._index_applied, applied)
        if limit is None or count < limit:
            self.indexed_through = max(self.indexed_through, started)
        if limit is None:
            await self.trim_index_log()
        return count

    async def trim_index_log(self) -> None:
        """Drop the log entries the indexes already hold (one small write)."""
        applied = self._index_applied
        if applied > self._index_trimmed:
            await self.write([("DELETE FROM fts_log WHERE entry <= ?", (applied,))])
            self._index_trimmed = applied

    async def fetchall(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        assert self._reader is not None, "database is not open"
        try:
            return await self._reader.run(lambda conn: conn.execute(sql, args).fetchall())
        except sqlite3.Error as exc:
            raise StorageError(f"database read failed: {exc}") from exc

    async def fetchone(self, sql: str, args: Sequence[Any] = ()) -> Row | None:
        rows = await self.fetchall(sql, args)
        return rows[0] if rows else None

    async def write(
        self, statements: Sequence[Statement], *, urgent: bool = False
    ) -> list[list[Row]]:
        if urgent and self._inline is not None and not self._writing and self._queue.empty():
            rows = self._write_inline(self._inline, statements)
            if rows is not None:
                return rows
        job = _Batch(statements)
        self._submit(job)
        result: list[list[Row]] = await job.future
        return result

    def _write_inline(
        self, conn: sqlite3.Connection, statements: Sequence[Statement]
    ) -> list[list[Row]] | None:
        """The batch, committed now; ``None`` if the write lock is taken."""
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return None  # busy: the writer thread (or another process) has the lock
        try:
            rows = _execute_batch(conn, statements)
            conn.execute("COMMIT")
        except Exception as exc:
            conn.execute("ROLLBACK")
            raise _storage_error(exc) from exc
        self.transactions += 1
        return rows

    async def transact(self, fn: Callable[[Tx], Awaitable[T]]) -> T:
        job = _Call(fn)
        self._submit(job)
        result: T = await job.future
        return result

    def _submit(self, job: _Batch | _Call) -> None:
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
            self._writing = True
            try:
                stop = await self._drain(job)
            finally:
                self._writing = False

    async def _drain(self, job: _Batch | _Call) -> bool:
        """Commit ``job`` and whatever queued behind it; True if asked to stop."""
        stop = False
        batches: list[_Batch] = []
        while True:
            if isinstance(job, _Call):
                if batches:
                    await self._commit_batches(batches)
                    batches = []
                await self._commit_call(job)
            else:
                batches.append(job)
            if len(batches) >= MAX_BATCH or self._queue.empty():
                break
            next_job = self._queue.get_nowait()
            if next_job is None:
                stop = True
                break
            job = next_job
        if batches:
            await self._commit_batches(batches)
        return stop

    async def _commit_batches(self, batches: list[_Batch]) -> None:
        """All the batches in one transaction and one thread hop."""
        assert self._writer is not None
        lists = [b.statements for b in batches]
        try:
            outcomes = await self._writer.run(lambda conn: _group_commit(conn, lists))
        except BaseException as exc:
            for batch in batches:
                _settle(batch.future, None, _storage_error(exc))
            raise
        self.transactions += 1
        for batch, (rows, error) in zip(batches, outcomes, strict=True):
            _settle(batch.future, rows, _storage_error(error) if error else None)

    async def _commit_call(self, call: _Call) -> None:
        assert self._writer is not None
        writer = self._writer
        try:
            await writer.run(lambda conn: conn.execute("BEGIN IMMEDIATE"))
            try:
                result = await call.fn(_ThreadTx(writer))
            except BaseException:
                await writer.run(lambda conn: conn.execute("ROLLBACK"))
                raise
            await writer.run(lambda conn: conn.execute("COMMIT"))
        except Exception as exc:
            _settle(call.future, None, _storage_error(exc))
            return
        self.transactions += 1
        _settle(call.future, result, None)


def _group_commit(
    conn: sqlite3.Connection, lists: list[Sequence[Statement]]
) -> list[tuple[list[list[Row]] | None, BaseException | None]]:
    """Run each list of statements under its own savepoint, all in one transaction."""
    outcomes: list[tuple[list[list[Row]] | None, BaseException | None]] = []
    try:
        conn.execute("BEGIN IMMEDIATE")
        if len(lists) == 1:
            outcomes.append((_execute_batch(conn, lists[0]), None))
        else:
            for statements in lists:
                conn.execute("SAVEPOINT job")
                try:
                    outcomes.append((_execute_batch(conn, statements), None))
                    conn.execute("RELEASE job")
                except Exception as exc:
                    conn.execute("ROLLBACK TO job")
                    conn.execute("RELEASE job")
                    outcomes.append((None, exc))
        conn.execute("COMMIT")
    except Exception as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        return [(None, exc) for _ in lists]
    return outcomes


def _remove_sqlite_file(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            Path(path + suffix).unlink()


def _prepare_directory(path: str) -> str:
    resolved = Path(path).expanduser()
    resolved.parent.mkdir(parents=True, exist_ok=True)
    return str(resolved)


def _storage_error(exc: BaseException) -> BaseException:
    if isinstance(exc, sqlite3.Error):
        return StorageError(f"database write failed: {exc}")
    return exc


def migrate(conn: sqlite3.Connection) -> None:
    """Apply the numbered ``sqlite_*.sql`` migrations not applied yet."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(version INTEGER PRIMARY KEY, applied_at REAL)"
    )
    applied = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
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
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Statements one by one: executescript would commit on its own.
            for statement in _split_sql(script.read_text()):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                (version, time.time()),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
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
