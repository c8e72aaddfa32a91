"""SQLite's batched full-text indexing: nothing missed, nothing corrupted."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from compaction import Message
from proxy.store import SqlStore, TurnCommit, fts_file, open_store
from proxy.store.fts_file import index_path
from proxy.store.sqlite import SqliteDatabase, connect, migrate
from tests.conftest import Proxy


async def store_turn(store: SqlStore, key: str, text: str) -> str:
    opened = await store.open_turn("default", key, [{"role": "user", "content": text}])
    assert opened.pending_id is not None
    seq = opened.record.last_seq
    await store.commit_turn(
        TurnCommit(
            session_id=opened.record.id,
            pending_id=opened.pending_id,
            messages=[
                Message("user", text, tokens=5, seq=seq + 1, turn=1),
                Message("assistant", f"noted: {text}", tokens=5, seq=seq + 2, turn=1),
            ],
            system=None,
            model=None,
            input_tokens=0,
            output_tokens=0,
            updated_at=time.time(),
        )
    )
    return opened.record.id


async def count(store: SqlStore, sql: str) -> int:
    row = await store.db.fetchone(sql)
    assert row is not None
    return int(row[0])


async def index_counts(store: SqlStore, word: str) -> tuple[int, int]:
    """How many messages the search and the recall index hold for ``word``."""
    search = await count(
        store, f"SELECT COUNT(*) FROM fts.messages_fts WHERE messages_fts MATCH '{word}'"
    )
    recall = await count(
        store, f"SELECT COUNT(*) FROM fts.recall_fts WHERE recall_fts MATCH '{word}'"
    )
    return search, recall


@contextlib.asynccontextmanager
async def opened(path: str) -> AsyncIterator[SqlStore]:
    store = await open_store(path)
    try:
        yield store
    finally:
        await store.close()


def remove(path: str) -> None:
    """An SQLite file and what SQLite keeps beside it."""
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path + suffix)


def check_integrity(store: SqlStore) -> None:
    """FTS5's own check: raises if an index disagrees with what it was given."""
    assert isinstance(store.db, SqliteDatabase)
    with contextlib.closing(sqlite3.connect(index_path(store.db.path))) as conn:
        for table in ("messages_fts", "recall_fts"):
            conn.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")


@pytest.mark.anyio
async def test_logged_changes_reach_the_index_file_in_order_and_once(tmp_path: Path) -> None:
    path = tmp_path / "fts.db"
    async with opened(str(path)) as store:
        assert await asyncio.to_thread(os.path.exists, index_path(str(path)))
        kept = await store_turn(store, "a", "the quokka deployment")
        gone = await store_turn(store, "b", "the wombat deployment")
        assert await count(store, "SELECT COUNT(*) FROM fts_log") == 4
        # Deleted before it was ever indexed: its additions and removals replay in order.
        await store.db.write([("DELETE FROM sessions WHERE id = ?", (gone,))])
        assert await count(store, "SELECT COUNT(*) FROM fts_log") == 6
        assert await index_counts(store, "deployment") == (0, 0)
        assert await store.index_pending(4) == 4  # a bounded batch
        assert await index_counts(store, "deployment") == (4, 4)  # questions and answers
        assert await store.index_pending() == 2
        assert await index_counts(store, "deployment") == (2, 2)
        assert await count(store, "SELECT COUNT(*) FROM fts_log") == 0  # trimmed
        assert await store.index_pending() == 0
        # Deleting indexed messages removes them from both indexes.
        await store.db.write([("DELETE FROM sessions WHERE id = ?", (kept,))])
        assert await index_counts(store, "quokka") == (2, 2)  # until the next batch
        assert await store.index_pending() == 2
        assert await index_counts(store, "quokka") == (0, 0)
        check_integrity(store)


@pytest.mark.anyio
async def test_two_processes_indexing_one_database_apply_each_change_once(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "fts.db")
    async with opened(path) as first, opened(path) as second:
        for i in range(20):
            await store_turn(first if i % 2 else second, f"s{i}", f"numbat number {i}")
        # Both race through the log in small batches, as two servers' indexers would.
        applied = await asyncio.gather(
            *(store.index_pending(3) for _ in range(10) for store in (first, second))
        )
        assert sum(applied) == 40  # 20 turns, two messages each, none applied twice
        assert await index_counts(first, "numbat") == (40, 40)
        check_integrity(first)


