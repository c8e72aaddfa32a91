"""The scheduler, driven by a fake clock: firing instants, DST, pause, catch-up, no double fire."""

from __future__ import annotations

import asyncio
from typing import Any

from proxy.jobs import Jobs, next_run
from proxy.store import SqlStore, database_for
from tests.conftest import Proxy
from tests.databases import PostgresServer
from tests.fake_upstream import FakeUpstream, Reply
from tests.jobs_helpers import FakeClock, api, at, jobs_proxy, scheduler, settle_jobs, wait_for

HOUR = 3600.0


def create(proxy: Proxy, **fields: Any) -> dict[str, Any]:
    body = {"prompt": "Report on what you remember.", **fields}
    job: dict[str, Any] = api(proxy, "POST", "", body, expect=201)
    return job


def runs(proxy: Proxy, job_id: str) -> list[dict[str, Any]]:
    """Finished and running runs, oldest first."""
    data: list[dict[str, Any]] = api(proxy, "GET", f"/{job_id}/runs", limit=100)["data"]
    return data[::-1]


def advance(clock: FakeClock, to: float, *proxies: Proxy) -> None:
    clock.now = to
    settle_jobs(*proxies)


def test_cron_job_fires_at_its_local_time_across_a_dst_change(
    db_url: str, upstream: FakeUpstream, pg: PostgresServer | None
) -> None:
    clock = FakeClock(at("2025-03-07T12:00:00-05:00"))
    with jobs_proxy(db_url, upstream, clock, pg) as proxy:
        job = create(proxy, name="morning", schedule="0 9 * * *", timezone="America/New_York")
        expected = [
            at("2025-03-08T09:00:00-05:00"),
            at("2025-03-09T09:00:00-04:00"),  # DST began at 02:00: 23 hours later
            at("2025-03-10T09:00:00-04:00"),
            at("2025-03-11T09:00:00-04:00"),
        ]
        assert job["next_run_at"] == expected[0]
        for i, when in enumerate(expected[:-1]):
            advance(clock, when - 1, proxy)
            assert len(runs(proxy, job["id"])) == i, "fired early"
            advance(clock, when, proxy)
            done = runs(proxy, job["id"])
            assert len(done) == i + 1
            assert done[-1]["scheduled_for"] == when
            assert done[-1]["status"] == "ok"
            assert done[-1]["reason"] == "schedule"
            assert api(proxy, "GET", f"/{job['id']}")["next_run_at"] == expected[i + 1]
        assert len(upstream.chats) == 3
        assert all(r.messages[-1]["content"] == job["prompt"] for r in upstream.chats)


def test_interval_jobs_fire_every_period_and_daily_ones_keep_local_time(
    db_url: str, upstream: FakeUpstream, pg: PostgresServer | None
) -> None:
    start = at("2025-03-29T09:00:00+01:00")
    clock = FakeClock(start)
    with jobs_proxy(db_url, upstream, clock, pg) as proxy:
        hourly = create(proxy, name="hourly", schedule="every 2h")
        daily = create(proxy, name="daily", schedule="every 1d", timezone="Europe/Paris")
        assert hourly["next_run_at"] == start + 2 * HOUR
        assert daily["next_run_at"] == at("2025-03-30T09:00:00+02:00")  # 23 hours: DST began

        for step in range(1, 5):
            advance(clock, start + 2 * HOUR * step - 1, proxy)
            assert len(runs(proxy, hourly["id"])) == step - 1
            advance(clock, start + 2 * HOUR * step, proxy)
            assert [r["scheduled_for"] for r in runs(proxy, hourly["id"])][-1] == (
                start + 2 * HOUR * step
            )
        assert runs(proxy, daily["id"]) == []
        advance(clock, at("2025-03-30T09:00:00+02:00"), proxy)
        assert len(runs(proxy, daily["id"])) == 1
        later = api(proxy, "GET", "/daily")
        assert later["next_run_at"] == at("2025-03-31T09:00:00+02:00")


