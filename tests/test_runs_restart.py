"""Durability: runs survive a restart, and a SIGKILL mid-run, without replaying or losing a step."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from starlette.types import Receive, Scope, Send

import proxy.run_worker
from proxy.runs import Runs
from tests import http
from tests.conftest import ProxyFactory
from tests.fake_upstream import FakeUpstream, Recorded, Reply
from tests.servers import free_port, running
from tests.sse_client import EventStream, terminal

CALL = {
    "id": "call_7",
    "type": "function",
    "function": {"name": "approve_budget", "arguments": '{"amount": 5000}'},
}


def wait_for_status(http: httpx.Client, thread: str, run_id: str, *statuses: str) -> Any:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        run = http.get(f"/threads/{thread}/runs/{run_id}").json()
        if run["status"] in statuses:
            return run
        time.sleep(0.05)
    raise TimeoutError(f"run {run_id} never reached {statuses}: {run}")


def test_a_waiting_run_keeps_waiting_across_a_restart(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    upstream.script.extend([Reply(tool_calls=[CALL]), Reply(content="Approved and booked.")])
    with make_proxy() as proxy, httpx.Client(base_url=proxy.v1, timeout=20) as http:
        thread = http.post("/threads").json()["thread_id"]
        run_id = http.post(
            f"/threads/{thread}/messages", json={"content": "Book the shoot within budget."}
        ).json()["run_id"]
        wait_for_status(http, thread, run_id, "waiting_on_human")
    with make_proxy() as proxy, httpx.Client(base_url=proxy.v1, timeout=20) as http:
        assert http.get(f"/threads/{thread}/runs/{run_id}").json()["status"] == "waiting_on_human"
        time.sleep(0.3)  # nothing picks it up by itself
        assert len(upstream.chats) == 1
        http.post(
            f"/threads/{thread}/runs/{run_id}/input",
            json={"tool_outputs": [{"tool_call_id": "call_7", "output": "approved"}]},
        )
        wait_for_status(http, thread, run_id, "completed")
        assert len(upstream.chats) == 2


def test_a_step_stored_but_not_yet_reported_is_replayed_not_called_again(
    make_proxy: ProxyFactory, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy stops between storing a step's answer and reporting it: after the
    restart the stored answer is used, and the upstream is not asked again."""
    monkeypatch.setattr(proxy.run_worker, "STOP_GRACE", 0.1)
    reached = threading.Event()
    report = Runs.finish_step

    async def stop_before_reporting(*args: Any) -> None:
        reached.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(Runs, "finish_step", stop_before_reporting)
    with make_proxy() as first, httpx.Client(base_url=first.v1, timeout=20) as http:
        thread = http.post("/threads").json()["thread_id"]
        run_id = http.post(f"/threads/{thread}/messages", json={"content": "Hi"}).json()["run_id"]
        assert reached.wait(15)
        assert len(http.get(f"/threads/{thread}/messages").json()["data"]) == 2
    monkeypatch.setattr(Runs, "finish_step", report)
    with make_proxy() as second, httpx.Client(base_url=second.v1, timeout=20) as http:
        run = wait_for_status(http, thread, run_id, "completed")
        with EventStream(http, f"/threads/{thread}/events") as stream:
            events = stream.until(terminal(run_id))
        transcript = http.get(f"/threads/{thread}/messages").json()["data"]
    assert (run["step"], len(upstream.chats), len(transcript)) == (1, 1, 2)
    (completed,) = [e for e in events if e.type == "message.completed"]
    assert completed.data["message"]["content"] == transcript[1]["content"]
    with second.db() as db:
        assert db.execute("SELECT COUNT(*) FROM idempotency").fetchone()[0] == 0


class StallingUpstream:
    """A :class:`FakeUpstream` whose second chat call never answers: it is held until the
    client (the proxy, killed meanwhile) goes away."""

    def __init__(self, fake: FakeUpstream) -> None:
        self.fake = fake
        self.chat_calls = 0
        self.stalled = threading.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/chat/completions"):
            self.chat_calls += 1
            if self.chat_calls == 2:
                await self._stall(scope, receive)
                return
        await self.fake(scope, receive, send)

    async def _stall(self, scope: Scope, receive: Receive) -> None:
        raw = b""
        message = await receive()
        raw += message.get("body", b"")
        while message.get("more_body"):
            message = await receive()
            raw += message.get("body", b"")
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.fake.requests.append(Recorded("POST", scope["path"], headers, orjson.loads(raw), raw))
        self.stalled.set()
        while message["type"] != "http.disconnect":
            message = await receive()