@pytest.mark.anyio
async def test_a_missing_index_file_is_rebuilt_from_the_messages(tmp_path: Path) -> None:
    path = str(tmp_path / "fts.db")
    async with opened(path) as store:
        await store_turn(store, "a", "an okapi in the garden")
        await store.index_pending()
        await store_turn(store, "b", "an okapi on the roof")  # logged, not yet indexed
    await asyncio.to_thread(remove, index_path(path))
    async with opened(path) as store:
        assert await index_counts(store, "okapi") == (4, 4)  # two questions, two answers
        assert await store.index_pending() == 0  # the rebuild covered the log too
        result = await store.search_sessions("default", "okapi")
        assert sorted(hit.session.key for hit in result.sessions) == ["a", "b"]
        check_integrity(store)


@pytest.mark.anyio
async def test_a_damaged_index_file_is_replaced(tmp_path: Path) -> None:
    path = str(tmp_path / "fts.db")
    async with opened(path) as store:
        await store_turn(store, "a", "a gecko on the wall")
    await asyncio.to_thread(remove, index_path(path))
    await asyncio.to_thread(Path(index_path(path)).write_bytes, b"not a database, " * 512)
    async with opened(path) as store:
        assert await index_counts(store, "gecko") == (2, 2)
        check_integrity(store)


@pytest.mark.anyio
async def test_an_index_file_left_by_another_database_is_not_trusted(tmp_path: Path) -> None:
    path = str(tmp_path / "fts.db")
    async with opened(path) as store:
        for i in range(3):
            await store_turn(store, f"old{i}", "a pangolin of the old database")
        await store.index_pending()
    await asyncio.to_thread(remove, path)  # the index file stays behind
    async with opened(path) as store:
        await store_turn(store, "new", "a tapir of the new database")
        await store.index_pending()
        assert await index_counts(store, "pangolin") == (0, 0)
        assert await index_counts(store, "tapir") == (2, 2)
        check_integrity(store)


def test_an_index_batch_leaves_the_database_free_for_turns(tmp_path: Path) -> None:
    path = str(tmp_path / "fts.db")
    with contextlib.closing(connect(path)) as setup:
        migrate(setup)
    with contextlib.closing(connect(index_path(path))) as indexer:
        fts_file.prepare(indexer, path)
        fts_file.begin_batch(indexer)  # what index_batch holds while it runs
        indexer.execute("SELECT COUNT(*) FROM state.fts_log").fetchone()
        with contextlib.closing(connect(path)) as turn:
            turn.execute("PRAGMA busy_timeout=0")
            turn.execute("BEGIN IMMEDIATE")  # would raise "database is locked"
            turn.execute("ROLLBACK")
        indexer.execute("ROLLBACK")


@pytest.mark.anyio
async def test_search_sees_a_message_stored_a_moment_ago(tmp_path: Path) -> None:
    async with opened(str(tmp_path / "fts.db")) as store:
        await store_turn(store, "fresh", "a capybara appeared")
        result = await store.search_sessions("default", "capybara")
        assert [hit.session.key for hit in result.sessions] == ["fresh"]


@pytest.mark.parametrize("backend", ["sqlite"])  # PostgreSQL indexes in the row itself
def test_the_server_indexes_new_messages_in_the_background(proxy: Proxy) -> None:
    proxy.client().chat.completions.create(
        model="hermes",
        messages=[{"role": "user", "content": "remember the axolotl"}],
        extra_headers={"X-Hermes-Session-Id": "bg"},
    )
    proxy.settle()
    deadline = time.monotonic() + 5
    while True:
        with proxy.db() as conn:
            pending = conn.execute("SELECT COUNT(*) FROM fts_log").fetchone()[0]
            hits = conn.execute(
                "SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'axolotl'"
            ).fetchone()[0]
        if pending == 0:
            break
        assert time.monotonic() < deadline, "the indexer did not run"
        time.sleep(0.05)
    assert hits == 2
