"""Databases for tests: a fresh PostgreSQL database per test, and one way to look inside.

Tests read what the proxy stored through :class:`DbConnection`, which both
backends provide with the same calls and ``?`` placeholders::

    with proxy.db() as conn:
        row = conn.execute("SELECT count(*) FROM messages WHERE role = ?", ("user",)).fetchone()
        assert row[0] == 2

Rows answer ``row["column"]`` and ``row[0]`` on both (``sqlite3.Row``,
``asyncpg.Record``). On SQLite the connection is a real ``sqlite3``
connection; on PostgreSQL it is a small synchronous wrapper over asyncpg
running on a loop of its own, in autocommit mode.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Coroutine, Iterable, Sequence
from types import TracebackType
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from proxy.store.postgres import placeholders

__all__ = ["DEFAULT_SERVER", "DbConnection", "PgConnection", "PostgresServer"]

T = TypeVar("T")

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/test"


class Rows(Protocol):
    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class DbConnection(Protocol):
    """What ``Proxy.db()`` returns on either backend (a subset of ``sqlite3.Connection``)."""

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Rows: ...

    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /) -> object: ...

    def commit(self) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> DbConnection: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> bool | None: ...


class _Result:
    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[Any]:
        return self.rows


class PostgresServer:
    """A PostgreSQL server for tests; creates and drops uniquely named databases on it.

    Engineers share the server, so every database is named
    ``hermes_test_<random>`` and dropped when its test ends.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def problem(self) -> str | None:
        """Why the server cannot be used, or None if it can."""

        async def probe() -> None:
            conn = await asyncpg.connect(self.url, timeout=5)
            await conn.close()

        try:
            self.run(probe(), timeout=10)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    def url_for(self, database: str) -> str:
        return urlunsplit(urlsplit(self.url)._replace(path=f"/{database}"))

    async def _admin(self, sql: str) -> None:
        conn = await asyncpg.connect(self.url, timeout=10)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    def create_database(self) -> str:
        name = f"hermes_test_{secrets.token_hex(6)}"
        # template0: nobody is ever connected to it, so creation cannot be refused.
        self.run(self._admin(f"CREATE DATABASE {name} TEMPLATE template0"))
        return name

    def drop_database(self, name: str) -> None:
        self.run(self._admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))

    def connect(self, url: str) -> PgConnection:
        return PgConnection(self, self.run(asyncpg.connect(url)))


class PgConnection:
    """A synchronous, autocommit view of one asyncpg connection, for test assertions."""

    def __init__(self, server: PostgresServer, conn: asyncpg.Connection) -> None:
        self.server = server
        self.conn = conn

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> _Result:
        rows = self.server.run(self.conn.fetch(placeholders(sql), *parameters))
        return _Result(list(rows))

    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /) -> None:
        self.server.run(self.conn.executemany(placeholders(sql), list(seq_of_parameters)))

    def commit(self) -> None:
        """Every statement has committed already."""

    def close(self) -> None:
        if not self.conn.is_closed():
            self.server.run(self.conn.close())

    def __enter__(self) -> PgConnection:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> None:
        self.close()
