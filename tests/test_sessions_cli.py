"""``hermes-proxy sessions …`` through click's runner, on the database a live server uses."""

from __future__ import annotations

import os
import pty
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import orjson

from proxy.store.space import PRUNED_TABLES
from tests.conftest import Proxy, ProxyFactory
from tests.fake_upstream import FakeUpstream, Reply
from tests.session_helpers import api, cli, rows, say, session_path

DAY = 86400.0


def db_of(proxy: Proxy) -> list[str]:
    return ["--db", proxy.settings.db]


def test_list_is_an_aligned_table_newest_first_with_ended_marked(proxy: Proxy) -> None:
    say(proxy, "repo:acme/backend", "hello", source="telegram")
    say(proxy, "second", "hello")
    with api(proxy) as client:
        client.post(session_path("repo:acme/backend", "/reset"))
    result = cli("sessions", "list", *db_of(proxy))
    assert result.exit_code == 0, result.output
    header, rule, *lines = result.output.splitlines()
    assert header.split() == ["ID", "Source", "Model", "Messages", "Started", "Key", "/", "Title"]
    assert set(rule) == {"─"}
    assert len(lines) == 3
    starts = [header.index(name) for name in ("Source", "Model", "Started")]
    for line in lines:
        assert all(line[i - 1] == " " and line[i] != " " for i in starts), line
    newest, middle, oldest = lines
    assert "telegram" in newest and "(ended)" not in newest and newest.endswith("repo:acme/backend")
    assert newest.split()[3] == "0"
    assert "api" in middle and middle.split()[3] == "2"
    assert "(ended)" in oldest and oldest.split()[3] == "2"
    assert proxy.settings.model in oldest

    only = cli("sessions", "list", "--source", "telegram", "--limit", "1", *db_of(proxy))
    assert len(only.output.splitlines()) == 3
    json_lines = cli("sessions", "list", "--json", *db_of(proxy)).output.splitlines()
    assert [orjson.loads(line)["key"] for line in json_lines][1] == "second"
    other = cli("sessions", "list", "--tenant", "globex", *db_of(proxy))
    assert "No sessions for tenant 'globex'. Tenants with sessions: default" in other.output


def test_show_prints_counters_and_memory(make_proxy: ProxyFactory) -> None:
    with make_proxy(budget=400) as proxy:
        say(proxy, "mem", "Our database is PostgreSQL 15 on RDS.", user_id="u-7")
        for i in range(12):
            say(proxy, "mem", f"Tell me something about topic number {i} please.")
        result = cli("sessions", "show", "mem", *db_of(proxy))
        detail = orjson.loads(cli("sessions", "show", "mem", "--json", *db_of(proxy)).output)
    assert result.exit_code == 0, result.output
    out = result.output
    assert f"Session    {detail['id']}" in out and "user u-7" in out
    assert "Messages   26 in 13 turns" in out
    assert "input 143 · output 91" in out  # the fake upstream's usage, 13 turns
    assert "- Our database is PostgreSQL 15 on RDS. (turn 1)" in out
    assert f"Window     {detail['window']['messages']} messages" in out
    saved = detail["tokens"]["saved"]
    assert saved > 0 and f"(saved {saved:,})" in out


def test_unknown_and_ambiguous_ids_exit_2_with_a_clear_message(proxy: Proxy) -> None:
    say(proxy, "alpha-1", "x")
    say(proxy, "alpha-2", "y")
    ambiguous = cli("sessions", "show", "alpha", *db_of(proxy))
    assert ambiguous.exit_code == 2
    assert "ambiguous" in ambiguous.output and "alpha-1" in ambiguous.output
    assert "alpha-2" in ambiguous.output
    missing = cli("sessions", "show", "beta", *db_of(proxy))
    assert missing.exit_code == 2 and "No session 'beta'" in missing.output
    assert cli("sessions", "show", "alpha-2", *db_of(proxy)).exit_code == 0
    nowhere = cli("sessions", "list", "--db", str(Path(proxy.settings.db).parent / "none.db"))
    assert nowhere.exit_code == 1 and "No database at" in nowhere.output


def test_the_database_defaults_to_the_one_serve_uses(proxy: Proxy, tmp_path: Path) -> None:
    say(proxy, "defaults", "hello")
    env = {"HERMES_DB": proxy.settings.db}
    assert "defaults" in cli("sessions", "list", env=env).output
    config = tmp_path / "hermes.toml"
    config.write_text(f'db = "{proxy.settings.db}"\n')
    assert "defaults" in cli("sessions", "list", "--config", str(config)).output
    home = Path(os.environ["HERMES_HOME"])  # the suite points HERMES_HOME at a temporary dir
    home.mkdir(parents=True, exist_ok=True)
    (home / "state.db").write_bytes(b"")
    assert "No sessions" in cli("sessions", "list").output


