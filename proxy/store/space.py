"""The database's size on disk, and giving back the space deleted sessions held.

The one place with each backend's way of doing it:

- **SQLite** frees pages inside the file; ``PRAGMA incremental_vacuum`` in
  small steps (each a short write transaction, so a running server's writes
  wait milliseconds, not the length of a rewrite) returns them to the
  filesystem. A database made before incremental vacuum was switched on gets
  one full ``VACUUM`` that also switches it on.
- **PostgreSQL** keeps deleted rows as dead tuples until a vacuum; only then
  can new rows reuse their space. A plain ``VACUUM`` of the tables a prune
  deletes from does that at once (rather than whenever autovacuum gets to
  it) and gives back the empty pages at the end of each table and its TOAST
  table. It takes no lock that stops the proxies' reads and writes, so it is
  safe beside running replicas. ``VACUUM FULL``, which would rewrite the
  tables to their minimum size, is never run: it locks them against every
  replica for as long as the rewrite takes.

Neither may run inside a transaction, so both use a connection of their own.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3

import asyncpg

from proxy.errors import StorageError
from proxy.store.database import Database
from proxy.store.fts_file import index_path
from proxy.store.pglocks import DRIVER_ERRORS
from proxy.store.postgres import PostgresDatabase, redact
from proxy.store.sqlite import SqliteDatabase

__all__ = ["PRUNED_TABLES", "database_size", "reclaim_space"]

# What deleting a session deletes from (the rest by ON DELETE CASCADE).
PRUNED_TABLES = ("sessions", "messages", "session_state", "pending_turns", "idempotency")


async def database_size(db: Database) -> int:
    """Bytes on disk: the SQLite file and its WAL, or the whole PostgreSQL database."""
    if db.dialect == "sqlite":
        path = getattr(db, "path", ":memory:")
        if path != ":memory:":
            return await asyncio.to_thread(_file_bytes, path)
        row = await db.fetchone("PRAGMA page_count")
        size = await db.fetchone("PRAGMA page_size")
        return int(row[0]) * int(size[0]) if row and size else 0
    row = await db.fetchone("SELECT pg_database_size(current_database()) AS n")
    return int(row["n"]) if row else 0


async def reclaim_space(db: Database) -> str:
    """Make the space deleted rows held free again; say how, and how much went back."""
    if db.dialect == "postgresql":
        assert isinstance(db, PostgresDatabase)
        try:
            return await _reclaim_postgres(db.url)
        except DRIVER_ERRORS as exc:
            raise StorageError(
                f"could not vacuum {redact(db.url)} ({exc}); autovacuum will free the space"
            ) from exc
    path = getattr(db, "path", ":memory:")
    if path == ":memory:":
        return "in memory"
    try:
        if isinstance(db, SqliteDatabase):
            # The deleted messages leave the full-text indexes first.
            await db.index_pending()
        return await asyncio.to_thread(_reclaim_sqlite, path)
    except sqlite3.Error as exc:
        raise StorageError(
            f"could not reclaim space in {path} ({exc}); the freed pages will be reused"
        ) from exc


async def _reclaim_postgres(url: str) -> str:
    conn = await asyncpg.connect(url, timeout=10)
    try:
        sizes = "SELECT sum(pg_total_relation_size(t::regclass)) FROM unnest($1::text[]) AS t"
        before = await conn.fetchval(sizes, list(PRUNED_TABLES))
        # Outside a transaction (asyncpg runs a lone statement in autocommit).
        await conn.execute(f"VACUUM {', '.join(PRUNED_TABLES)}")
        after = await conn.fetchval(sizes, list(PRUNED_TABLES))
    finally:
        await conn.close()
    freed = max(0, int(before or 0) - int(after or 0))
    return f"vacuum, {freed / 1e6:.1f} MB freed (the rest is reused by new rows)"


def _file_bytes(path: str) -> int:
    """The SQLite database's size on disk: its file, its index file and their write-ahead logs."""
    files = (path, path + "-wal", index_path(path), index_path(path) + "-wal")
    return sum(os.path.getsize(p) for p in files if os.path.exists(p))


def _reclaim_sqlite(path: str) -> str:
    before = _file_bytes(path)
    how = _reclaim_file(path)
    if os.path.exists(index_path(path)):
        _reclaim_file(index_path(path))
    freed = max(0, before - _file_bytes(path))
    return f"{how}, {freed / 1e6:.1f} MB freed"


def _reclaim_file(path: str) -> str:
    conn = sqlite3.connect(path, isolation_level=None, timeout=10.0)
    try:
        conn.execute("PRAGMA busy_timeout=10000")
        if conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:
            how = "incremental vacuum"
            for _ in range(100_000):
                if not conn.execute("PRAGMA freelist_count").fetchone()[0]:
                    break
                # executescript steps the pragma to the end (execute frees one page).
                conn.executescript("PRAGMA incremental_vacuum(2000);")
        else:
            how = "vacuum (incremental vacuum is on from now on)"
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
            conn.execute("VACUUM")
        # The file shrinks when the WAL is checkpointed; best effort if readers are busy.
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return how
    finally:
        conn.close()
