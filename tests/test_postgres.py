"""What only the PostgreSQL driver does: locks and migrations shared by many processes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from importlib import resources

import asyncpg
import pytest

from proxy.errors import StorageError
from proxy.store.database import Tx
from proxy.store.pglocks import lock_id
from proxy.store.postgres import PostgresDatabase, placeholders, redact
from tests.servers import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


@pytest.fixture
def backend() -> str:
    return "postgresql"


@pytest.fixture
async def replicas(db_url: str) -> AsyncIterator[list[PostgresDatabase]]:
    """Two drivers on one database, as two proxy processes would have."""
    dbs = [PostgresDatabase(db_url, pool_size=4) for _ in range(2)]
    for db in dbs:
        await db.open()
    yield dbs
    for db in dbs:
        await db.close()


def test_placeholders() -> None:
    assert placeholders("SELECT ? , ?") == "SELECT $1 , $2"
    sql = "SELECT '?', \"a?\", 'it''s ?' -- why?\n, /* ? */ ? FROM t WHERE x = ?"
    expected = "SELECT '?', \"a?\", 'it''s ?' -- why?\n, /* ? */ $1 FROM t WHERE x = $2"
    assert placeholders(sql) == expected


def test_redact() -> None:
    assert redact("postgresql://u:secret@db:5432/x") == "postgresql://u:***@db:5432/x"
    assert redact("postgresql://u@db/x") == "postgresql://u@db/x"


def test_lock_ids_are_64_bit_and_namespaced() -> None:
    ids = {lock_id(ns, key) for ns in ("db.public", "db.other") for key in ("a", "b")}
    assert len(ids) == 4
    assert all(-(2**63) <= i < 2**63 for i in ids)


async def test_a_lock_holds_across_processes(replicas: list[PostgresDatabase]) -> None:
    inside: list[int] = []
    overlaps = 0

    async def turn(db: PostgresDatabase, i: int) -> None:
        nonlocal overlaps
        async with db.lock("session\x00default\x00shared"):
            inside.append(i)
            if len(inside) > 1:
                overlaps += 1
            await asyncio.sleep(0.003)
            inside.remove(i)

    await asyncio.gather(*(turn(replicas[i % 2], i) for i in range(30)))
    assert overlaps == 0
    # They did compete across "processes", not just queue locally.
    assert sum(db.contended_locks for db in replicas) > 0


async def test_a_cancelled_waiter_leaves_no_lock_behind(replicas: list[PostgresDatabase]) -> None:
    a, b = replicas
    held = asyncio.Event()
    release = asyncio.Event()

    async def holder() -> None:
        async with a.lock("k"):
            held.set()
            await release.wait()

    holding = asyncio.create_task(holder())
    await held.wait()
    waiting = asyncio.create_task(b.lock("k").__aenter__())
    await asyncio.sleep(0.2)  # queued in PostgreSQL by now
    assert not waiting.done()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    release.set()
    await holding
    async with asyncio.timeout(5), b.lock("k"), a.lock("other"):
        pass


async def test_a_cancelled_holder_releases(replicas: list[PostgresDatabase]) -> None:
    a, b = replicas
    held = asyncio.Event()

    async def holder() -> None:
        async with a.lock("k"):
            held.set()
            await asyncio.sleep(60)

    task = asyncio.create_task(holder())
    await held.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with asyncio.timeout(5), b.lock("k"):
        pass


async def test_locks_survive_a_lost_holder_connection(
    replicas: list[PostgresDatabase], db_url: str
) -> None:
    a, b = replicas
    async with a.lock("k"):
        pass
    admin = await asyncpg.connect(db_url)
    try:
        # Kill every connection of this test but ours: the lock holders included.
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND application_name = current_setting('application_name')"
        )
    finally:
        await admin.close()
    for _ in range(3):
        try:
            async with a.lock("k"):
                break
        except StorageError:
            continue  # the first use of a dead connection may fail; the next reconnects
    async with asyncio.timeout(5), b.lock("k"), a.lock("j"):
        assert await a.fetchone("SELECT 1") is not None


async def test_serializable_transact_across_processes(replicas: list[PostgresDatabase]) -> None:
    a, b = replicas
    await a.write([("CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER)", ())])
    await a.write([("INSERT INTO counters VALUES ('x', 0)", ())])

    async def increment(tx: Tx) -> None:
        rows = await tx.fetchall("SELECT value FROM counters WHERE name = 'x'")
        await tx.execute("UPDATE counters SET value = ? WHERE name = 'x'", (rows[0][0] + 1,))

    await asyncio.gather(*(db.transact(increment) for db in [a, b] * 20))
    row = await a.fetchone("SELECT value FROM counters")
    assert row is not None and row[0] == 40


async def test_replicas_starting_at_once_migrate_once(db_url: str) -> None:
    dbs = [PostgresDatabase(db_url, pool_size=2) for _ in range(4)]
    await asyncio.gather(*(db.open() for db in dbs))
    try:
        rows = await dbs[0].fetchall("SELECT version FROM schema_migrations ORDER BY version")
        folder = resources.files("proxy.store") / "migrations"
        versions = sorted(
            int(p.name.split("_")[1]) for p in folder.iterdir() if p.name.startswith("postgres_")
        )
        assert [r[0] for r in rows] == versions  # each applied exactly once
        assert await dbs[1].fetchall("SELECT * FROM sessions") == []
    finally:
        for db in dbs:
            await db.close()


async def test_an_unreachable_server_is_a_storage_error_without_the_password() -> None:
    db = PostgresDatabase(f"postgresql://u:hunter2@127.0.0.1:{free_port()}/x")
    with pytest.raises(StorageError) as caught:
        await db.open()
    assert "cannot open PostgreSQL database" in str(caught.value)
    assert "hunter2" not in str(caught.value)


async def test_a_batch_returns_each_statements_rows(replicas: list[PostgresDatabase]) -> None:
    """Ready for a write() that returns rows (SELECT, RETURNING) per statement."""
    db = replicas[0]
    await db.write([("CREATE TABLE t (id BIGINT GENERATED BY DEFAULT AS IDENTITY, x TEXT)", ())])
    insert = "INSERT INTO t (x) VALUES (?)"
    results = await db._write(
        [
            (insert + " RETURNING id", ("a",)),
            (insert, ("b",)),
            (insert, ("c",)),
            ("SELECT x FROM t ORDER BY id", ()),
        ]
    )
    assert [[dict(r) for r in rows] for rows in results] == [
        [{"id": 1}],
        [],
        [],
        [{"x": "a"}, {"x": "b"}, {"x": "c"}],
    ]
