"""Every error is OpenAI's envelope with the right status, and leaves no half turn."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests import http
from tests.conftest import Proxy, ProxyFactory
from tests.fake_upstream import FakeUpstream, Reply
from tests.servers import free_port

SESSION = "errors"


def post(
    proxy: Proxy, body: Any, *, raw: bytes | None = None, headers: dict[str, str] | None = None
) -> httpx.Response:
    headers = {"X-Hermes-Session-Id": SESSION, **(headers or {})}
    if raw is not None:
        return http.post(f"{proxy.v1}/chat/completions", content=raw, headers=headers, timeout=30)
    return http.post(f"{proxy.v1}/chat/completions", json=body, headers=headers, timeout=30)


def user(text: str) -> dict[str, Any]:
    return {"model": "hermes", "messages": [{"role": "user", "content": text}]}


def assert_envelope(
    response: httpx.Response, status: int, code: str | None = None
) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    if code is not None:
        assert error["code"] == code
    return error  # type: ignore[no-any-return]


@pytest.fixture
def seeded(proxy: Proxy) -> Proxy:
    """A session with one stored turn, so "unchanged" means something."""
    assert post(proxy, user("hello")).status_code == 200
    return proxy


def unchanged(proxy: Proxy) -> None:
    rows = proxy.transcript(SESSION)
    assert [(r["role"], r["content"]) for r in rows] == [
        ("user", "hello"),
        ("assistant", "answer to: hello"),
    ]
    assert proxy.pending() == []


# Refused before the store is asked anything: a PostgreSQL twin would prove nothing more.
@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "hermes"}, "messages"),
        ({"model": "hermes", "messages": []}, "messages"),
        ({"model": "hermes", "messages": "hi"}, "messages"),
        ({"model": "hermes", "messages": ["hi"]}, "messages[0]"),
        ({"model": "hermes", "messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
        ({"model": "hermes", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"model": "hermes", "messages": [{"role": "user"}]}, "messages[0].content"),
        (
            {"model": "hermes", "messages": [{"role": "tool", "content": "x"}]},
            "messages[0].tool_call_id",
        ),
        ({"model": 7, "messages": [{"role": "user", "content": "x"}]}, "model"),
        (
            {"model": "hermes", "stream": "yes", "messages": [{"role": "user", "content": "x"}]},
            "stream",
        ),
    ],
)
def test_invalid_bodies(seeded: Proxy, body: Any, param: str) -> None:
    error = assert_envelope(post(seeded, body), 400)
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    unchanged(seeded)


# Refused before the store is asked anything: a PostgreSQL twin would prove nothing more.
@pytest.mark.parametrize("backend", ["sqlite"])
def test_malformed_json(seeded: Proxy) -> None:
    error = assert_envelope(post(seeded, None, raw=b'{"messages": ['), 400)
    assert "JSON" in error["message"]
    assert_envelope(post(seeded, None, raw=b"[1, 2]"), 400)
    unchanged(seeded)


# Refused before the store is asked anything: a PostgreSQL twin would prove nothing more.
@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize("session_id", ["", "x" * 257, "tab\there"])
def test_invalid_session_id(seeded: Proxy, session_id: str) -> None:
    response = post(seeded, user("x"), headers={"X-Hermes-Session-Id": session_id})
    assert_envelope(response, 400, "invalid_session_id")
    unchanged(seeded)


def test_body_over_the_limit_is_413(make_proxy: ProxyFactory) -> None:
    with make_proxy(max_body_bytes=2000) as proxy:
        assert post(proxy, user("hello")).status_code == 200
        assert_envelope(post(proxy, user("x" * 5000)), 413, "request_too_large")
        unchanged(proxy)


def test_unknown_client_key_is_401(make_proxy: ProxyFactory) -> None:
    with make_proxy(api_key=("good-key:acme",)) as proxy:
        ok = post(proxy, user("hello"), headers={"Authorization": "Bearer good-key"})
        assert ok.status_code == 200
        assert_envelope(
            post(proxy, user("x"), headers={"Authorization": "Bearer bad-key"}),
            401,
            "invalid_api_key",
        )
        assert_envelope(post(proxy, user("x")), 401, "invalid_api_key")
        assert [r["content"] for r in proxy.transcript(SESSION, tenant="acme")] == [
            "hello",
            "answer to: hello",
        ]


def test_context_length_exceeded(make_proxy: ProxyFactory) -> None:
    with make_proxy(budget=300) as proxy:
        assert post(proxy, user("hello")).status_code == 200
        error = assert_envelope(post(proxy, user("word " * 400)), 400, "context_length_exceeded")
        assert "300" in error["message"]
        unchanged(proxy)


@pytest.mark.parametrize(
    ("backend", "stream", "status"),
    [
        *[
            ("sqlite", stream, status)
            for stream in (False, True)
            for status in (400, 401, 429, 500, 503)
        ],
        # The store sees the same failed turn whatever the status: PostgreSQL once per mode.
        pytest.param("postgresql", False, 500, marks=pytest.mark.postgres),
        pytest.param("postgresql", True, 500, marks=pytest.mark.postgres),
    ],
)
def test_upstream_status_is_relayed(
    seeded: Proxy, upstream: FakeUpstream, status: int, stream: bool
) -> None:
    body = b'{"error": {"message": "upstream says no", "type": "x", "param": null, "code": "nope"}}'
    upstream.script.append(Reply(status=status, body=body))
    response = post(seeded, {**user("fails"), "stream": stream})
    assert response.status_code == status
    assert response.content == body
    unchanged(seeded)


def test_upstream_unreachable_is_502(make_proxy: ProxyFactory) -> None:
    with make_proxy(upstream=f"http://127.0.0.1:{free_port()}/v1") as proxy:
        error = assert_envelope(post(proxy, user("anyone there?")), 502, "upstream_unreachable")
        assert error["type"] == "upstream_error"
        assert proxy.transcript(SESSION) == []
        assert proxy.pending() == []


def test_upstream_timeout_is_504(make_proxy: ProxyFactory, upstream: FakeUpstream) -> None:
    with make_proxy(upstream_timeout=0.3) as proxy:
        assert post(proxy, user("hello")).status_code == 200
        upstream.script.append(Reply(content="too late", delay=2.0))
        assert_envelope(post(proxy, user("slow")), 504, "upstream_timeout")
        unchanged(proxy)


@pytest.mark.parametrize(
    "reply",
    [
        Reply(content="partial answer here", break_after=2),
        Reply(content="partial answer here", error_frame_after=2),
        Reply(content="partial answer here", truncate=True),
    ],
    ids=["connection-drop", "error-frame", "no-done"],
)
def test_mid_stream_failure_ends_with_error_frame_and_done(
    seeded: Proxy, upstream: FakeUpstream, reply: Reply
) -> None:
    upstream.script.append(reply)
    response = post(seeded, {**user("stream then fail"), "stream": True})
    assert response.status_code == 200
    frames = [f for f in response.text.split("\n\n") if f.strip()]
    assert frames[-1] == "data: [DONE]"
    assert '"error"' in frames[-2]
    unchanged(seeded)


def test_client_disconnect_mid_stream_cancels_and_stores_nothing(
    seeded: Proxy, upstream: FakeUpstream
) -> None:
    upstream.script.append(Reply(content="a long answer " * 20, chunk_delay=0.2))
    with http.stream(
        "POST",
        f"{seeded.v1}/chat/completions",
        json={**user("long one"), "stream": True},
        headers={"X-Hermes-Session-Id": SESSION},
        timeout=30,
    ) as response:
        for _ in response.iter_bytes():
            break
    # The proxy notices the disconnect asynchronously; give it a moment.
    deadline = time.monotonic() + 5
    while seeded.pending() and time.monotonic() < deadline:
        time.sleep(0.02)
    unchanged(seeded)
    # The session is usable right after.
    assert post(seeded, user("again")).status_code == 200