def test_search_groups_by_session_and_survives_malformed_queries(proxy: Proxy) -> None:
    say(proxy, "ops", "We deploy docker to kubernetes; C++ services too.")
    say(proxy, "misc", "A docker at the port.")
    found = cli("sessions", "search", "docker OR kubernetes", *db_of(proxy))
    assert found.exit_code == 0
    lines = found.output.splitlines()
    assert lines[0] == "2 sessions match 'docker OR kubernetes'"
    ids = [line.split()[0] for line in lines if line and not line.startswith((" ", "2 "))]
    assert len(ids) == 2 and "ops" in found.output.split("\n\n")[1]
    assert "**docker**" in found.output
    one = cli("sessions", "search", "docker", "--limit", "1", *db_of(proxy))
    assert one.output.startswith("1 session matches 'docker'")
    for query in ("C++", '"unterminated', "hello AND", "deploy*"):
        result = cli("sessions", "search", query, *db_of(proxy))
        assert result.exit_code == 0, (query, result.output)
    assert "searched as plain words" in cli("sessions", "search", "C++", *db_of(proxy)).output
    nothing = cli("sessions", "search", "AND", *db_of(proxy))
    assert nothing.exit_code == 2 and "no words to search for" in nothing.output


def test_rename_and_delete_with_confirmation(proxy: Proxy) -> None:
    say(proxy, "keep-me", "hello")
    assert cli("sessions", "rename", "keep", "Kept", *db_of(proxy)).exit_code == 0
    assert rows(proxy, "SELECT title FROM sessions")[0][0] == "Kept"
    refused = cli("sessions", "delete", "keep-me", *db_of(proxy), input="n\n")
    assert refused.exit_code == 1 and "Delete session" in refused.output
    assert len(rows(proxy, "SELECT * FROM sessions")) == 1
    agreed = cli("sessions", "delete", "keep-me", *db_of(proxy), input="y\n")
    assert agreed.exit_code == 0 and "Deleted session" in agreed.output
    assert rows(proxy, "SELECT * FROM sessions") == []
    assert rows(proxy, "SELECT * FROM messages") == []
    say(proxy, "other", "hello")
    assert cli("sessions", "delete", "other", "--yes", *db_of(proxy)).exit_code == 0


def age(proxy: Proxy, key: str, *, started_days: float, ended_days: float | None) -> None:
    now = time.time()
    with proxy.db() as conn:
        conn.execute(
            "UPDATE sessions SET started_at = ?, updated_at = ?, ended_at = ? WHERE key = ?",
            (
                now - started_days * DAY,
                now - started_days * DAY,
                None if ended_days is None else now - ended_days * DAY,
                key,
            ),
        )


def test_prune_deletes_only_old_ended_sessions(proxy: Proxy) -> None:
    for key, source in (("old-live", "api"), ("old-ended", "api"), ("recent", "api")):
        say(proxy, key, f"message of {key}", source=source)
    say(proxy, "old-telegram", "message", source="telegram")
    age(proxy, "old-live", started_days=400, ended_days=None)  # active: never pruned
    age(proxy, "old-ended", started_days=200, ended_days=100)
    age(proxy, "recent", started_days=200, ended_days=10)
    age(proxy, "old-telegram", started_days=200, ended_days=100)

    nothing = cli("sessions", "prune", "--older-than", "365", *db_of(proxy))
    assert "Nothing to prune" in nothing.output
    only_api = cli("sessions", "prune", "--source", "api", "--yes", *db_of(proxy))
    assert only_api.exit_code == 0 and "Pruned 1 session;" in only_api.output
    assert sorted(r[0] for r in rows(proxy, "SELECT key FROM sessions")) == [
        "old-live",
        "old-telegram",
        "recent",
    ]
    refused = cli("sessions", "prune", "--older-than", "5", *db_of(proxy), input="n\n")
    assert "Delete 2 ended sessions older than 5 days (4 messages)?" in refused.output
    assert refused.exit_code == 1
    assert cli("sessions", "prune", "--older-than", "0", "--yes", *db_of(proxy)).exit_code == 0
    assert [r[0] for r in rows(proxy, "SELECT key FROM sessions")] == ["old-live"]
    # The live session keeps working.
    say(proxy, "old-live", "still here")