@contextmanager
def served(args: list[str], port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``hermes-proxy serve`` in a subprocess; yields once it answers /healthz."""
    with log.open("ab") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "proxy", "serve", "--port", str(port), *args],
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if http.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"proxy did not start:\n{log.read_text()}")
            time.sleep(0.05)
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=30)


def test_a_run_killed_mid_step_resumes_without_replaying_or_losing_anything(
    tmp_path: Path,
) -> None:
    fake = FakeUpstream()
    fake.script.append(Reply(content="Step one: I drafted the storyboard.", chunk_delay=0.15))
    fake.responder = lambda _: Reply(content="Step two: shortened to 30 seconds.")
    db = tmp_path / "state.db"
    log = tmp_path / "proxy.log"
    with running(StallingUpstream(fake)) as upstream_url:
        port = free_port()
        base = f"http://127.0.0.1:{port}/v1"
        args = ["--db", str(db), "--upstream", f"{upstream_url}/v1", "--summarizer", "extractive"]
        with served(args, port, log) as first, httpx.Client(base_url=base, timeout=20) as http:
            thread = http.post("/threads").json()["thread_id"]
            url = f"/threads/{thread}/events"
            run_id = http.post(
                f"/threads/{thread}/messages", json={"content": "Storyboard the hero video."}
            ).json()["run_id"]
            with EventStream(http, url) as stream:
                stream.until(lambda e: e.type == "message.delta")
                steer = http.post(
                    f"/threads/{thread}/messages", json={"content": "Keep it to 30 seconds."}
                )
                assert steer.json()["steering"] is True
                before_kill = stream.until(lambda e: e.type == "message.completed")
            deadline = time.monotonic() + 15
            while len(fake.chats) < 2:  # the second call has reached the (stalling) upstream
                assert time.monotonic() < deadline
                time.sleep(0.01)
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)

        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT status FROM runs").fetchall() == [("running",)]
            assert conn.execute("SELECT COUNT(*) FROM pending_turns").fetchone() == (1,)

        with served(args, port, log), httpx.Client(base_url=base, timeout=20) as http:
            run = wait_for_status(http, thread, run_id, "completed", "error")
            assert (run["status"], run["step"]) == ("completed", 2)
            last_seen = before_kill[-1].id
            with EventStream(http, url, headers={"Last-Event-ID": str(last_seen)}) as stream:
                after_restart = stream.until(terminal(run_id))
            with EventStream(http, url) as stream:
                everything = stream.until(terminal(run_id))
            transcript = http.get(f"/threads/{thread}/messages").json()["data"]

    # The completed first call was not repeated; the interrupted second one was redone, once.
    questions = [call.messages[-1]["content"] for call in fake.chats]
    assert questions == [
        "Storyboard the hero video.",
        "Keep it to 30 seconds.",
        "Keep it to 30 seconds.",
    ]
    assert fake.chats[2].messages == fake.chats[1].messages
    # Nothing lost, nothing doubled.
    assert [(m["role"], m["content"]) for m in transcript] == [
        ("user", "Storyboard the hero video."),
        ("assistant", "Step one: I drafted the storyboard."),
        ("user", "Keep it to 30 seconds."),
        ("assistant", "Step two: shortened to 30 seconds."),
    ]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM pending_turns").fetchone() == (0,)
        # Each step's answer was kept for a replay only until the step was reported.
        assert conn.execute("SELECT COUNT(*) FROM idempotency").fetchone() == (0,)
    # The event log is gapless across the crash, and a reconnect replays exactly what was missed.
    assert [e.id for e in everything] == list(range(1, len(everything) + 1))
    assert [e.id for e in after_restart] == list(range(last_seen + 1, everything[-1].id + 1))
    assert [e.data["step"] for e in everything if e.type == "message.completed"] == [0, 1]
    assert [e.data["status"] for e in everything if e.type == "run_status"] == [
        "running",
        "completed",
    ]
    resumed = [e for e in everything if e.type == "message.delta" and e.data["step"] == 1]
    assert {e.data["attempt"] for e in resumed} == {2}
    assert "".join(e.data["content"] for e in resumed) == "Step two: shortened to 30 seconds."
