"""Storage: one store over a database chosen by URL."""

from __future__ import annotations

from proxy.store.database import Database
from proxy.store.records import SessionRecord, TurnCommit, new_session_id
from proxy.store.sql import SqlStore
from proxy.store.sqlite import SqliteDatabase, sqlite_path

__all__ = [
    "Database",
    "SessionRecord",
    "SqlStore",
    "TurnCommit",
    "database_for",
    "new_session_id",
    "open_store",
]


def database_for(url: str) -> Database:
    """A driver for ``url``: ``postgresql://…``, ``sqlite:///…`` or a plain path."""
    if url.startswith(("postgres://", "postgresql://")):
        raise ValueError("PostgreSQL support is not built yet; use SQLite")
    return SqliteDatabase(sqlite_path(url))


async def open_store(url: str) -> SqlStore:
    store = SqlStore(database_for(url))
    await store.open()
    return store
