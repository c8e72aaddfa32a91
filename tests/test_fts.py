"""SQLite's batched full-text indexing: nothing missed, nothing corrupted."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from compaction import Message
from proxy.store import SqlStore, TurnCommit, open_store
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


@pytest.mark.anyio
async def test_pending_rows_are_indexed_in_one_batch_and_deletes_stay_consistent(
    tmp_path: Path,
) -> None:
    store = await open_store(str(tmp_path / "fts.db"))
    try:
        kept = await store_turn(store, "a", "the quokka deployment")
        gone = await store_turn(store, "b", "the wombat deployment")
        assert await count(store, "SELECT COUNT(*) FROM fts_pending") == 4
        # Deleting a session whose messages were never indexed must not touch the index.
        await store.db.write([("DELETE FROM sessions WHERE id = ?", (gone,))])
        assert await store.index_pending() == 2
        assert await count(store, "SELECT COUNT(*) FROM fts_pending") == 0
        hits = await store.db.fetchall(
            "SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'deployment'"
        )
        assert len(hits) == 2
        # Deleting indexed messages removes them from the index.
        await store.db.write([("DELETE FROM sessions WHERE id = ?", (kept,))])
        assert (
            await store.db.fetchall(
                "SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'quokka'"
            )
            == []
        )
        await store.db.write(
            [("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')", ())]
        )
    finally:
        await store.close()


@pytest.mark.anyio
async def test_search_sees_a_message_stored_a_moment_ago(tmp_path: Path) -> None:
    store = await open_store(str(tmp_path / "fts.db"))
    try:
        await store_turn(store, "fresh", "a capybara appeared")
        result = await store.search_sessions("default", "capybara")
        assert [hit.session.key for hit in result.sessions] == ["fresh"]
    finally:
        await store.close()


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
            pending = conn.execute("SELECT COUNT(*) FROM fts_pending").fetchone()[0]
            hits = conn.execute(
                "SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'axolotl'"
            ).fetchone()[0]
        if pending == 0:
            break
        assert time.monotonic() < deadline, "the indexer did not run"
        time.sleep(0.05)
    assert hits == 2
