"""``/api/jobs``: API, validation, tenancy, run-now, and runs built from session memory."""

from __future__ import annotations

from typing import Any

import pytest

from tests import http
from tests.conftest import Proxy
from tests.databases import PostgresServer
from tests.fake_upstream import FakeUpstream
from tests.jobs_helpers import FakeClock, api, at, jobs_proxy, wait_for

NOW = at("2025-03-03T08:00:00+00:00")  # a Monday
WEEKLY = {
    "name": "weekly-pattern-report",
    "schedule": "0 9 * * 1",
    "prompt": "Review the engineering decisions you have stored in memory from the past week.",
    "session_id": "repo:acme/backend",
}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def proxy(db_url: str, upstream: FakeUpstream, clock: FakeClock, pg: PostgresServer | None) -> Any:
    # The scheduler is off: these tests run jobs only when they ask to.
    with jobs_proxy(db_url, upstream, clock, pg, jobs_tick=0) as handle:
        yield handle


def error_of(response: dict[str, Any], param: str | None = None) -> str:
    error = response["error"]
    assert set(error) == {"message", "type", "param", "code"}
    if param is not None:
        assert error["param"] == param, error
    message: str = error["message"]
    return message


def test_create_list_show_update_delete(proxy: Proxy) -> None:
    # The request the client in the issue sends, as it sends it.
    response = http.post(f"{proxy.url}/api/jobs", json=WEEKLY, timeout=10)
    assert response.status_code == 201, response.text
    job = response.json()
    assert job["id"].startswith("job_")
    assert job["object"] == "job"
    assert job["session_id"] == "repo:acme/backend"
    assert job["timezone"] == "UTC" and job["enabled"] is True and job["model"] is None
    assert job["next_run_at"] == at("2025-03-03T09:00:00+00:00")
    assert job["last_run_at"] is None and job["created_at"] == NOW

    listing = api(proxy, "GET", "")
    assert listing["object"] == "list"
    assert [j["id"] for j in listing["data"]] == [job["id"]]
    assert api(proxy, "GET", f"/{job['id']}") == job
    assert api(proxy, "GET", "/weekly-pattern-report") == job  # by name too

    changed = api(
        proxy,
        "PATCH",
        f"/{job['id']}",
        {"schedule": "30 8 * * *", "timezone": "Europe/Paris", "model": "gpt-4o"},
    )
    assert changed["schedule"] == "30 8 * * *" and changed["model"] == "gpt-4o"
    assert changed["next_run_at"] == at("2025-03-04T08:30:00+01:00")
    renamed = api(proxy, "PATCH", f"/{job['id']}", {"name": "daily"})
    assert renamed["name"] == "daily" and renamed["next_run_at"] == changed["next_run_at"]
    assert renamed["session_id"] == "repo:acme/backend"  # the memory stays where it was

    deleted = api(proxy, "DELETE", "/daily")
    assert deleted == {"id": job["id"], "object": "job.deleted", "deleted": True}
    assert api(proxy, "GET", "")["data"] == []
    error_of(api(proxy, "GET", f"/{job['id']}", expect=404), "id")
    api(proxy, "GET", f"/{job['id']}/runs", expect=404)


def test_session_defaults_to_the_job_name(proxy: Proxy) -> None:
    job = api(proxy, "POST", "", {"name": "n1", "schedule": "every 2h", "prompt": "hi"}, expect=201)
    assert job["session_id"] == "job:n1"
    assert job["next_run_at"] == NOW + 7200
    again = api(proxy, "PATCH", "/n1", {"session_id": None})
    assert again["session_id"] == "job:n1"


# Refused before the store is asked anything: a PostgreSQL twin would prove nothing more.
@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize(
    ("body", "param", "says"),
    [
        ({**WEEKLY, "schedule": "61 9 * * 1"}, "schedule", "Invalid cron expression"),
        ({**WEEKLY, "schedule": "0 9 * *"}, "schedule", "5 fields"),
        ({**WEEKLY, "schedule": "every 10 parsecs"}, "schedule", "Invalid interval"),
        ({**WEEKLY, "schedule": "every 10s"}, "schedule", "one minute"),
        ({**WEEKLY, "schedule": "2024-01-01T00:00:00"}, "schedule", "in the past"),
        ({**WEEKLY, "schedule": "0 0 30 2 *"}, "schedule", "never occurs"),
        ({**WEEKLY, "schedule": "  "}, "schedule", "must not be empty"),
        ({**WEEKLY, "timezone": "Mars/Olympus"}, "timezone", "Unknown timezone 'Mars/Olympus'"),
        ({**WEEKLY, "prompt": ""}, "prompt", "'prompt' must not be empty"),
        ({**WEEKLY, "prompt": "  \n "}, "prompt", "'prompt' must not be empty"),
        ({**WEEKLY, "prompt": 42}, "prompt", "must be a string"),
        ({k: v for k, v in WEEKLY.items() if k != "prompt"}, "prompt", "required"),
        ({k: v for k, v in WEEKLY.items() if k != "schedule"}, "schedule", "required"),
        ({k: v for k, v in WEEKLY.items() if k != "name"}, "name", "required"),
        ({**WEEKLY, "name": "has spaces"}, "name", "Invalid job name"),
        ({**WEEKLY, "name": ""}, "name", "Invalid job name"),
        ({**WEEKLY, "enabled": "yes"}, "enabled", "must be a boolean"),
        ({**WEEKLY, "session_id": ""}, "session_id", "1 to 256 printable"),
        ({**WEEKLY, "timezon": "UTC"}, "timezon", "Unknown field 'timezon'"),
    ],
)
def test_invalid_jobs_are_400s_that_say_what_is_wrong(
    proxy: Proxy, body: dict[str, Any], param: str, says: str
) -> None:
    message = error_of(api(proxy, "POST", "", body, expect=400), param)
    assert says in message
    assert api(proxy, "GET", "")["data"] == []


