"""Run leases: a run is executed by one process at a time, also after its executor crashed."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

import proxy.run_worker
from proxy.run_step import StepRunner
from proxy.store import SqlStore, open_store
from proxy.store.runs import RunRecord, RunTx
from tests.conftest import ProxyFactory
from tests.fake_upstream import FakeUpstream, Reply

CRASHED = "crashed-replica"


@pytest.fixture
async def replicas(db_url: str) -> AsyncIterator[list[SqlStore]]:
    """Two stores on one database, as two processes would have."""
    stores = [await open_store(db_url) for _ in range(2)]
    yield stores
    for store in stores:
        await store.close()


async def running_runs(store: SqlStore, count: int) -> list[str]:
    """``count`` running runs, each on a thread of its own, nobody's lease on them."""
    ids = []
    for i in range(count):
        await store.insert_thread("default", f"thread-{i}", None, {}, time.time())

        async def create(t: RunTx) -> RunRecord:
            return await t.create_run({})

        ids.append((await store.change("default", f"thread-{i}", create)).id)
    return ids


async def lease(store: SqlStore, run_id: str, owner: str | None, until: float | None) -> None:
    await store.db.write(
        [("UPDATE runs SET lease_owner = ?, lease_until = ? WHERE id = ?", (owner, until, run_id))]
    )


async def owner_of(store: SqlStore, run_id: str) -> Any:
    row = await store.db.fetchone("SELECT lease_owner FROM runs WHERE id = ?", (run_id,))
    assert row is not None
    return row["lease_owner"]


@pytest.mark.anyio
async def test_an_expired_lease_is_claimed_by_exactly_one_of_two_replicas(
    replicas: list[SqlStore],
) -> None:
    one, two = replicas
    ids = await running_runs(one, 8)
    for run_id in ids:
        await lease(one, run_id, CRASHED, time.time() - 1)  # its holder died
    assert sorted(await two.claimable_runs(force=False)) == sorted(ids)

    until = time.time() + 30
    # Both replicas go for every run at once, three times each.
    attempts = [(s, o, r) for r in ids for s, o in ((one, "a"), (two, "b")) for _ in range(3)]
    won = await asyncio.gather(
        *(store.claim_run(run_id, owner, until, force=False) for store, owner, run_id in attempts)
    )
    winners: dict[str, set[str]] = {run_id: set() for run_id in ids}
    for (_, owner, run_id), claimed in zip(attempts, won, strict=True):
        if claimed:
            winners[run_id].add(owner)
    for run_id in ids:
        assert len(winners[run_id]) == 1, winners
        assert await owner_of(one, run_id) in winners[run_id]
    assert await one.claimable_runs(force=False) == []

    # A live lease is not taken; the holder renews it; released, it is free again.
    run_id = ids[0]
    (holder,) = winners[run_id]
    other = "b" if holder == "a" else "a"
    assert not await two.claim_run(run_id, other, until, force=False)
    assert await one.renew_leases(holder, [run_id], until + 30) == {run_id: "running"}
    assert await two.renew_leases(other, [run_id], until + 30) == {run_id: "elsewhere"}
    await one.release_leases(holder)
    assert await two.claim_run(run_id, other, until, force=False)
    assert await owner_of(one, run_id) == other


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgresql"])  # replicas need PostgreSQL
def test_a_run_whose_executor_crashed_is_resumed_by_exactly_one_of_two_replicas(
    make_proxy: ProxyFactory, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs left running by a replica that died (their leases about to expire) are taken
    over by one of the two replicas still up, never both, and each completes once."""
    monkeypatch.setattr(proxy.run_worker, "TICK_SECONDS", 0.02)  # replicas race every 20 ms
    monkeypatch.setattr(proxy.run_worker, "STOP_GRACE", 0.05)
    executed: list[tuple[str, str, int]] = []
    lock = threading.Lock()
    step = StepRunner.run_step

    async def recording(self: StepRunner, run: RunRecord, owner: str) -> RunRecord | None:
        with lock:
            executed.append((owner, run.id, run.step))
        return await step(self, run, owner)

    monkeypatch.setattr(StepRunner, "run_step", recording)
    runs = 4
    # The first replica's calls hang: it "crashes" with every run mid-step.
    upstream.script.extend(Reply(content="never seen", delay=1.5) for _ in range(runs))
    with make_proxy() as first, httpx.Client(base_url=first.v1, timeout=20) as http:
        posted = []
        for i in range(runs):
            thread = http.post("/threads").json()["thread_id"]
            body = {"content": f"task {i}"}
            posted.append((thread, http.post(f"/threads/{thread}/messages", json=body).json()))
        deadline = time.monotonic() + 15
        while len(upstream.chats) < runs:
            assert time.monotonic() < deadline, "the first replica never called upstream"
            time.sleep(0.01)
    ids = [run["run_id"] for _, run in posted]
    lease = "UPDATE runs SET lease_owner = ?, lease_until = ? WHERE status = 'running'"
    with first.db() as db:  # what a crash leaves: leases held by a process that is gone
        db.execute(lease, (CRASHED, time.time() + 3600))
    crash = len(executed)

    with make_proxy() as second, make_proxy():
        time.sleep(0.1)  # a few ticks of both: nobody takes a lease that is still valid
        assert len(executed) == crash
        with first.db() as db:  # the leases run out, with both replicas up and ticking
            db.execute(lease, (CRASHED, time.time()))
        deadline = time.monotonic() + 30
        with httpx.Client(base_url=second.v1, timeout=20) as http:
            for i, (thread, run) in enumerate(posted):
                url = f"/threads/{thread}/runs/{run['run_id']}"
                while (status := http.get(url).json()["status"]) == "running":
                    assert time.monotonic() < deadline, f"run {run['run_id']} never finished"
                    time.sleep(0.02)
                assert status == "completed"
                messages = http.get(f"/threads/{thread}/messages").json()["data"]
                assert [(m["role"], m["content"]) for m in messages] == [
                    ("user", f"task {i}"),
                    ("assistant", f"answer to: task {i}"),
                ]

    after = executed[crash:]
    assert {run_id for _, run_id, _ in after} == set(ids)
    for run_id in ids:
        takers = {owner for owner, r, _ in after if r == run_id}
        assert len(takers) == 1 and CRASHED not in takers, (run_id, after)
    # Each run's step reached the upstream once before the crash and once after it.
    assert len(upstream.chats) == 2 * runs
