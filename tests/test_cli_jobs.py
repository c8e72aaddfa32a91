"""``hermes-proxy jobs …`` on the database directly, with and without a server."""

from __future__ import annotations

import orjson
from click.testing import CliRunner, Result

from proxy.cli import main
from tests.conftest import ProxyFactory
from tests.fake_upstream import FakeUpstream, Reply
from tests.jobs_helpers import wait_for

PROMPT = "Review the decisions in memory and report reversals."


def jobs(db: str, *args: str, ok: bool = True) -> Result:
    result = CliRunner().invoke(main, ["jobs", *args, "--db", db])
    if ok:
        assert result.exit_code == 0, result.output
    else:
        assert result.exit_code != 0, result.output
    return result


def test_add_list_show_pause_resume_delete(db_url: str) -> None:
    db = db_url
    added = jobs(
        db,
        "add",
        "weekly",
        "--schedule",
        "0 9 * * 1",
        "--prompt",
        PROMPT,
        "--session-id",
        "repo:acme/backend",
        "--timezone",
        "Europe/Paris",
    )
    assert "weekly" in added.output and "enabled" in added.output
    assert "09:00+0" in added.output  # next run, local time with its offset
    assert "repo:acme/backend" in added.output

    bad = jobs(db, "add", "bad", "--schedule", "0 9 * *", "--prompt", "x", ok=False)
    assert "5 fields" in bad.output
    again = jobs(db, "add", "weekly", "--schedule", "every 1h", "--prompt", "x", ok=False)
    assert "already exists" in again.output
    empty = jobs(db, "add", "blank", "--schedule", "every 1h", "--prompt", " ", ok=False)
    assert "must not be empty" in empty.output
    zone = jobs(
        db, "add", "z", "--schedule", "every 1h", "--prompt", "x", "--timezone", "X/Y", ok=False
    )
    assert "Unknown timezone" in zone.output

    listed = jobs(db, "list")
    assert listed.output.startswith("weekly") and "0 9 * * 1" in listed.output
    data = [orjson.loads(line) for line in jobs(db, "list", "--json").output.splitlines()]
    assert [d["name"] for d in data] == ["weekly"] and data[0]["next_run_at"] > 0
    assert jobs(db, "list", "--tenant", "someone-else").output == ""

    paused = jobs(db, "pause", "weekly")
    assert "paused" in paused.output and "next run:  -" in paused.output
    assert "(paused)" in jobs(db, "list").output
    resumed = jobs(db, "resume", data[0]["id"])
    assert "enabled" in resumed.output and "next run:  -" not in resumed.output

    shown = jobs(db, "show", "weekly")
    assert PROMPT in shown.output and "runs: none yet" in shown.output
    assert "deleted weekly" in jobs(db, "delete", "weekly").output
    assert "No job 'weekly'" in jobs(db, "show", "weekly", ok=False).output


def test_run_here_prints_the_answer_and_records_the_run(
    db_url: str, upstream: FakeUpstream
) -> None:
    db = db_url
    jobs(db, "add", "report", "--schedule", "every 1d", "--prompt", PROMPT)
    ran = jobs(db, "run", "report", "--upstream", upstream.url)
    assert ran.output.strip() == f"answer to: {PROMPT}"
    assert upstream.chats[-1].messages[-1] == {"role": "user", "content": PROMPT}

    upstream.script.append(Reply(status=500))
    failed = jobs(db, "run", "report", "--upstream", upstream.url, ok=False)
    assert "failed: upstream answered 500: fake failure" in failed.output

    shown = jobs(db, "show", "report").output
    assert "manual ok" in shown and "manual error" in shown
    assert f"answer to: {PROMPT}" in shown


def test_run_queue_hands_the_job_to_the_servers_scheduler(
    db_url: str, make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    db = db_url
    jobs(db, "add", "report", "--schedule", "every 1d", "--prompt", PROMPT)
    jobs(db, "pause", "report")
    refused = jobs(db, "run", "report", "--queue", ok=False)
    assert "paused" in refused.output
    jobs(db, "resume", "report")
    assert "queued report" in jobs(db, "run", "report", "--queue").output
    assert upstream.chats == []

    with make_proxy(jobs_tick=0.01) as proxy:
        wait_for(lambda: "schedule ok" in jobs(db, "show", "report").output)
        assert upstream.chats[-1].messages[-1]["content"] == PROMPT
        assert len(proxy.transcript("job:report")) == 2
    listed = orjson.loads(jobs(db, "list", "--json").output)
    assert listed["next_run_at"] > listed["last_run_at"] + 80_000  # back on its daily schedule