def test_malformed_bodies_duplicates_and_unknown_jobs(proxy: Proxy) -> None:
    response = http.post(f"{proxy.url}/api/jobs", content=b"{nope", timeout=10)
    assert response.status_code == 400
    assert "not valid JSON" in error_of(response.json())
    response = http.post(f"{proxy.url}/api/jobs", json=[1, 2], timeout=10)
    assert response.status_code == 400

    api(proxy, "POST", "", WEEKLY, expect=201)
    duplicate = api(proxy, "POST", "", {**WEEKLY, "schedule": "every 1h"}, expect=409)
    assert "already exists" in error_of(duplicate, "name")
    other = api(proxy, "POST", "", {**WEEKLY, "name": "other"}, expect=201)
    clash = api(proxy, "PATCH", f"/{other['id']}", {"name": WEEKLY["name"]}, expect=409)
    assert "already exists" in error_of(clash, "name")
    bad = api(proxy, "PATCH", "/other", {"schedule": "every"}, expect=400)
    assert "Invalid interval" in error_of(bad, "schedule")
    api(proxy, "POST", "/other/pause")
    past = api(proxy, "PATCH", "/other", {"schedule": "2020-01-01T00:00:00"}, expect=400)
    assert "in the past" in error_of(past, "schedule")
    assert api(proxy, "GET", "/other")["schedule"] == WEEKLY["schedule"]

    for method, path in [
        ("GET", "/job_0000000000000000"),
        ("GET", "/nope"),
        ("PATCH", "/nope"),
        ("DELETE", "/nope"),
        ("POST", "/nope/pause"),
        ("POST", "/nope/resume"),
        ("POST", "/nope/run"),
        ("GET", "/nope/runs"),
    ]:
        assert "No job '" in error_of(api(proxy, method, path, {}, expect=404), "id")
    error_of(api(proxy, "GET", "/other/runs", expect=400, limit=0), "limit")
    error_of(api(proxy, "GET", "/other/runs", expect=400, limit="x"), "limit")


