"""The CLI as a separate process, on the database of a server that keeps running."""

from __future__ import annotations

import threading
import time

import orjson

from tests.conftest import Proxy, ProxyFactory
from tests.fake_upstream import FakeUpstream, Recorded
from tests.session_helpers import cli_process, rows, say

DATABASE = "Our database is PostgreSQL 15 on RDS."


def test_read_commands_beside_a_running_server(proxy: Proxy) -> None:
    say(proxy, "repo:acme/backend", DATABASE, source="telegram")
    say(proxy, "repo:acme/frontend", "We deploy docker to kubernetes.")
    db = proxy.settings.db
    listing = cli_process("sessions", "list", "--db", db)
    assert listing.returncode == 0, listing.stderr
    assert "repo:acme/backend" in listing.stdout and "telegram" in listing.stdout
    shown = cli_process("sessions", "show", "repo:acme/b", "--db", db)
    assert shown.returncode == 0 and "Key        repo:acme/backend" in shown.stdout
    found = cli_process("sessions", "search", "docker", "--db", db)
    assert "1 session matches 'docker'" in found.stdout and "frontend" in found.stdout
    assert "Total sessions: 2" in cli_process("sessions", "stats", "--db", db).stdout
    ambiguous = cli_process("sessions", "show", "repo:acme/", "--db", db)
    assert ambiguous.returncode == 2 and "ambiguous" in ambiguous.stderr
    exported = cli_process("sessions", "export", "-", "--db", db)
    assert len(exported.stdout.splitlines()) == 2 and "Exported 2 sessions" in exported.stderr


def test_a_reset_from_the_cli_is_seen_by_the_running_server(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    say(proxy, "alex", DATABASE)
    say(proxy, "alex", "Some chatter that should not follow us.")
    old_id = rows(proxy, "SELECT id FROM sessions WHERE key = 'alex'")[0][0]
    done = cli_process(
        "sessions", "reset", "alex", "--db", proxy.settings.db, HERMES_SUMMARIZER="extractive"
    )
    assert done.returncode == 0, done.stderr
    assert f"Session {old_id} ended." in done.stdout and "carries 1 fact" in done.stdout

    # The server had the session cached; its next turn notices the reset.
    say(proxy, "alex", "Which database do we use?")
    sent = upstream.chats[-1].messages
    assert len(sent) == 2 and "PostgreSQL 15" in str(sent[0]["content"])
    assert "chatter" not in str(sent)
    (new,) = rows(proxy, "SELECT * FROM sessions WHERE key = 'alex' AND ended_at IS NULL")
    assert new["parent_id"] == old_id and new["message_count"] == 2


def test_the_cli_reset_uses_the_configured_summarizer(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    def summarize(request: Recorded) -> str:
        fact = {"subject": "user name", "text": "The user is Alex.", "turn": 1}
        return orjson.dumps({"facts": [fact], "changes": [], "summary": []}).decode()

    upstream.compaction_reply = summarize
    with make_proxy(summarizer="llm") as proxy:
        say(proxy, "llm", "I am Alex.")
        done = cli_process(
            "sessions",
            "reset",
            "llm",
            "--db",
            proxy.settings.db,
            HERMES_SUMMARIZER="llm",
            HERMES_UPSTREAM=upstream.url,
        )
        assert done.returncode == 0, done.stderr
        (state,) = rows(
            proxy,
            "SELECT st.memory FROM session_state st JOIN sessions s ON s.id = st.session_id "
            "WHERE s.ended_at IS NULL",
        )
    assert orjson.loads(state[0])["facts"][0]["text"] == "The user is Alex."
    assert len(upstream.compactions) == 1


def test_writes_from_the_cli_while_the_server_stores_turns(proxy: Proxy) -> None:
    for i in range(5):
        say(proxy, f"old{i}", "to be pruned")
    with proxy.db() as conn:
        conn.execute("UPDATE sessions SET ended_at = 1.0")
    errors: list[BaseException] = []

    def chat() -> None:
        try:
            for i in range(30):
                say(proxy, "steady", f"turn {i}")
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=chat)
    thread.start()
    time.sleep(0.2)
    pruned = cli_process("sessions", "prune", "--yes", "--db", proxy.settings.db)
    renamed = cli_process("sessions", "rename", "steady", "Steady", "--db", proxy.settings.db)
    thread.join()
    assert not errors, errors
    assert pruned.returncode == 0 and "Pruned 5 sessions" in pruned.stdout, pruned.stderr
    assert renamed.returncode == 0, renamed.stderr
    assert len(proxy.transcript("steady")) == 60
    assert rows(proxy, "SELECT key, title FROM sessions")[0][:] == ("steady", "Steady")