def test_pause_skips_occurrences_and_resume_continues_the_schedule(
    db_url: str, upstream: FakeUpstream, pg: PostgresServer | None
) -> None:
    start = at("2025-01-06T00:00:00+00:00")
    clock = FakeClock(start)
    with jobs_proxy(db_url, upstream, clock, pg) as proxy:
        job = create(proxy, name="hourly", schedule="0 * * * *")
        advance(clock, start + HOUR, proxy)
        assert len(runs(proxy, job["id"])) == 1

        paused = api(proxy, "POST", f"/{job['id']}/pause")
        assert paused["enabled"] is False
        assert paused["next_run_at"] is None
        advance(clock, start + 3.5 * HOUR, proxy)
        assert len(runs(proxy, job["id"])) == 1, "a paused job ran"

        resumed = api(proxy, "POST", "/hourly/resume")
        assert resumed["enabled"] is True
        assert resumed["next_run_at"] == start + 4 * HOUR  # missed ones are not caught up
        advance(clock, start + 3.9 * HOUR, proxy)
        assert len(runs(proxy, job["id"])) == 1
        advance(clock, start + 4 * HOUR, proxy)
        assert [r["scheduled_for"] for r in runs(proxy, job["id"])] == [
            start + HOUR,
            start + 4 * HOUR,
        ]
        # Pausing through PATCH works the same way.
        assert api(proxy, "PATCH", "/hourly", {"enabled": False})["next_run_at"] is None


def test_occurrences_missed_while_down_collapse_into_one_run(
    db_url: str, upstream: FakeUpstream, pg: PostgresServer | None
) -> None:
    start = at("2025-01-06T00:00:00+00:00")
    clock = FakeClock(start)
    with jobs_proxy(db_url, upstream, clock, pg) as proxy:
        job = create(proxy, name="hourly", schedule="every 1h")
        advance(clock, start + HOUR, proxy)
        assert len(runs(proxy, job["id"])) == 1

    clock.now = start + 6.5 * HOUR  # down through 2h, 3h, 4h, 5h, 6h
    with jobs_proxy(db_url, upstream, clock, pg) as proxy:
        settle_jobs(proxy)
        settle_jobs(proxy)
        done = runs(proxy, job["id"])
        assert len(done) == 2, "missed occurrences did not collapse into one"
        assert done[-1]["scheduled_for"] == start + 2 * HOUR  # the oldest one missed
        assert done[-1]["started_at"] == start + 6.5 * HOUR
        assert api(proxy, "GET", "/hourly")["next_run_at"] == start + 7 * HOUR
        advance(clock, start + 7 * HOUR, proxy)
        assert len(runs(proxy, job["id"])) == 3


def test_a_one_shot_job_runs_once(
    db_url: str, upstream: FakeUpstream, pg: PostgresServer | None
) -> None:
    clock = FakeClock(at("2025-03-10T08:00:00-04:00"))
    with jobs_proxy(db_url, upstream, clock, pg) as proxy:
        job = create(
            proxy, name="once", schedule="2025-03-10T09:00:00", timezone="America/New_York"
        )
        assert job["next_run_at"] == at("2025-03-10T09:00:00-04:00")
        advance(clock, at("2025-03-10T09:00:00-04:00"), proxy)
        advance(clock, at("2025-03-12T09:00:00-04:00"), proxy)
        assert len(runs(proxy, job["id"])) == 1
        assert api(proxy, "GET", "/once")["next_run_at"] is None