def test_run_now_answers_in_the_session_and_keeps_the_schedule(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    job = api(proxy, "POST", "", {**WEEKLY, "enabled": False}, expect=201)
    assert job["next_run_at"] is None  # created paused
    run = api(proxy, "POST", f"/{job['id']}/run", wait="true")
    assert run["status"] == "ok" and run["reason"] == "manual"
    assert run["output"] == f"answer to: {WEEKLY['prompt']}"
    assert run["usage"] == {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    assert run["scheduled_for"] is None and run["finished_at"] >= run["started_at"]
    assert run["session"]

    queued = api(proxy, "POST", f"/{job['id']}/run", expect=202)
    assert queued["status"] == "running"
    done = wait_for(
        lambda: (
            [r for r in api(proxy, "GET", f"/{job['id']}/runs")["data"] if r["status"] == "ok"]
            if len(upstream.chats) == 2
            else None
        )
    )
    assert len(done) == 2
    history = api(proxy, "GET", f"/{job['id']}/runs", limit=1)
    assert history["has_more"] is True and history["data"][0]["id"] == queued["id"]
    older = api(proxy, "GET", f"/{job['id']}/runs", before=queued["id"])
    assert [r["id"] for r in older["data"]] == [run["id"]] and older["has_more"] is False

    after = api(proxy, "GET", f"/{job['id']}")
    assert after["next_run_at"] is None and after["last_status"] == "ok"
    assert [r.body["model"] for r in upstream.chats] == [proxy.settings.model] * 2
    transcript = proxy.transcript("repo:acme/backend")
    assert [(m["role"], m["content"]) for m in transcript] == [
        ("user", WEEKLY["prompt"]),
        ("assistant", f"answer to: {WEEKLY['prompt']}"),
    ] * 2
    with proxy.db() as conn:
        source = conn.execute("SELECT source FROM sessions WHERE key = ?", (WEEKLY["session_id"],))
        assert source.fetchone()[0] == "cron"


FACT = "Decision: we removed Redis because stale cache entries caused 3 outages in March."
FILLER = "Let's talk about naming test functions clearly and keeping them short, item {}."


def test_a_job_answers_from_memory_built_by_earlier_chat_turns(
    db_url: str, upstream: FakeUpstream, clock: FakeClock, pg: PostgresServer | None
) -> None:
    with jobs_proxy(db_url, upstream, clock, pg, jobs_tick=0, budget=700) as proxy:
        client = proxy.client()
        session = {"X-Hermes-Session-Id": "repo:acme/backend"}
        for text in [FACT, *(FILLER.format(i) for i in range(40))]:
            client.chat.completions.create(
                model="hermes",
                messages=[{"role": "user", "content": text}],
                extra_headers=session,
            )
            proxy.settle()
        # By now the fact is out of the recent window: only memory carries it.
        last_chat = upstream.chats[-1].messages
        assert not any(m["content"] == FACT for m in last_chat)

        job = api(proxy, "POST", "", WEEKLY, expect=201)
        run = api(proxy, "POST", f"/{job['id']}/run", wait="true")
        assert run["status"] == "ok"
        sent = upstream.chats[-1].messages
        assert sent[-1] == {"role": "user", "content": WEEKLY["prompt"]}
        # The fact reaches the job's prompt through the session's memory message.
        carriers = [m for m in sent[:-1] if FACT in str(m["content"])]
        assert len(carriers) == 1 and carriers[0]["role"] != "user"
        assert "Facts" in carriers[0]["content"]

        # The job's turn is now part of the session: the next chat turn sees it.
        client.chat.completions.create(
            model="hermes",
            messages=[{"role": "user", "content": "And what did the report say?"}],
            extra_headers=session,
        )
        follow_up = "\n".join(str(m["content"]) for m in upstream.chats[-1].messages)
        assert f"answer to: {WEEKLY['prompt']}" in follow_up


def test_jobs_are_isolated_by_tenant(
    db_url: str, upstream: FakeUpstream, pg: PostgresServer | None
) -> None:
    clock = FakeClock(NOW)
    keys = ("k-alice:alice", "k-bob:bob")
    with jobs_proxy(db_url, upstream, clock, pg, jobs_tick=0, api_key=keys) as proxy:
        alice = api(proxy, "POST", "", WEEKLY, key="k-alice", expect=201)
        assert api(proxy, "GET", "", key="k-bob")["data"] == []
        for method, path in [
            ("GET", f"/{alice['id']}"),
            ("GET", f"/{WEEKLY['name']}"),
            ("PATCH", f"/{alice['id']}"),
            ("DELETE", f"/{alice['id']}"),
            ("POST", f"/{alice['id']}/pause"),
            ("POST", f"/{alice['id']}/run"),
            ("GET", f"/{alice['id']}/runs"),
        ]:
            api(proxy, method, path, {}, key="k-bob", expect=404)
        # The same name is free in another tenant, and runs in that tenant's session.
        bob = api(proxy, "POST", "", WEEKLY, key="k-bob", expect=201)
        assert bob["id"] != alice["id"]
        api(proxy, "POST", f"/{bob['id']}/run", key="k-bob", wait="true")
        assert proxy.transcript(WEEKLY["session_id"], tenant="alice") == []
        assert len(proxy.transcript(WEEKLY["session_id"], tenant="bob")) == 2
        assert api(proxy, "GET", f"/{alice['id']}", key="k-alice")["enabled"] is True

        for key in (None, "wrong"):
            denied = api(proxy, "GET", "", key=key, expect=401)
            assert denied["error"]["code"] == "invalid_api_key"
        api(proxy, "POST", "", {**WEEKLY, "name": "x"}, expect=401)


def test_a_job_can_name_its_model_and_a_prompt_too_large_is_an_error_run(
    db_url: str, upstream: FakeUpstream, clock: FakeClock, pg: PostgresServer | None
) -> None:
    with jobs_proxy(db_url, upstream, clock, pg, jobs_tick=0, budget=300) as proxy:
        job = api(proxy, "POST", "", {**WEEKLY, "model": "gpt-4o"}, expect=201)
        assert api(proxy, "POST", f"/{job['id']}/run", wait="true")["status"] == "ok"
        assert upstream.chats[-1].body["model"] == "gpt-4o"

        huge = api(proxy, "PATCH", f"/{job['id']}", {"prompt": "word " * 2000})
        run = api(proxy, "POST", f"/{huge['id']}/run", wait="true")
        assert run["status"] == "error" and "budget" in run["error"]
        assert len(upstream.chats) == 1
        assert api(proxy, "GET", f"/{job['id']}")["last_status"] == "error"
