"""Storage: one store over a database chosen by URL."""

from __future__ import annotations

from proxy.store.database import Database
from proxy.store.postgres import DEFAULT_POOL_SIZE, PostgresDatabase, is_postgres_url
from proxy.store.records import SessionRecord, TurnCommit, new_session_id
from proxy.store.sql import SqlStore
from proxy.store.sqlite import SqliteDatabase, sqlite_path

__all__ = [
    "Database",
    "SessionRecord",
    "SqlStore",
    "TurnCommit",
    "database_for",
    "is_postgres_url",
    "new_session_id",
    "open_store",
]


def database_for(url: str, *, pool_size: int = DEFAULT_POOL_SIZE) -> Database:
    """A driver for ``url``: ``postgresql://…``, ``sqlite:///…`` or a plain path.

    ``pool_size`` is the number of PostgreSQL connections (SQLite has its own two).
    """
    if is_postgres_url(url):
        return PostgresDatabase(url, pool_size=pool_size)
    return SqliteDatabase(sqlite_path(url))


async def open_store(url: str, *, pool_size: int = DEFAULT_POOL_SIZE) -> SqlStore:
    store = SqlStore(database_for(url, pool_size=pool_size))
    await store.open()
    return store
