"""What a session records about itself: source, user, model, and token counters that add up."""

from __future__ import annotations

from typing import Any

import orjson

from tests import http
from tests.conftest import ProxyFactory
from tests.fake_upstream import FakeUpstream, Recorded
from tests.session_helpers import api, cli, session_path
from tests.test_sessions_turns import openai_prompt_tokens


def compaction_json(request: Recorded) -> str:
    return orjson.dumps({"facts": [], "changes": [], "summary": ["turn 1: chatter"]}).decode()


def test_counters_add_up_over_turns_and_compactions(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    upstream.compaction_reply = compaction_json
    history: list[dict[str, Any]] = []
    expected = {"input": 0, "output": 0, "sent": 0, "full": 0}
    with make_proxy(budget=500, summarizer="llm") as proxy:
        for i in range(24):
            question = f"Question number {i}: tell me about item {i} in a few words."
            body: dict[str, Any] = {
                "model": "hermes",
                "messages": [{"role": "user", "content": question}],
            }
            kind = i % 3  # plain; streamed without usage; streamed with usage
            if kind:
                body["stream"] = True
            if kind == 2:
                body["stream_options"] = {"include_usage": True}
            headers = {
                "X-Hermes-Session-Id": "counted",
                "X-Hermes-Source": "discord",
                "X-Hermes-User-Id": "user-42",
            }
            response = http.post(f"{proxy.v1}/chat/completions", json=body, headers=headers)
            assert response.status_code == 200
            proxy.settle()
            context = int(response.headers["x-hermes-context-tokens"])
            answer: dict[str, Any] = {"role": "assistant", "content": f"answer to: {question}"}
            history.append({"role": "user", "content": question})
            # What a client replaying the whole conversation would have sent.
            expected["full"] += openai_prompt_tokens(history)
            expected["sent"] += context
            # The fake reports usage 11/7 except on a stream without include_usage,
            # where the proxy's own counts stand in.
            expected["input"] += context if kind == 1 else 11
            expected["output"] += openai_prompt_tokens([answer]) - 3 if kind == 1 else 7
            history.append(answer)
        with api(proxy) as client:
            detail = client.get(session_path("counted")).json()
        stats = cli("sessions", "stats", "--db", proxy.settings.db).output

    assert detail["source"] == "discord" and detail["user_id"] == "user-42"
    assert detail["model"] == proxy.settings.model
    assert detail["message_count"] == 48 and detail["turns"] == 24
    tokens = detail["tokens"]
    assert tokens["input"] == expected["input"]
    assert tokens["output"] == expected["output"]
    assert upstream.compactions, "the test needs compactions to count"
    assert tokens["compaction"] == 18 * len(upstream.compactions)
    assert tokens["sent"] == expected["sent"]
    assert tokens["full_history"] == expected["full"]
    assert tokens["saved"] == expected["full"] - expected["sent"]
    assert tokens["saved"] > 0
    assert f"Tokens saved by compaction: {tokens['saved']:,} " in stats


def test_an_explicit_model_is_kept(make_proxy: ProxyFactory) -> None:
    with make_proxy() as proxy:
        with proxy.client() as client:
            client.chat.completions.create(
                model="gpt-4.1-nano",
                messages=[{"role": "user", "content": "hi"}],
                extra_headers={"X-Hermes-Session-Id": "m"},
            )
        proxy.settle()
        with api(proxy) as http:
            assert http.get(session_path("m")).json()["model"] == "gpt-4.1-nano"