def test_a_failing_upstream_records_an_error_run_and_waits_for_the_next_occurrence(
    db_url: str, upstream: FakeUpstream, pg: PostgresServer | None
) -> None:
    start = at("2025-01-06T00:00:00+00:00")
    clock = FakeClock(start)
    with jobs_proxy(db_url, upstream, clock, pg) as proxy:
        job = create(proxy, name="hourly", schedule="every 1h")
        upstream.script.append(Reply(status=500))
        advance(clock, start + HOUR, proxy)
        failed = runs(proxy, job["id"])
        assert len(failed) == 1
        assert failed[0]["status"] == "error"
        assert "500" in failed[0]["error"] and "fake failure" in failed[0]["error"]
        assert failed[0]["output"] is None and failed[0]["finished_at"] is not None
        after = api(proxy, "GET", "/hourly")
        assert after["last_status"] == "error"
        assert after["next_run_at"] == start + 2 * HOUR
        assert proxy.pending() == [], "the failed turn left a pending turn"
        assert proxy.transcript("job:hourly") == [], "the failed turn left messages"

        # No retry loop: nothing more happens before the next occurrence.
        advance(clock, start + 2 * HOUR - 1, proxy)
        settle_jobs(proxy)
        assert len(runs(proxy, job["id"])) == 1
        assert len(upstream.chats) == 1
        advance(clock, start + 2 * HOUR, proxy)
        assert [r["status"] for r in runs(proxy, job["id"])] == ["error", "ok"]
        assert api(proxy, "GET", "/hourly")["last_status"] == "ok"


def test_two_schedulers_on_one_database_never_fire_an_occurrence_twice(
    db_url: str, upstream: FakeUpstream, pg: PostgresServer | None
) -> None:
    start = at("2025-01-06T00:00:00+00:00")
    clock = FakeClock(start)
    with (
        jobs_proxy(db_url, upstream, clock, pg, jobs_tick=0.001) as one,
        jobs_proxy(db_url, upstream, clock, pg, jobs_tick=0.001) as two,
    ):
        ids = [create(one, name=f"job{i}", schedule="every 1m")["id"] for i in range(4)]
        for minute in range(1, 13):
            advance(clock, start + 60 * minute, one, two)
        with one.db() as conn:
            fired = conn.execute(
                "SELECT job_id, scheduled_for, COUNT(*) FROM job_runs GROUP BY 1, 2"
            ).fetchall()
        assert len(fired) == 4 * 12
        assert {row[2] for row in fired} == {1}
        assert {row[0] for row in fired} == set(ids)
        assert len(upstream.chats) == 4 * 12
        assert scheduler(one).ticks > 0 and scheduler(two).ticks > 0


def test_concurrent_claims_from_two_stores_claim_an_occurrence_once(db_url: str) -> None:
    path = db_url

    async def race() -> list[int]:
        stores = [SqlStore(database_for(path)) for _ in range(2)]
        for store in stores:
            await store.open()
        try:
            clock = FakeClock(1_000_000.0)
            jobs = Jobs(stores[0], clock)
            for i in range(5):
                spec = {"name": f"j{i}", "schedule": "every 1m", "prompt": "p"}
                await jobs.create("default", spec)
            clock.now += 60
            claims = await asyncio.gather(
                *(s.claim_due(clock.now, 10, next_run) for s in stores for _ in range(20))
            )
            return [len(c) for c in claims]
        finally:
            for store in stores:
                await store.close()

    counts = asyncio.run(race())
    assert sum(counts) == 5


def test_runs_interrupted_by_a_stop_are_closed_as_errors(
    db_url: str, upstream: FakeUpstream, pg: PostgresServer | None
) -> None:
    start = at("2025-01-06T00:00:00+00:00")
    clock = FakeClock(start)
    with jobs_proxy(db_url, upstream, clock, pg) as proxy:
        job = create(proxy, name="slow", schedule="every 1h")
        scheduler(proxy).grace = 0.05
        upstream.script.append(Reply(content="late", delay=5))
        clock.now = start + HOUR
        wait_for(lambda: len(upstream.chats) == 1)
    with proxy.db() as conn:
        status, error = conn.execute("SELECT status, error FROM job_runs").fetchone()
    assert status == "error" and "shut down" in error
    assert job["id"]
