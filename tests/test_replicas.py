"""Several proxies, one PostgreSQL database: replicas, worker processes, shared sessions."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from proxy.cli import main
from proxy.config import Settings
from proxy.serving import decode_settings, encode_settings
from tests import http
from tests.conftest import ProxyFactory
from tests.databases import PostgresServer
from tests.fake_upstream import FakeUpstream
from tests.servers import free_port


@pytest.fixture
def backend() -> str:
    return "postgresql"


@contextmanager
def serving(*args: str, log: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``hermes-proxy serve`` in a process of its own, on a free port, until the block ends."""
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "proxy", "serve", "--port", str(port), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=os.environ.copy(),
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the proxy exited:\n{log.read_text()}")
            try:
                if http.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the proxy did not start:\n{log.read_text()}")
            time.sleep(0.1)
        yield url, process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def ask(url: str, session: str, text: str) -> str:
    response = http.post(
        f"{url}/v1/chat/completions",
        json={"model": "hermes", "messages": [{"role": "user", "content": text}]},
        headers={"X-Hermes-Session-Id": session},
        timeout=120,
    )
    assert response.status_code == 200, response.text
    return str(response.json()["choices"][0]["message"]["content"])


def transcript(postgres: PostgresServer, db_url: str, key: str) -> list[tuple[int, str, str]]:
    with postgres.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT m.seq, m.role, m.content FROM messages m "
            "JOIN sessions s ON s.id = m.session_id WHERE s.key = ? ORDER BY m.seq",
            (key,),
        ).fetchall()
    return [(r["seq"], r["role"], r["content"]) for r in rows]


def assert_serialized(rows: list[tuple[int, str, str]], questions: list[str]) -> None:
    """Each question stored once, its answer right after it, seqs without gaps."""
    assert [seq for seq, _, _ in rows] == list(range(1, 2 * len(questions) + 1))
    asked = [content for _, role, content in rows[0::2]]
    assert all(role == "user" for _, role, _ in rows[0::2])
    assert sorted(asked) == sorted(questions)
    for (_, _, question), (_, role, answer) in zip(rows[0::2], rows[1::2], strict=True):
        assert role == "assistant" and answer == f"answer to: {question}"


@pytest.mark.postgres
def test_fifty_concurrent_turns_on_one_session_across_two_replica_processes(
    upstream: FakeUpstream, db_url: str, postgres: PostgresServer, tmp_path: Path
) -> None:
    flags = ["--db", db_url, "--upstream", upstream.url, "--summarizer", "extractive"]
    flags += ["--budget", "8000"]
    with ExitStack() as stack:
        urls = [
            stack.enter_context(serving(*flags, log=tmp_path / f"replica{i}.log"))[0]
            for i in range(2)
        ]
        questions = [f"question {i}" for i in range(50)]
        with ThreadPoolExecutor(50) as pool:
            answers = list(pool.map(lambda i: ask(urls[i % 2], "shared", questions[i]), range(50)))
    assert answers == [f"answer to: {q}" for q in questions]
    assert_serialized(transcript(postgres, db_url, "shared"), questions)
    # Turns never interleaved: every upstream call carried every earlier turn, whole.
    assert sorted(len(chat.messages) for chat in upstream.chats) == list(range(1, 100, 2))


