"""The official openai SDK, pointed at the proxy, sending only the new message."""

from __future__ import annotations

import json

import openai
import pytest

from tests.conftest import Proxy
from tests.fake_upstream import FakeUpstream, Reply

SESSION = {"X-Hermes-Session-Id": "user:alex"}


def ask(proxy: Proxy, text: str) -> str:
    response = proxy.client().chat.completions.create(
        model="hermes", messages=[{"role": "user", "content": text}], extra_headers=SESSION
    )
    return response.choices[0].message.content or ""


def test_sync_client_sends_only_the_new_message(proxy: Proxy, upstream: FakeUpstream) -> None:
    assert ask(proxy, "My name is Alex.") == "answer to: My name is Alex."
    assert ask(proxy, "What is my name?") == "answer to: What is my name?"

    sent = upstream.chats[-1].messages
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[0]["content"] == "My name is Alex."
    assert sent[1]["content"] == "answer to: My name is Alex."
    assert sent[2]["content"] == "What is my name?"
    assert upstream.chats[-1].body["model"] == proxy.settings.model


def test_response_headers(proxy: Proxy) -> None:
    raw = proxy.client().chat.completions.with_raw_response.create(
        model="hermes", messages=[{"role": "user", "content": "hi"}], extra_headers=SESSION
    )
    assert raw.headers["x-hermes-session-id"] == "user:alex"
    assert int(raw.headers["x-hermes-context-tokens"]) == 8  # 3 + "user" + "hi" + 3


@pytest.mark.anyio
async def test_async_client(proxy: Proxy, upstream: FakeUpstream) -> None:
    client = proxy.async_client()
    for text in ("first", "second"):
        response = await client.chat.completions.create(
            model="hermes", messages=[{"role": "user", "content": text}], extra_headers=SESSION
        )
        assert response.choices[0].message.content == f"answer to: {text}"
    await client.close()
    assert [m["content"] for m in upstream.chats[-1].messages] == [
        "first",
        "answer to: first",
        "second",
    ]


def test_streaming_relays_chunks_and_stores_the_answer(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    stream = proxy.client().chat.completions.create(
        model="hermes",
        messages=[{"role": "user", "content": "stream please"}],
        stream=True,
        stream_options={"include_usage": True},
        extra_headers=SESSION,
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "answer to: stream please"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 18
    rows = proxy.transcript("user:alex")
    assert [(r["role"], r["content"]) for r in rows] == [
        ("user", "stream please"),
        ("assistant", "answer to: stream please"),
    ]
    assert upstream.chats[-1].body["stream_options"] == {"include_usage": True}


def test_other_fields_pass_through_untouched(proxy: Proxy, upstream: FakeUpstream) -> None:
    proxy.client().chat.completions.create(
        model="hermes",
        messages=[{"role": "user", "content": "json please"}],
        temperature=0.2,
        n=2,
        response_format={"type": "json_object"},
        extra_headers=SESSION,
        extra_body={"some_vendor_field": {"keep": [1, 2]}},
    )
    body = upstream.chats[-1].body
    assert body["temperature"] == 0.2
    assert body["n"] == 2
    assert body["response_format"] == {"type": "json_object"}
    assert body["some_vendor_field"] == {"keep": [1, 2]}


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})},
}


@pytest.mark.parametrize("stream", [False, True])
def test_tool_call_round_trip(proxy: Proxy, upstream: FakeUpstream, stream: bool) -> None:
    client = proxy.client()
    upstream.script.append(Reply(tool_calls=[CALL]))
    first = client.chat.completions.create(
        model="hermes",
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
        stream=stream,
        extra_headers=SESSION,
    )
    if isinstance(first, openai.Stream):
        calls: dict[int, dict[str, str]] = {}
        for chunk in first:
            for delta in chunk.choices[0].delta.tool_calls or () if chunk.choices else ():
                slot = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] += delta.id or ""
                slot["name"] += (delta.function and delta.function.name) or ""
                slot["arguments"] += (delta.function and delta.function.arguments) or ""
        assert calls == {
            0: {"id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'}
        }
    else:
        assert first.choices[0].message.tool_calls[0].id == "call_1"  # type: ignore[index]

    # The client sends only the tool result: the proxy supplies the call it answers.
    upstream.script.append(Reply(content="It is sunny in Paris."))
    second = client.chat.completions.create(
        model="hermes",
        messages=[{"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21C"}],
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
        extra_headers=SESSION,
    )
    assert second.choices[0].message.content == "It is sunny in Paris."
    sent = upstream.chats[-1].messages
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["tool_calls"] == [CALL]
    assert sent[2] == {"role": "tool", "content": "sunny, 21C", "tool_call_id": "call_1"}
    assert upstream.chats[-1].body["tools"] == [WEATHER_TOOL]
    rows = proxy.transcript("user:alex")
    assert [r["role"] for r in rows] == ["user", "assistant", "tool", "assistant"]
    assert [r["turn"] for r in rows] == [1, 1, 1, 1]


# A passthrough never touches the store: a PostgreSQL twin would prove nothing more.
@pytest.mark.parametrize("backend", ["sqlite"])
def test_without_session_header_the_proxy_is_a_passthrough(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    client = proxy.client()
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "b"}])
    assert upstream.chats[-1].messages == [{"role": "user", "content": "b"}]
    assert upstream.chats[-1].body["model"] == "m"
    with proxy.db() as conn:
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
