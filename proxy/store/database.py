"""The seam between the store and a database driver.

:class:`~proxy.store.sql.SqlStore` speaks SQL with ``?`` placeholders through
this protocol; each backend (SQLite, PostgreSQL) supplies a driver that runs
it, serializes writes its own way and provides per-session locks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeVar

__all__ = ["Database", "Row", "Statement", "Tx"]

T = TypeVar("T")

Statement = tuple[str, Sequence[Any]]


class Row(Protocol):
    def __getitem__(self, key: str | int, /) -> Any: ...

    def keys(self) -> Any: ...


class Tx(Protocol):
    """A connection inside a write transaction."""

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        """Run one statement; return the number of rows it changed."""
        ...

    async def fetchall(self, sql: str, args: Sequence[Any] = ()) -> list[Row]: ...


class Database(Protocol):
    dialect: str

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def fetchall(self, sql: str, args: Sequence[Any] = ()) -> list[Row]: ...

    async def fetchone(self, sql: str, args: Sequence[Any] = ()) -> Row | None: ...

    async def write(
        self, statements: Sequence[Statement], *, urgent: bool = False
    ) -> list[list[Row]]:
        """Run the statements atomically, in order; return each one's rows.

        A batch is data, not code, so a driver can run it in one round trip
        (rows come from ``SELECT`` and ``RETURNING``). The turn path is built
        from batches. ``urgent``: a client is waiting on this write; a driver
        may trade throughput for latency.
        """
        ...

    async def transact(self, fn: Callable[[Tx], Awaitable[T]]) -> T:
        """Run ``fn`` inside one write transaction and return its result."""
        ...

    def lock(self, key: str) -> AbstractAsyncContextManager[None]:
        """Exclusive access to ``key`` (a session) for everything using this database."""
        ...
