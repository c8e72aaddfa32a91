"""Runs on threads, end to end on real sockets: events, steering, tools, cancel, retries."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from tests.conftest import Proxy, ProxyFactory
from tests.fake_upstream import FakeUpstream, Reply
from tests.sse_client import EventStream, terminal

ANSWER = "The capital of France is Paris, a city on the Seine."


@contextmanager
def api(proxy: Proxy, key: str | None = None) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with httpx.Client(base_url=proxy.v1, timeout=20, headers=headers) as client:
        yield client


def new_thread(http: httpx.Client, **fields: object) -> str:
    response = http.post("/threads", json=fields)
    assert response.status_code == 200, response.text
    thread_id: str = response.json()["thread_id"]
    return thread_id


def test_a_run_reports_its_status_and_streams_the_answer(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    upstream.script.append(Reply(content=ANSWER, chunk_delay=0.08))
    with make_proxy() as proxy, api(proxy) as http:
        thread = new_thread(http, title="Geography")
        posted = http.post(f"/threads/{thread}/messages", json={"content": "Capital of France?"})
        assert posted.status_code == 202, posted.text
        run_id = posted.json()["run_id"]
        assert posted.json()["status"] == "running"
        with EventStream(http, f"/threads/{thread}/events") as stream:
            events = stream.until(terminal(run_id))

        assert [e.id for e in events] == list(range(1, len(events) + 1))
        statuses = [e.data["status"] for e in events if e.type == "run_status"]
        assert statuses == ["running", "completed"]
        deltas = [e for e in events if e.type == "message.delta"]
        assert len(deltas) >= 2
        (completed,) = [e for e in events if e.type == "message.completed"]
        assert "".join(e.data["content"] for e in deltas) == ANSWER
        assert completed.data["message"]["content"] == ANSWER
        assert [e.type for e in events][:2] == ["run_status", "message.received"]

        transcript = http.get(f"/threads/{thread}/messages").json()["data"]
        assert [(m["role"], m["content"]) for m in transcript] == [
            ("user", "Capital of France?"),
            ("assistant", ANSWER),
        ]
        run = http.get(f"/threads/{thread}/runs/{run_id}").json()
        assert (run["status"], run["step"], run["error"]) == ("completed", 1, None)
        (call,) = upstream.chats
        assert call.body["stream"] is True
        assert call.messages[-1] == {"role": "user", "content": "Capital of France?"}


def wait_for_status(
    http: httpx.Client, thread: str, run_id: str, *statuses: str
) -> dict[str, object]:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        run: dict[str, object] = http.get(f"/threads/{thread}/runs/{run_id}").json()
        if run["status"] in statuses:
            return run
        time.sleep(0.02)
    raise TimeoutError(f"run {run_id} never reached {statuses}")


def test_reconnecting_with_last_event_id_replays_exactly_the_missed_events(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    upstream.script.append(Reply(content=ANSWER, chunk_delay=0.08))
    with make_proxy() as proxy, api(proxy) as http:
        thread = new_thread(http)
        url = f"/threads/{thread}/events"
        run_id = http.post(f"/threads/{thread}/messages", json={"content": "Hi"}).json()["run_id"]
        with EventStream(http, url) as stream:
            first = stream.take(3)
            assert stream.retry == 1000
        # Disconnected; the run goes on without the client.
        wait_for_status(http, thread, run_id, "completed")
        with EventStream(http, url, headers={"Last-Event-ID": str(first[-1].id)}) as stream:
            missed = stream.until(terminal(run_id))
        with EventStream(http, f"{url}?after={first[-1].id}") as stream:
            by_query = stream.until(terminal(run_id))
        with EventStream(http, url) as stream:
            everything = stream.until(terminal(run_id))

    assert missed[0].id == first[-1].id + 1
    assert [(e.id, e.type, e.data) for e in first + missed] == [
        (e.id, e.type, e.data) for e in everything
    ]
    assert [(e.id, e.data) for e in by_query] == [(e.id, e.data) for e in missed]


def test_an_idle_stream_sends_keep_alive_comments(make_proxy: ProxyFactory) -> None:
    with (
        make_proxy(events_keepalive=0.2) as proxy,
        api(proxy) as http,
        EventStream(http, "/threads/default/events") as stream,
    ):
        frames = stream.frames()
        comments = [next(frames) for _ in range(3)]
    assert comments == ["connected", "keep-alive", "keep-alive"]


def test_a_steering_message_joins_the_running_run(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    upstream.script.append(
        Reply(content="Drafting a plan for the hero video now.", chunk_delay=0.25)
    )
    upstream.script.append(Reply(content="Noted: the video will be 30 seconds."))
    with make_proxy() as proxy, api(proxy) as http:
        thread = new_thread(http)
        url = f"/threads/{thread}/events"
        first = http.post(f"/threads/{thread}/messages", json={"content": "Plan the hero video."})
        run_id = first.json()["run_id"]
        with EventStream(http, url) as stream:
            stream.until(lambda e: e.type == "message.delta")
            steer = http.post(
                f"/threads/{thread}/messages", json={"content": "Make it 30 seconds, not 60."}
            )
            events = stream.until(terminal(run_id))

        assert steer.status_code == 202
        assert steer.json()["run_id"] == run_id
        assert steer.json()["steering"] is True
        received = [e for e in events if e.type == "message.received"]
        assert [(e.data["message"]["content"], e.data["steering"]) for e in received] == [
            ("Make it 30 seconds, not 60.", True)
        ]
        assert [e.data["step"] for e in events if e.type == "message.completed"] == [0, 1]
        assert [e.data["status"] for e in events if e.type == "run_status"] == ["completed"]

        first_call, second_call = upstream.chats
        assert "30 seconds" not in str(first_call.messages)
        assert second_call.messages[-1] == {
            "role": "user",
            "content": "Make it 30 seconds, not 60.",
        }
        assert second_call.messages[-2]["content"] == "Drafting a plan for the hero video now."
        transcript = http.get(f"/threads/{thread}/messages").json()["data"]
        assert [(m["role"], m["content"]) for m in transcript] == [
            ("user", "Plan the hero video."),
            ("assistant", "Drafting a plan for the hero video now."),
            ("user", "Make it 30 seconds, not 60."),
            ("assistant", "Noted: the video will be 30 seconds."),
        ]
        assert http.get(f"/threads/{thread}/runs").json()["data"][0]["step"] == 2
        assert len(http.get(f"/threads/{thread}/runs").json()["data"]) == 1


LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup_order",
        "parameters": {"type": "object", "properties": {"order": {"type": "integer"}}},
    },
}
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "lookup_order", "arguments": '{"order": 42}'},
}


def test_tool_calls_wait_on_a_human_then_resume_with_outputs(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    upstream.script.append(Reply(tool_calls=[CALL]))
    upstream.script.append(Reply(content="Order 42 ships tomorrow."))
    with make_proxy() as proxy, api(proxy) as http:
        thread = new_thread(http)
        url = f"/threads/{thread}/events"
        run_id = http.post(
            f"/threads/{thread}/messages",
            json={"content": "Where is order 42?", "tools": [LOOKUP], "temperature": 0},
        ).json()["run_id"]
        with EventStream(http, url) as stream:
            waiting = stream.until(terminal(run_id))[-1]
        assert waiting.data["status"] == "waiting_on_human"
        assert waiting.data["required_action"]["tool_calls"][0]["id"] == "call_1"

        run = http.get(f"/threads/{thread}/runs/{run_id}").json()
        assert run["status"] == "waiting_on_human"
        assert run["required_action"]["type"] == "submit_tool_outputs"
        with proxy.db() as db:  # a waiting run is only a row: no lease, nobody executing it
            row = db.execute("SELECT lease_owner FROM runs WHERE id = ?", (run_id,)).fetchone()
        assert row["lease_owner"] is None

        for body, status in [
            ({"tool_outputs": [{"tool_call_id": "call_9", "output": "x"}]}, 400),
            ({"tool_outputs": []}, 400),
            ({"nonsense": 1}, 400),
        ]:
            response = http.post(f"/threads/{thread}/runs/{run_id}/input", json=body)
            assert response.status_code == status, response.text
            assert "error" in response.json()
        resumed = http.post(
            f"/threads/{thread}/runs/{run_id}/input",
            json={"tool_outputs": [{"tool_call_id": "call_1", "output": {"eta": "tomorrow"}}]},
        )
        assert resumed.status_code == 202, resumed.text
        assert resumed.json()["status"] == "running"
        with EventStream(http, f"{url}?after={waiting.id}") as stream:
            events = stream.until(terminal(run_id))
        assert [e.data["status"] for e in events if e.type == "run_status"] == [
            "running",
            "completed",
        ]
        again = http.post(
            f"/threads/{thread}/runs/{run_id}/input",
            json={"tool_outputs": [{"tool_call_id": "call_1", "output": "x"}]},
        )
        assert again.status_code == 409

        first_call, second_call = upstream.chats
        assert first_call.body["tools"] == [LOOKUP] and first_call.body["temperature"] == 0
        assert second_call.body["tools"] == [LOOKUP]
        assert second_call.messages[-2]["tool_calls"][0]["id"] == "call_1"
        assert second_call.messages[-1] == {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": '{"eta":"tomorrow"}',
        }
        transcript = http.get(f"/threads/{thread}/messages").json()["data"]
        assert [m["role"] for m in transcript] == ["user", "assistant", "tool", "assistant"]


def test_a_message_answers_a_waiting_run_instead_of_tool_outputs(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    upstream.script.append(Reply(tool_calls=[CALL]))
    with make_proxy() as proxy, api(proxy) as http:
        thread = new_thread(http)
        run_id = http.post(
            f"/threads/{thread}/messages", json={"content": "Where is order 42?", "tools": [LOOKUP]}
        ).json()["run_id"]
        wait_for_status(http, thread, run_id, "waiting_on_human")
        posted = http.post(f"/threads/{thread}/messages", json={"content": "Never mind, found it."})
        assert posted.json()["run_id"] == run_id
        wait_for_status(http, thread, run_id, "completed")
        second_call = upstream.chats[1]
        assert second_call.messages[-2]["role"] == "tool"
        assert second_call.messages[-2]["tool_call_id"] == "call_1"
        assert second_call.messages[-1] == {"role": "user", "content": "Never mind, found it."}


def test_cancel_stops_a_running_run_and_leaves_no_half_turn(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    upstream.script.append(Reply(content="A long answer that takes a while.", chunk_delay=0.5))
    with make_proxy() as proxy, api(proxy) as http:
        thread = new_thread(http)
        url = f"/threads/{thread}/events"
        run_id = http.post(f"/threads/{thread}/messages", json={"content": "Go"}).json()["run_id"]
        with EventStream(http, url) as stream:
            stream.until(lambda e: e.type == "message.delta")
            cancelled = http.post(f"/threads/{thread}/runs/{run_id}/cancel")
            events = stream.until(terminal(run_id))
        assert cancelled.status_code == 200
        assert cancelled.json()["status"] == "cancelled"
        assert events[-1].data["status"] == "cancelled"
        assert "message.completed" not in [e.type for e in events]
        assert http.post(f"/threads/{thread}/runs/{run_id}/cancel").status_code == 409
        proxy.settle()
        assert http.get(f"/threads/{thread}/messages").json()["data"] == []
        assert proxy.pending() == []

        # The thread is free again: the next message starts a new run.
        upstream.script.append(Reply(content="Fresh start."))
        again = http.post(f"/threads/{thread}/messages", json={"content": "Try again"}).json()
        assert again["run_id"] != run_id and again["steering"] is False
        wait_for_status(http, thread, again["run_id"], "completed")
        transcript = http.get(f"/threads/{thread}/messages").json()["data"]
        assert [m["content"] for m in transcript] == ["Try again", "Fresh start."]


def test_cancelling_a_waiting_run_answers_its_tool_calls_for_the_next_run(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    upstream.script.append(Reply(tool_calls=[CALL]))
    with make_proxy() as proxy, api(proxy) as http:
        thread = new_thread(http)
        run_id = http.post(
            f"/threads/{thread}/messages", json={"content": "Order 42?", "tools": [LOOKUP]}
        ).json()["run_id"]
        wait_for_status(http, thread, run_id, "waiting_on_human")
        assert http.post(f"/threads/{thread}/runs/{run_id}/cancel").json()["status"] == "cancelled"
        nxt = http.post(f"/threads/{thread}/messages", json={"content": "Something else"}).json()
        wait_for_status(http, thread, nxt["run_id"], "completed")
        call = upstream.chats[-1]
        assert [m["role"] for m in call.messages[-3:]] == ["assistant", "tool", "user"]
        assert call.messages[-2]["content"].startswith("No output")


def test_a_failing_upstream_is_retried_then_the_run_ends_in_error(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    upstream.script.extend(
        [Reply(status=500), Reply(status=503), Reply(content="Third time lucky.")]
    )
    with make_proxy(run_attempts=3, run_retry_delay=0.01) as proxy, api(proxy) as http:
        thread = new_thread(http)
        url = f"/threads/{thread}/events"
        run_id = http.post(f"/threads/{thread}/messages", json={"content": "Hi"}).json()["run_id"]
        with EventStream(http, url) as stream:
            events = stream.until(terminal(run_id))
        errors = [e.data for e in events if e.type == "error"]
        assert [(e["attempt"], e["retrying"]) for e in errors] == [(1, True), (2, True)]
        assert events[-1].data["status"] == "completed"
        assert len(upstream.chats) == 3
        assert [m["content"] for m in http.get(f"/threads/{thread}/messages").json()["data"]] == [
            "Hi",
            "Third time lucky.",
        ]

        upstream.script.extend([Reply(status=500), Reply(status=502), Reply(status=500)])
        run_id = http.post(f"/threads/{thread}/messages", json={"content": "Again"}).json()[
            "run_id"
        ]
        with EventStream(http, url) as stream:
            events = stream.until(terminal(run_id))
        assert events[-1].data["status"] == "error"
        run = http.get(f"/threads/{thread}/runs/{run_id}").json()
        assert run["status"] == "error"
        assert run["error"]["message"] == "The upstream answered 500: fake failure"
        errors = [e.data for e in events if e.type == "error" and e.data["run_id"] == run_id]
        assert [e["retrying"] for e in errors] == [True, True, False]
        assert len(upstream.chats) == 6
        proxy.settle()
        assert proxy.pending() == []


def test_an_upstream_refusal_is_not_retried(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    upstream.script.append(Reply(status=400))
    with make_proxy(run_retry_delay=0.01) as proxy, api(proxy) as http:
        thread = new_thread(http)
        run_id = http.post(f"/threads/{thread}/messages", json={"content": "Hi"}).json()["run_id"]
        run = wait_for_status(http, thread, run_id, "error")
        assert len(upstream.chats) == 1
        assert run["error"]["status"] == 400  # type: ignore[index]


def test_a_retried_post_with_an_idempotency_key_sends_the_message_once(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    with make_proxy() as proxy, api(proxy) as http:
        thread = new_thread(http)
        headers = {"Idempotency-Key": "msg-1"}
        first = http.post(f"/threads/{thread}/messages", json={"content": "Hi"}, headers=headers)
        second = http.post(f"/threads/{thread}/messages", json={"content": "Hi"}, headers=headers)
        assert second.json()["run_id"] == first.json()["run_id"]
        assert second.json()["input_id"] == first.json()["input_id"]
        assert second.json()["replayed"] is True
        wait_for_status(http, thread, first.json()["run_id"], "completed")
        third = http.post(f"/threads/{thread}/messages", json={"content": "Hi"}, headers=headers)
        assert third.json()["run_id"] == first.json()["run_id"]
        assert len(http.get(f"/threads/{thread}/messages").json()["data"]) == 2
        assert len(upstream.chats) == 1
