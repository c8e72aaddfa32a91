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
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

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
    """A PostgreSQL server for tests: one database for the test session, a fresh
    schema in it for each test.

    Engineers share the server, so the database is named ``hermes_test_<random>``
    and dropped when the session ends. A schema costs milliseconds where a
    database costs a second (``CREATE DATABASE`` copies a template and
    ``DROP DATABASE`` removes its files). A test's URL points into its schema
    with ``search_path`` — the way a deployment puts the proxy in a schema of
    its own — and names its connections (``application_name``) after it, so
    they can be found and ended when the test is over.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.database: str | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def close(self) -> None:
        if self.database is not None:
            self.run(self._admin(self.url, f"DROP DATABASE IF EXISTS {self.database} WITH (FORCE)"))
            self.database = None
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

    def url_for(self, database: str, **settings: str) -> str:
        """The server's URL for ``database``, with server ``settings`` as query parameters."""
        return urlunsplit(
            urlsplit(self.url)._replace(path=f"/{database}", query=urlencode(settings))
        )

    async def _admin(self, url: str, sql: str) -> None:
        conn = await asyncpg.connect(url, timeout=10)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    def _session_database(self) -> str:
        if self.database is None:
            name = f"hermes_test_{secrets.token_hex(6)}"
            # template0: nobody is ever connected to it, so creation cannot be refused.
            self.run(self._admin(self.url, f"CREATE DATABASE {name} TEMPLATE template0"))
            self.database = name
        return self.database

    def create_schema(self) -> str:
        """A new, empty schema; returns the URL that works in it."""
        database = self._session_database()
        name = f"t_{secrets.token_hex(6)}"
        self.run(self._admin(self.url_for(database), f"CREATE SCHEMA {name}"))
        return self.url_for(database, search_path=name, application_name=name)

    def drop_schema(self, url: str) -> None:
        """End the connections ``url`` opened (a test may leave some) and drop its schema."""
        query = dict(parse_qsl(urlsplit(url).query))
        name = query["search_path"]
        self.run(
            self._admin(
                self.url_for(self._session_database()),
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE application_name = '{name}' AND pid <> pg_backend_pid();"
                f"DROP SCHEMA IF EXISTS {name} CASCADE",
            )
        )

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