def on_disk(proxy: Proxy) -> int:
    """Bytes the session tables take: the SQLite file and its WAL, or the PostgreSQL
    tables a prune deletes from (with their TOAST tables and indexes)."""
    if proxy.backend == "postgresql":
        with proxy.db() as conn:
            return int(
                conn.execute(
                    "SELECT sum(pg_total_relation_size(t::regclass)) FROM unnest(?::text[]) AS t",
                    (list(PRUNED_TABLES),),
                ).fetchone()[0]
            )
    files = (proxy.settings.db, proxy.settings.db + "-wal")
    return sum(os.path.getsize(f) for f in files if os.path.exists(f))


def test_prune_gives_the_space_back(proxy: Proxy) -> None:
    # Words in random order: PostgreSQL compresses a repeated phrase to almost nothing.
    words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod".split()
    pick = random.Random(7).choice
    with proxy.db() as conn:
        if proxy.backend == "sqlite":
            assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental
        for i in range(60):
            session_id = f"20240101_000000_{i:08x}"
            conn.execute(
                "INSERT INTO sessions (id, tenant, key, started_at, updated_at, ended_at) "
                "VALUES (?, 'default', ?, 1.0, 1.0, 2.0)",
                (session_id, f"big{i}"),
            )
            conn.executemany(
                "INSERT INTO messages (session_id, seq, turn, role, content, token_count, "
                "created_at) VALUES (?, ?, 1, 'user', ?, 1, 1.0)",
                [
                    (session_id, seq, " ".join(pick(words) for _ in range(2000)))
                    for seq in range(1, 11)
                ],
            )
    say(proxy, "live", "hello")

    before = on_disk(proxy)
    result = cli("sessions", "prune", "--yes", *db_of(proxy))
    how = "incremental vacuum" if proxy.backend == "sqlite" else "vacuum"
    assert f"Pruned 60 sessions; space: {how}, " in result.output
    after = on_disk(proxy)
    assert after < before / 3, (before, after)
    say(proxy, "live", "the server still stores turns")
    assert len(proxy.transcript("live")) == 4


def test_export_delete_import_round_trip_is_identical(
    make_proxy: ProxyFactory, upstream: FakeUpstream, tmp_path: Path
) -> None:
    call = {"id": "call_9", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
    with make_proxy(budget=400) as proxy:
        with proxy.client() as client:
            client.chat.completions.create(
                model="hermes",
                messages=[
                    {"role": "system", "content": "You are terse."},
                    {"role": "user", "content": [{"type": "text", "text": "parts, please"}]},
                ],
                extra_headers={"X-Hermes-Session-Id": "rich", "X-Hermes-User-Id": "u1"},
            )
            upstream.script.append(Reply(tool_calls=[call]))
            say(proxy, "rich", "use the tool")
            client.chat.completions.create(
                model="hermes",
                messages=[{"role": "tool", "tool_call_id": "call_9", "content": "done"}],
                extra_headers={"X-Hermes-Session-Id": "rich"},
            )
        say(proxy, "rich", "Our database is PostgreSQL 15 on RDS.")
        for i in range(10):
            say(proxy, "rich", f"Filler question number {i} about nothing much.")
        with api(proxy) as http:
            http.post(session_path("rich", "/reset"))
            http.patch(session_path("rich"), json={"title": "After the reset"})
        say(proxy, "rich", "first message after the reset")
        say(proxy, "plain", "a second tenant-less session", source="slack")
        proxy.settle()

        first = tmp_path / "first.jsonl"
        assert cli("sessions", "export", str(first), *db_of(proxy)).exit_code == 0
        lines = first.read_bytes().splitlines()
        assert len(lines) == 3
        exported = [orjson.loads(line) for line in lines]
        assert exported[1]["parent_id"] == exported[0]["id"]
        assert exported[0]["memory"]["facts"] and exported[0]["system_prompt"]
        assert any(m["tool_calls"] for m in exported[0]["messages"])
        assert isinstance(exported[0]["messages"][0]["content"], list)

        for line in exported:
            assert cli("sessions", "delete", line["id"], "--yes", *db_of(proxy)).exit_code == 0
        assert rows(proxy, "SELECT COUNT(*) FROM messages")[0][0] == 0
        imported = cli("sessions", "import", str(first), *db_of(proxy))
        assert imported.exit_code == 0 and "Imported 3 sessions" in imported.output
        again = cli("sessions", "import", str(first), *db_of(proxy))
        assert "Imported 0 sessions" in again.output and "Skipped 3 already" in again.output

        second = tmp_path / "second.jsonl"
        cli("sessions", "export", str(second), *db_of(proxy))
        assert second.read_bytes() == first.read_bytes()
        # The search index was rebuilt for the imported messages.
        found = cli("sessions", "search", "PostgreSQL", *db_of(proxy))
        assert exported[0]["id"] in found.output

        to_stdout = cli("sessions", "export", "-", "--source", "slack", *db_of(proxy))
        assert [orjson.loads(x)["key"] for x in to_stdout.stdout.splitlines()] == ["plain"]
        one = cli("sessions", "export", "-", "--session-id", "rich", *db_of(proxy))
        assert [orjson.loads(x)["id"] for x in one.stdout.splitlines()] == [exported[1]["id"]]
        # The proxy carries on with the imported session.
        say(proxy, "rich", "Which database?")
        assert "PostgreSQL 15" in str(upstream.chats[-1].messages)


def test_import_rejects_a_malformed_line_naming_it(proxy: Proxy, tmp_path: Path) -> None:
    say(proxy, "ok", "hello")
    good = cli("sessions", "export", "-", *db_of(proxy)).stdout
    cli("sessions", "delete", "ok", "--yes", *db_of(proxy))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good + '{"format": "something else"}\n')
    result = cli("sessions", "import", str(bad), *db_of(proxy))
    assert result.exit_code == 2
    assert "line 2" in result.output and "1 sessions were imported before it" in result.output
    from_stdin = cli("sessions", "import", "-", *db_of(proxy), input="not json\n")
    assert from_stdin.exit_code == 2 and "line 1" in from_stdin.output


