"""``/api/sessions`` and ``/api/search`` on a real server: every endpoint, ids, pagination."""

from __future__ import annotations

import orjson
import pytest

from tests.conftest import Proxy, ProxyFactory
from tests.fake_upstream import FakeUpstream
from tests.session_helpers import api, rows, say, session_path


def test_list_newest_first_with_source_filter_and_limit(proxy: Proxy) -> None:
    say(proxy, "a", "hello from telegram", source="telegram", user_id="u-1")
    say(proxy, "b", "hello from discord", source="discord")
    say(proxy, "c", "hello from the api")
    with api(proxy) as client:
        listing = client.get("/api/sessions").json()
        assert [s["key"] for s in listing["data"]] == ["c", "b", "a"]
        assert listing["has_more"] is False and listing["next_cursor"] is None
        first = listing["data"][2]
        assert first["source"] == "telegram" and first["user_id"] == "u-1"
        assert first["message_count"] == 2 and first["live"] is True
        assert first["model"] == proxy.settings.model
        only = client.get("/api/sessions", params={"source": "discord"}).json()["data"]
        assert [s["key"] for s in only] == ["b"]
        assert [s["key"] for s in client.get("/api/sessions?limit=1").json()["data"]] == ["c"]
        bad = client.get("/api/sessions?limit=0")
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "limit"
        bad = client.get("/api/sessions?cursor=nonsense")
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "cursor"