@pytest.mark.postgres
def test_replicas_keep_their_session_caches_right(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    """Turns alternate between two replicas, compaction included: none works from stale state."""
    with make_proxy(budget=600) as a, make_proxy(budget=600) as b:
        questions = []
        for i in range(40):
            replica = (a, b)[(i // 3) % 2]  # runs of three turns, so each cache goes stale
            questions.append(f"question {i} " + "padding words " * 5)
            ask(replica.url, "alternating", questions[-1])
            sent = [str(m["content"]) for m in upstream.chats[-1].messages]
            if i:
                # The previous turn, whichever replica served it, is in the prompt.
                assert f"answer to: {questions[-2]}" in sent
            replica.settle()
        assert a.services.compactor.stats.applied + b.services.compactor.stats.applied > 0
        rows = [(r["seq"], r["role"], r["content"]) for r in a.transcript("alternating")]
    assert_serialized(rows, questions)


@pytest.mark.postgres
def test_serve_with_two_worker_processes(
    upstream: FakeUpstream, db_url: str, postgres: PostgresServer, tmp_path: Path
) -> None:
    flags = ["--db", db_url, "--upstream", upstream.url, "--summarizer", "extractive"]
    log = tmp_path / "workers.log"
    with serving(*flags, "--workers", "2", log=log) as (url, process):
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        # Besides the workers, multiprocessing may run its resource tracker.
        commands = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in children]
        assert sum(b"spawn_main" in command for command in commands) == 2, commands
        questions = [f"question {i}" for i in range(20)]
        with ThreadPoolExecutor(20) as pool:
            list(pool.map(lambda q: ask(url, "workers", q), questions))
        # Both opened the database (their lifespans ran) and serve.
        assert log.read_text().count("Application startup complete") == 2
    assert_serialized(transcript(postgres, db_url, "workers"), questions)


@pytest.mark.postgres
def test_a_job_due_once_fires_once_across_two_replica_processes(
    upstream: FakeUpstream, db_url: str, postgres: PostgresServer, tmp_path: Path
) -> None:
    """Both replicas check for due jobs every 20 ms; each one-shot job runs on one of them.

    Ten jobs fall due at once, more than one replica starts in a pass (eight),
    so both usually take some."""
    flags = ["--db", db_url, "--upstream", upstream.url, "--summarizer", "extractive"]
    flags += ["--jobs-tick", "0.02"]
    with ExitStack() as stack:
        urls = [
            stack.enter_context(serving(*flags, log=tmp_path / f"replica{i}.log"))[0]
            for i in range(2)
        ]
        due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=4)
        names = [f"once-{i}" for i in range(10)]
        for name in names:
            body = {"name": name, "schedule": due.isoformat(), "prompt": f"Run {name}."}
            created = http.post(f"{urls[0]}/api/jobs", json=body, timeout=30)
            assert created.status_code == 201, created.text
        assert datetime.now(UTC) < due, "the jobs must be created before they are due"

        def finished() -> int:
            with postgres.connect(db_url) as conn:
                row = conn.execute("SELECT COUNT(*) FROM job_runs WHERE status <> 'running'")
                return int(row.fetchone()[0])

        deadline = time.monotonic() + 30
        while finished() < len(names):
            assert time.monotonic() < deadline, "the jobs did not run"
            time.sleep(0.05)
        time.sleep(0.5)  # 25 more passes of each scheduler: nothing fires again
        with postgres.connect(db_url) as conn:
            fired = conn.execute(
                "SELECT j.name, r.status, r.scheduled_for FROM job_runs r "
                "JOIN jobs j ON j.id = r.job_id ORDER BY j.name"
            ).fetchall()
            listed = http.get(f"{urls[1]}/api/jobs", timeout=30).json()["data"]
    assert [(r["name"], r["status"], r["scheduled_for"]) for r in fired] == [
        (name, "ok", due.timestamp()) for name in names
    ]
    prompts = sorted(str(chat.messages[-1]["content"]) for chat in upstream.chats)
    assert prompts == sorted(f"Run {name}." for name in names)
    assert {job["next_run_at"] for job in listed} == {None}


def test_more_than_one_worker_needs_postgresql(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["serve", "--workers", "2", "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2
    assert "--workers 2 needs PostgreSQL" in result.output
    result = CliRunner().invoke(main, ["serve", "--workers", "0"])
    assert result.exit_code == 2
    assert "workers must be at least 1" in result.output


def test_worker_processes_get_the_settings_exactly(tmp_path: Path) -> None:
    settings = Settings.load(
        environ={"HERMES_HOME": str(tmp_path)},
        flags={
            "db": "postgresql://u@h/d",
            "workers": 3,
            "api_key": ("k1:acme", "k2"),
            "budget": 900,
        },
    )
    assert decode_settings(encode_settings(settings)) == settings
