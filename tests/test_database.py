"""The driver contract (proxy/store/database.py), held by SQLite and PostgreSQL alike."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from proxy.errors import StorageError
from proxy.store import Database, database_for
from proxy.store.database import Tx

pytestmark = pytest.mark.anyio

TABLE = "CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)"


@pytest.fixture
async def db(db_url: str) -> AsyncIterator[Database]:
    database = database_for(db_url)
    await database.open()
    await database.write([(TABLE, ())])
    yield database
    await database.close()


async def value(db: Database, name: str = "a") -> int | None:
    row = await db.fetchone("SELECT value FROM counters WHERE name = ?", (name,))
    return None if row is None else int(row["value"])


async def test_write_is_atomic(db: Database) -> None:
    insert = "INSERT INTO counters (name, value) VALUES (?, ?)"
    with pytest.raises(StorageError):
        await db.write([(insert, ("a", 1)), (insert, ("b", 2)), (insert, ("a", 3))])
    assert await db.fetchall("SELECT * FROM counters") == []
    await db.write([(insert, ("a", 1)), (insert, ("b", 2)), ("UPDATE counters SET value = 7", ())])
    rows = await db.fetchall("SELECT * FROM counters ORDER BY name")
    assert [(r["name"], r["value"]) for r in rows] == [
        ("a", 7),
        ("b", 7),
    ]


async def test_transact_returns_its_value_and_row_counts(db: Database) -> None:
    async def fn(tx: Tx) -> list[int]:
        return [
            await tx.execute("INSERT INTO counters (name, value) VALUES (?, ?)", ("a", 1)),
            await tx.execute("INSERT INTO counters (name, value) VALUES (?, ?)", ("b", 1)),
            await tx.execute("UPDATE counters SET value = value + ?", (1,)),
            await tx.execute("DELETE FROM counters WHERE name = ?", ("nobody",)),
            await tx.execute(
                "INSERT INTO counters (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                ("a", 5),
            ),
            len(await tx.fetchall("SELECT name FROM counters")),
        ]

    assert await db.transact(fn) == [1, 1, 2, 0, 0, 2]


async def test_transact_rolls_back_when_fn_fails(db: Database) -> None:
    async def fn(tx: Tx) -> None:
        await tx.execute("INSERT INTO counters (name, value) VALUES (?, ?)", ("a", 1))
        raise ValueError("changed my mind")

    with pytest.raises(ValueError, match="changed my mind"):
        await db.transact(fn)
    assert await value(db) is None


async def test_read_modify_write_in_transact_loses_no_update(db: Database) -> None:
    await db.write([("INSERT INTO counters (name, value) VALUES ('a', 0)", ())])

    async def increment(tx: Tx) -> None:
        rows = await tx.fetchall("SELECT value FROM counters WHERE name = 'a'")
        await tx.execute("UPDATE counters SET value = ? WHERE name = 'a'", (rows[0][0] + 1,))

    await asyncio.gather(*(db.transact(increment) for _ in range(40)))
    assert await value(db) == 40


async def test_lock_is_exclusive_and_first_come_first_served(db: Database) -> None:
    events: list[tuple[str, int]] = []

    async def turn(i: int) -> None:
        async with db.lock("session-1"):
            events.append(("in", i))
            await asyncio.sleep(0.002)
            events.append(("out", i))

    tasks = []
    for i in range(10):
        tasks.append(asyncio.create_task(turn(i)))
        await asyncio.sleep(0)  # arrival order is creation order
    await asyncio.gather(*tasks)
    assert events == [(kind, i) for i in range(10) for kind in ("in", "out")]
    # Other keys are not held up.
    async with db.lock("session-1"), db.lock("session-2"):
        pass


async def test_a_cancelled_caller_does_not_cut_a_write_short(db: Database) -> None:
    insert = "INSERT INTO counters (name, value) VALUES (?, ?)"
    task = asyncio.create_task(db.write([(insert, (f"n{i}", i)) for i in range(200)]))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(200):
        rows = await db.fetchall("SELECT count(*) FROM counters")
        if rows[0][0] == 200:
            break
        await asyncio.sleep(0.01)
    assert rows[0][0] == 200


async def test_database_errors_are_storage_errors(db: Database) -> None:
    with pytest.raises(StorageError):
        await db.fetchall("SELECT nope FROM counters")
    with pytest.raises(StorageError):
        await db.write([("INSERT INTO nowhere VALUES (?)", (1,))])

    async def fn(tx: Tx) -> None:
        await tx.execute("UPDATE nowhere SET x = 1")

    with pytest.raises(StorageError):
        await db.transact(fn)


async def test_question_marks_in_literals_are_not_placeholders(db: Database) -> None:
    await db.write([("INSERT INTO counters (name, value) VALUES ('what?', ?)", (3,))])
    row = await db.fetchone(
        "SELECT name, value FROM counters WHERE name = 'what?' AND value = ?", (3,)
    )
    assert row is not None and row["name"] == "what?"