def test_cursor_pagination_is_stable_while_sessions_are_added(proxy: Proxy) -> None:
    # Many sessions in the same second exercise the id tie-break of the cursor.
    with proxy.db() as conn:
        conn.executemany(
            "INSERT INTO sessions (id, tenant, key, started_at, updated_at) VALUES (?, ?, ?, ?, ?)",
            [
                (f"20250101_000000_{i:08x}", "default", f"k{i}", 1000.0 + i // 10, 1.0)
                for i in range(45)
            ],
        )
    seen: list[str] = []
    with api(proxy) as client:
        cursor = None
        while True:
            params = {"limit": 10, **({"cursor": cursor} if cursor else {})}
            page = client.get("/api/sessions", params=params).json()
            seen += [s["id"] for s in page["data"]]
            if len(seen) == 10:
                say(proxy, "newcomer", "I arrive between two pages")
            if not page["has_more"]:
                break
            cursor = page["next_cursor"]
    expected = sorted((1000.0 + i // 10, f"20250101_000000_{i:08x}") for i in range(45))
    assert seen == [session_id for _, session_id in reversed(expected)]


def test_inspect_shows_counters_and_what_the_session_remembers(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    with make_proxy(budget=400) as proxy:
        say(proxy, "mem", "Our database is PostgreSQL 15 on RDS.")
        for i in range(12):
            say(proxy, "mem", f"Tell me something about topic number {i} please.")
        with api(proxy) as client:
            detail = client.get(session_path("mem")).json()
    assert detail["object"] == "session" and detail["key"] == "mem"
    memory = detail["memory"]
    assert any("PostgreSQL 15" in f["text"] for f in memory["facts"])
    assert memory["through_seq"] > 0 and memory["tokens"] > 0 and memory["version"] >= 1
    assert detail["window"]["messages"] == 26 - memory["through_seq"]
    assert detail["window"]["tokens"] > 0
    tokens = detail["tokens"]
    assert tokens["input"] == 13 * 11 and tokens["output"] == 13 * 7  # the fake's usage
    assert tokens["saved"] == tokens["full_history"] - tokens["sent"] > 0
    assert detail["pending_turns"] == 0 and detail["system_prompt"] == []


def test_ids_resolve_by_key_id_and_unique_prefix(proxy: Proxy) -> None:
    say(proxy, "repo:acme/backend", "first")
    say(proxy, "repo:acme/frontend", "second")
    with api(proxy) as client:
        by_key = client.get(session_path("repo:acme/backend")).json()
        session_id = by_key["id"]
        assert client.get(session_path(session_id)).json()["key"] == "repo:acme/backend"
        assert client.get(session_path(session_id[:-3])).json()["id"] == session_id
        assert client.get(session_path("repo:acme/f")).json()["key"] == "repo:acme/frontend"
        ambiguous = client.get(session_path("repo:acme/"))
        assert ambiguous.status_code == 409
        error = ambiguous.json()["error"]
        assert error["code"] == "ambiguous_session_id"
        assert "repo:acme/backend" in error["message"] and "repo:acme/frontend" in error["message"]
        missing = client.get(session_path("nothing-like-this"))
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "session_not_found"
        # The key wins over an id prefix: a live key is matched exactly first.
        say(proxy, session_id[:8], "a session keyed like a prefix")
        assert client.get(session_path(session_id[:8])).json()["key"] == session_id[:8]


def test_rename_messages_and_delete(proxy: Proxy, upstream: FakeUpstream) -> None:
    for i in range(3):
        say(proxy, "doomed", f"unforgettable zebra message {i}")
    with api(proxy) as client:
        renamed = client.patch(session_path("doomed"), json={"title": "Zebras"}).json()
        assert renamed["title"] == "Zebras"
        assert client.patch(session_path("doomed"), json={"title": 3}).status_code == 400
        assert client.patch(session_path("doomed"), json={}).status_code == 400

        page = client.get(session_path("doomed", "/messages"), params={"limit": 4}).json()
        assert [m["seq"] for m in page["data"]] == [1, 2, 3, 4] and page["has_more"]
        rest = client.get(
            session_path("doomed", "/messages"), params={"after": page["next_after"]}
        ).json()
        assert [m["role"] for m in rest["data"]] == ["user", "assistant"] and not rest["has_more"]
        assert rest["data"][0]["content"] == "unforgettable zebra message 2"

        session_id = renamed["id"]
        deleted = client.delete(session_path("doomed"))
        assert deleted.json() == {"id": session_id, "object": "session.deleted", "deleted": True}
        assert client.get(session_path(session_id)).status_code == 404
    assert rows(proxy, "SELECT * FROM messages WHERE session_id = ?", session_id) == []
    assert rows(proxy, "SELECT * FROM session_state WHERE session_id = ?", session_id) == []
    with api(proxy) as client:
        assert client.get("/api/search", params={"q": "zebra"}).json()["data"] == []
    if proxy.backend == "sqlite":
        # The search (which applies what the indexer has not yet) made the index forget them.
        assert rows(proxy, "SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'zebra'") == []
    # The key starts afresh on the next turn.
    say(proxy, "doomed", "again")
    assert [m["content"] for m in upstream.chats[-1].messages] == ["again"]


def test_export_streams_jsonl_with_tool_calls(proxy: Proxy, upstream: FakeUpstream) -> None:
    from tests.fake_upstream import Reply

    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    upstream.script.append(Reply(tool_calls=[call]))
    say(proxy, "tools", "call the tool")
    with proxy.client() as client:
        client.chat.completions.create(
            model="hermes",
            messages=[{"role": "tool", "tool_call_id": "call_1", "content": "42"}],
            extra_headers={"X-Hermes-Session-Id": "tools"},
        )
    proxy.settle()
    with api(proxy) as client:
        response = client.get(session_path("tools", "/export"))
    assert response.headers["content-type"].startswith("application/x-ndjson")
    lines = response.content.splitlines()
    assert len(lines) == 1
    line = orjson.loads(lines[0])
    assert line["format"] == "hermes-session/1" and line["key"] == "tools"
    roles = [(m["role"], m["tool_calls"], m["tool_call_id"]) for m in line["messages"]]
    assert roles == [
        ("user", None, None),
        ("assistant", [call], None),
        ("tool", None, "call_1"),
        ("assistant", None, None),
    ]


def test_search_groups_by_session_best_first_with_excerpts(proxy: Proxy) -> None:
    say(proxy, "ops", "We deploy docker containers to kubernetes every Friday.")
    say(proxy, "ops", "The docker registry is slow; docker builds take ages.")
    say(proxy, "misc", "I once read a long novel about a docker who worked at the port.")
    say(proxy, "langs", "I write python, not java, for the data pipeline.")
    with api(proxy) as client:
        found = client.get("/api/search", params={"q": "docker"}).json()
        keys = [hit["session"]["key"] for hit in found["data"]]
        assert keys == ["ops", "misc"]  # grouped: one entry per session, best first
        ops = found["data"][0]
        # Each turn stores the question and the fake's echo of it.
        assert ops["hits"] == 4 and ops["score"] > found["data"][1]["score"]
        assert all("**docker**" in e["text"] for e in ops["excerpts"])
        assert len(ops["excerpts"]) == 2

        def keys_for(query: str, **params: str) -> list[str]:
            result = client.get("/api/search", params={"q": query, **params}).json()
            return [hit["session"]["key"] for hit in result["data"]]

        assert keys_for('"docker builds"') == ["ops"]
        assert sorted(keys_for("kubernetes OR novel")) == ["misc", "ops"]
        assert keys_for("python NOT java") == []
        assert keys_for("python NOT kubernetes") == ["langs"]
        assert keys_for("kube*") == ["ops"]
        assert keys_for("docker", limit="1") == ["ops"]


@pytest.mark.parametrize("query", ["C++", '"unterminated', "hello AND", "gpt-4o", "NOT", "a:b"])
def test_malformed_search_queries_never_crash(proxy: Proxy, query: str) -> None:
    say(proxy, "q", "hello, an unterminated C++ string broke gpt-4o and the a:b ratio")
    with api(proxy) as client:
        response = client.get("/api/search", params={"q": query})
    if query == "NOT":
        # Nothing left to search for: a clear 400, not a 500.
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "invalid_query"
        return
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["rewritten"] is True
    assert [hit["session"]["key"] for hit in result["data"]] == ["q"]


# Refused before the store is asked anything: a PostgreSQL twin would prove nothing more.
@pytest.mark.parametrize("backend", ["sqlite"])
def test_empty_query_is_a_clear_error(proxy: Proxy) -> None:
    with api(proxy) as client:
        response = client.get("/api/search", params={"q": "  "})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "q"
