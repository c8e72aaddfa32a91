"""``hermes-proxy chat``: through a running proxy or one in-process; continue, resume, stream."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.conftest import Proxy
from tests.fake_upstream import FakeUpstream, Recorded, Reply
from tests.session_helpers import api, cli, session_path


def session_of(output: str) -> str:
    match = re.search(r"^Session: (\S+)$", output, re.M)
    assert match, output
    return match.group(1)


def test_new_continue_and_resume_through_a_running_proxy(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    first = cli("chat", "--url", proxy.url, input="My name is Alex.\n/exit\n")
    assert first.exit_code == 0, first.output
    assert "you> answer to: My name is Alex." in first.stdout
    session_id = session_of(first.stdout)
    assert f"Resume with: hermes-proxy chat --resume {session_id}" in first.stdout
    assert upstream.chats[-1].body["stream"] is True
    with api(proxy) as client:
        created = client.get(session_path(session_id)).json()
    assert created["source"] == "cli" and created["id"] == created["key"] == session_id

    # Another, unrelated session is newer; -c still picks the latest cli one.
    cli("chat", "--url", proxy.url, input="")
    latest = cli("chat", "--url", proxy.url, input="unrelated\n")
    other = session_of(latest.stdout)
    again = cli("chat", "-c", "--url", proxy.url, input="What is my name?\n")
    assert session_of(again.stdout) == other
    assert f"Continuing session {other}" in again.stderr

    resumed = cli("chat", "-r", session_id[:-3], "--url", proxy.url, input="And again?\n")
    assert session_of(resumed.stdout) == session_id
    assert f"Resuming session {session_id} (2 messages)" in resumed.stderr
    sent = [m["content"] for m in upstream.chats[-1].messages]
    assert sent == ["My name is Alex.", "answer to: My name is Alex.", "And again?"]

    missing = cli("chat", "-r", "no-such-session", "--url", proxy.url, input="")
    assert missing.exit_code == 2 and "No session 'no-such-session'" in missing.output
    both = cli("chat", "-c", "-r", "x", "--url", proxy.url, input="")
    assert both.exit_code == 2


def test_reset_inside_the_chat_keeps_the_facts(proxy: Proxy, upstream: FakeUpstream) -> None:
    result = cli(
        "chat",
        "--url",
        proxy.url,
        input="Our database is PostgreSQL 15 on RDS.\n/reset\nWhich database?\n",
    )
    assert result.exit_code == 0, result.output
    assert "facts carried over" in result.stderr
    sent = upstream.chats[-1].messages
    assert len(sent) == 2 and "PostgreSQL 15" in str(sent[0]["content"])


def test_chat_starts_a_proxy_in_process(upstream: FakeUpstream, tmp_path: Path) -> None:
    db = str(tmp_path / "chat.db")
    result = cli(
        "chat",
        "--in-process",
        "--db",
        db,
        "--upstream",
        upstream.url,
        "--summarizer",
        "extractive",
        input="hello there\n",
    )
    assert result.exit_code == 0, result.output
    assert "answer to: hello there" in result.stdout
    assert f"(in-process proxy on database {db})" in result.stderr
    session_id = session_of(result.stdout)
    listing = cli("sessions", "list", "--db", db)
    assert session_id in listing.output and " cli " in listing.output


def test_the_answer_is_printed_as_it_streams_in(proxy: Proxy, upstream: FakeUpstream) -> None:
    def slow(request: Recorded) -> Reply:
        return Reply(content="alpha beta gamma delta epsilon zeta", chunk_delay=0.4)

    upstream.responder = slow
    arrivals: list[tuple[float, bytes]] = []
    with subprocess.Popen(
        [sys.executable, "-m", "proxy", "chat", "--url", proxy.url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        stdout = process.stdout

        def read() -> None:
            while chunk := os.read(stdout.fileno(), 4096):
                arrivals.append((time.monotonic(), chunk))

        reader = threading.Thread(target=read)
        reader.start()
        process.stdin.write(b"go\n")
        process.stdin.flush()
        deadline = time.monotonic() + 30
        while b"zeta" not in b"".join(c for _, c in arrivals) and time.monotonic() < deadline:
            time.sleep(0.05)
        process.stdin.close()
        process.wait(timeout=30)
        reader.join(timeout=10)

    def first(word: bytes) -> float:
        seen = b""
        for at, chunk in arrivals:
            seen += chunk
            if word in seen:
                return at
        raise AssertionError(f"{word!r} never arrived: {seen!r}")

    # The first words were on screen while the upstream was still sending the rest.
    assert first(b"zeta") - first(b"alpha") >= 0.6
    assert b"Session: " in b"".join(c for _, c in arrivals)