def test_stats(proxy: Proxy) -> None:
    for i in range(3):
        say(proxy, f"t{i}", "hello", source="telegram")
    say(proxy, "c", "hello", source="cli")
    result = cli("sessions", "stats", *db_of(proxy))
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[:4] == [
        "Total sessions: 4",
        "Total messages: 8",
        "telegram: 3 sessions (3 live)",
        "cli: 1 sessions (1 live)",
    ]
    # The SQLite file is small; a PostgreSQL database includes its catalogs (megabytes).
    unit = "KB" if proxy.backend == "sqlite" else "MB"
    assert re.fullmatch(rf"Database size: \d+\.\d {unit}", lines[4]), lines[4]
    assert lines[5].startswith("Tokens saved by compaction: 0 (sent ")


def test_export_shows_a_progress_bar_on_a_terminal(proxy: Proxy, tmp_path: Path) -> None:
    with proxy.db() as conn:
        conn.executemany(
            "INSERT INTO sessions (id, tenant, key, started_at, updated_at) "
            "VALUES (?, 'default', ?, 1.0, 1.0)",
            [(f"20240101_000000_{i:08x}", f"k{i}") for i in range(40)],
        )
    main_fd, terminal = pty.openpty()
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "proxy",
                "sessions",
                "export",
                str(tmp_path / "all.jsonl"),
                "--db",
                proxy.settings.db,
            ],
            stderr=terminal,
            stdout=subprocess.PIPE,
            timeout=60,
            check=True,
        )
        os.close(terminal)
        shown = b""
        while True:
            try:
                chunk = os.read(main_fd, 4096)
            except OSError:  # the terminal closed
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(main_fd)
    assert done.returncode == 0
    assert b"Exporting sessions" in shown and b"100%" in shown
    assert b"Exported 40 sessions" in shown
    assert len((tmp_path / "all.jsonl").read_bytes().splitlines()) == 40
    # Not on a pipe: only the summary line.
    piped = cli("sessions", "export", str(tmp_path / "again.jsonl"), *db_of(proxy))
    assert "Exporting" not in piped.output and "Exported 40 sessions" in piped.output


def test_prune_converts_an_old_database_to_incremental_vacuum(tmp_path: Path) -> None:
    """A database made before incremental vacuum existed gets one full VACUUM."""
    import sqlite3

    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:  # a table first: auto_vacuum can no longer change
        conn.execute("CREATE TABLE legacy (x)")
    cli("sessions", "import", "-", "--db", str(db), input="")
    big = "lorem ipsum dolor sit amet " * 400
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
        for i in range(40):
            conn.execute(
                "INSERT INTO sessions (id, tenant, key, started_at, updated_at, ended_at) "
                "VALUES (?, 'default', ?, 1.0, 1.0, 2.0)",
                (f"s{i}", f"k{i}"),
            )
            conn.executemany(
                "INSERT INTO messages (session_id, seq, turn, role, content, token_count, "
                "created_at) VALUES (?, ?, 1, 'user', ?, 1, 1.0)",
                [(f"s{i}", seq, big) for seq in range(1, 11)],
            )

    def on_disk() -> int:
        return sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())

    before = on_disk()
    result = cli("sessions", "prune", "--yes", "--db", str(db))
    assert "Pruned 40 sessions; space: vacuum (incremental vacuum is on from now on)" in (
        result.output
    )
    after = on_disk()
    assert after < before / 3, (before, after)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
