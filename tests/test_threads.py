"""Threads: sessions driven through /v1/threads — CRUD, the default thread, inherited facts,
tenant isolation."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from compaction.render import CHANGES_HEADING
from tests import http
from tests.conftest import Proxy, ProxyFactory
from tests.fake_upstream import FakeUpstream
from tests.sse_client import EventStream


@contextmanager
def api(proxy: Proxy, key: str | None = None) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with httpx.Client(base_url=proxy.v1, timeout=20, headers=headers) as client:
        yield client


def run_to_end(http: httpx.Client, thread: str, content: str) -> dict[str, object]:
    posted = http.post(f"/threads/{thread}/messages", json={"content": content})
    assert posted.status_code == 202, posted.text
    run_id = posted.json()["run_id"]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        run: dict[str, object] = http.get(f"/threads/{thread}/runs/{run_id}").json()
        if run["status"] != "running":
            return run
        time.sleep(0.02)
    raise TimeoutError(run_id)


def test_create_get_list_rename_delete(proxy: Proxy, upstream: FakeUpstream) -> None:
    with api(proxy) as http:
        created = http.post("/threads", json={"title": "Holiday campaign", "metadata": {"k": "v"}})
        assert created.status_code == 200, created.text
        thread = created.json()
        tid = thread["thread_id"]
        assert len(tid) == len("20250305_091523_a1b2c3d4") and tid[8] == "_"
        assert (thread["title"], thread["metadata"], thread["message_count"]) == (
            "Holiday campaign",
            {"k": "v"},
            0,
        )
        assert thread["active_run"] is None

        assert http.get(f"/threads/{tid}").json()["title"] == "Holiday campaign"
        assert http.get(f"/threads/{tid[:-3]}").json()["thread_id"] == tid  # a unique prefix
        renamed = http.patch(f"/threads/{tid}", json={"title": "Winter campaign"})
        assert renamed.json()["title"] == "Winter campaign"
        assert renamed.json()["metadata"] == {"k": "v"}
        with proxy.db() as db:
            row = db.execute("SELECT title, source FROM sessions WHERE key = ?", (tid,)).fetchone()
        assert (row["title"], row["source"]) == ("Winter campaign", "thread")

        others = [new["thread_id"] for new in (http.post("/threads").json() for _ in range(3))]
        listed = http.get("/threads", params={"limit": 2}).json()
        assert listed["has_more"] is True
        assert [t["thread_id"] for t in listed["data"]] == ["default", others[2]]
        rest = http.get("/threads", params={"after": listed["data"][-1]["thread_id"]}).json()
        assert [t["thread_id"] for t in rest["data"]] == [others[1], others[0], tid]
        assert rest["has_more"] is False
        after_default = http.get("/threads", params={"after": "default", "limit": 1}).json()
        assert [t["thread_id"] for t in after_default["data"]] == [others[2]]

        deleted = http.delete(f"/threads/{tid}")
        assert deleted.json() == {"thread_id": tid, "object": "thread.deleted", "deleted": True}
        missing = http.get(f"/threads/{tid}")
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "not_found"
        with proxy.db() as db:
            assert (
                db.execute("SELECT COUNT(*) FROM sessions WHERE key = ?", (tid,)).fetchone()[0] == 0
            )
    assert upstream.requests == []


def test_the_default_thread_exists_without_being_created(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    with api(proxy) as http:
        thread = http.get("/threads/default").json()
        assert (thread["thread_id"], thread["message_count"]) == ("default", 0)
        run = run_to_end(http, "default", "Hello")
        assert run["status"] == "completed"
        # A thread is a session: a chat completion under its id continues the same conversation.
        proxy.client().chat.completions.create(
            model="hermes",
            messages=[{"role": "user", "content": "And now via chat completions"}],
            extra_headers={"X-Hermes-Session-Id": "default"},
        )
        assert upstream.chats[-1].messages[-3]["content"] == "Hello"
        proxy.settle()  # a chat completion's answer is stored just after it is sent
        transcript = http.get("/threads/default/messages").json()["data"]
        assert [m["role"] for m in transcript] == ["user", "assistant", "user", "assistant"]


def test_a_new_thread_inherits_the_tenants_facts_but_not_the_conversation(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    with api(proxy) as http:
        run_to_end(http, "default", "My name is Alex. Our database is PostgreSQL 15 on RDS.")
        run_to_end(http, "default", "Let's talk about the weather for a bit")
        thread = http.post("/threads", json={"title": "Scoped"}).json()["thread_id"]
        run_to_end(http, thread, "Which database do we use?")
        sent = upstream.chats[-1].messages
        memory = [m["content"] for m in sent if m["role"] == "system"]
        assert any("PostgreSQL 15" in text and "My name is Alex" in text for text in memory)
        # Only the memory carries over: the earlier turns are not in the prompt.
        assert [m["role"] for m in sent] == ["system", "user"]
        assert "weather" not in str(sent)

        # A later fact about the same subject, in another thread, supersedes the earlier one.
        run_to_end(http, thread, "Our database is CockroachDB now.")
        third = http.post("/threads").json()["thread_id"]
        run_to_end(http, third, "Which database?")
        memory_text = upstream.chats[-1].messages[0]["content"]
        assert "Our database is CockroachDB now." in memory_text
        changes = memory_text.split(CHANGES_HEADING)[1]
        assert "Our database is PostgreSQL 15 on RDS." in changes


def test_tenants_never_see_each_others_threads(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    with (
        make_proxy(api_key=("alice-key:alice", "bob-key:bob")) as proxy,
        api(proxy, "alice-key") as alice,
        api(proxy, "bob-key") as bob,
    ):
        thread = alice.post("/threads", json={"title": "secret"}).json()["thread_id"]
        run = run_to_end(alice, thread, "My name is Alice and my password hint is tulip.")
        run_id = run["run_id"]
        for method, path, body in [
            ("GET", f"/threads/{thread}", None),
            ("PATCH", f"/threads/{thread}", {"title": "mine now"}),
            ("DELETE", f"/threads/{thread}", None),
            ("GET", f"/threads/{thread}/messages", None),
            ("POST", f"/threads/{thread}/messages", {"content": "hi"}),
            ("GET", f"/threads/{thread}/events", None),
            ("GET", f"/threads/{thread}/runs", None),
            ("GET", f"/threads/{thread}/runs/{run_id}", None),
            ("POST", f"/threads/{thread}/runs/{run_id}/cancel", None),
            ("POST", f"/threads/{thread}/runs/{run_id}/input", {"content": "hi"}),
        ]:
            response = bob.request(method, path, json=body)
            assert response.status_code == 404, (method, path, response.text)
        assert thread not in [t["thread_id"] for t in bob.get("/threads").json()["data"]]
        # Each tenant has its own default thread, and inherits only its own facts.
        run_to_end(bob, "default", "Hi")
        assert "tulip" not in str(upstream.chats[-1].messages)
        bob_thread = bob.post("/threads").json()["thread_id"]
        run_to_end(bob, bob_thread, "What is my password hint?")
        assert "tulip" not in str(upstream.chats[-1].messages)
        assert alice.get("/threads/default/messages").json()["data"] == []
        unauthenticated = http.get(f"{proxy.v1}/threads")
        assert unauthenticated.status_code == 401


def test_errors_use_the_openai_envelope_and_never_reach_the_upstream(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    with api(proxy) as http:
        thread = http.post("/threads").json()["thread_id"]
        cases = [
            ("POST", "/threads", {"titel": "typo"}, 400),
            ("POST", "/threads", {"metadata": {"k": 1}}, 400),
            ("POST", f"/threads/{thread}/messages", {"content": ""}, 400),
            ("POST", f"/threads/{thread}/messages", {"content": "x", "temprature": 1}, 400),
            ("POST", f"/threads/{thread}/messages", {"content": "x", "role": "system"}, 400),
            ("POST", f"/threads/{thread}/messages", {"content": [{"text": "no type"}]}, 400),
            ("GET", "/threads/nope", None, 404),
            ("GET", f"/threads/{thread}/runs/run_nope", None, 404),
            ("GET", f"/threads/{thread}/nowhere", None, 404),
            ("PUT", f"/threads/{thread}", None, 405),
            ("PUT", "/threads", None, 405),
            ("GET", "/threads?limit=0", None, 400),
            ("GET", "/threads/2", None, 400),  # a prefix of several thread ids
        ]
        http.post("/threads")
        for method, path, body, status in cases:
            response = http.request(method, path, json=body)
            assert response.status_code == status, (method, path, response.text)
            error = response.json()["error"]
            assert set(error) == {"message", "type", "param", "code"}
    assert upstream.requests == []


def test_messages_accept_content_parts_and_attachments(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    with api(proxy) as http:
        thread = http.post("/threads").json()["thread_id"]
        parts = [{"type": "text", "text": "Describe it."}, image]
        for body in (
            {"content": "What is in this picture?", "attachments": [image]},
            {"content": parts},
        ):
            posted = http.post(f"/threads/{thread}/messages", json=body)
            assert posted.status_code == 202
            deadline = time.monotonic() + 15
            while http.get(f"/threads/{thread}").json()["active_run"] is not None:
                assert time.monotonic() < deadline
                time.sleep(0.02)
        first, second = (call.messages[-1] for call in upstream.chats)
        assert first["content"] == [{"type": "text", "text": "What is in this picture?"}, image]
        assert second["content"] == parts
        stored = http.get(f"/threads/{thread}/messages").json()["data"]
        assert stored[2]["content"] == parts


def test_deleting_a_thread_ends_its_event_stream(proxy: Proxy) -> None:
    with api(proxy) as http:
        thread = http.post("/threads").json()["thread_id"]
        run_to_end(http, thread, "Hi")
        with EventStream(http, f"/threads/{thread}/events") as stream:
            stream.take(1)
            assert http.delete(f"/threads/{thread}").status_code == 200
            rest = list(stream.frames())  # ends instead of idling
        assert all(isinstance(frame, str) or frame.id > 1 for frame in rest)
