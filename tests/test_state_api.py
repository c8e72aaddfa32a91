"""GET /api/sessions/{id}/state, and memory through the proxy when the summarizer fails."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import httpx
import orjson

from compaction import Memory, Message
from tests import http
from tests.conftest import Proxy, ProxyFactory
from tests.fake_upstream import FakeUpstream

FILLER = [
    "Could you help me think through naming things in a codebase?",
    "Any thoughts on keeping meetings short?",
    "Please walk me through reviewing pull requests kindly.",
    "What would you say regarding picking good test names?",
]
BEFORE = "Our database is MongoDB."
AFTER = "We migrated the database from MongoDB to PostgreSQL because we needed real joins."
EVENT = "On 2024-03-14 we launched the public beta."


def say(proxy: Proxy, text: str, key: str, api_key: str = "none") -> httpx.Response:
    response = http.post(
        f"{proxy.v1}/chat/completions",
        json={"model": "hermes", "messages": [{"role": "user", "content": text}]},
        headers={"X-Hermes-Session-Id": key, "Authorization": f"Bearer {api_key}"},
    )
    assert response.status_code == 200, response.text
    proxy.settle()
    return response


def conversation(proxy: Proxy, key: str, filler: int = 25, api_key: str = "none") -> None:
    say(proxy, BEFORE, key, api_key)
    for i in range(8):
        say(proxy, f"{FILLER[i % 4]} ({i})", key, api_key)
    say(proxy, AFTER, key, api_key)
    say(proxy, EVENT, key, api_key)
    for i in range(filler):
        say(proxy, f"{FILLER[i % 4]} (again {i})", key, api_key)


def state(proxy: Proxy, key: str, api_key: str = "none") -> httpx.Response:
    return http.get(
        f"{proxy.url}/api/sessions/{quote(key, safe='')}/state",
        headers={"Authorization": f"Bearer {api_key}"},
    )


def test_the_state_shows_what_the_session_remembers_and_what_it_costs(
    make_proxy: ProxyFactory,
) -> None:
    key = "repo:acme/backend"  # a slash in the id, as in the README
    with make_proxy(budget=1200) as proxy:
        conversation(proxy, key)
        response = state(proxy, key)
        assert response.status_code == 200
        body = response.json()
        assert body["object"] == "session.state" and body["key"] == key
        assert body["id"] == proxy.transcript(key)[0]["session_id"]
        assert [f["text"] for f in body["facts"]] == [AFTER]
        (reversal,) = body["reversals"]
        assert reversal["before"] == BEFORE and reversal["after"] == AFTER
        assert reversal["reason"] == "because we needed real joins"
        assert reversal["before_turn"] == 1 and reversal["turn"] == 10
        assert any(EVENT in line for line in body["summary"])
        window = body["window"]
        assert window and all(m["seq"] > body["through_seq"] for m in window)
        assert window[-1]["role"] == "assistant"
        assert [m["seq"] for m in window] == list(range(window[0]["seq"], window[-1]["seq"] + 1))
        tokens = body["tokens"]
        assert tokens["budget"] == 1200 and tokens["memory_limit"] == 480
        assert 0 < tokens["memory"] <= tokens["memory_limit"]
        assert tokens["window"] == sum(m["tokens"] for m in window)
        parts = tokens["facts"] + tokens["reversals"] + tokens["summary"]
        assert all(tokens[p] > 0 for p in ("facts", "reversals", "summary"))
        assert parts < tokens["memory"]  # the framing (header, end marker) costs the rest
        assert tokens["system"] == 0


def test_an_unknown_session_is_a_404_in_the_openai_envelope(proxy: Proxy) -> None:
    response = state(proxy, "never-seen")
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "not_found" and error["type"] == "invalid_request_error"
    assert "never-seen" in error["message"]


def test_the_state_is_scoped_by_tenant(make_proxy: ProxyFactory) -> None:
    with make_proxy(api_key=("k1:alice", "k2:bob")) as proxy:
        say(proxy, BEFORE, "shared", api_key="k1")
        assert state(proxy, "shared", api_key="k1").status_code == 200
        assert state(proxy, "shared", api_key="k2").status_code == 404
        assert state(proxy, "shared", api_key="nope").status_code == 401


def facts_sent(upstream: FakeUpstream) -> str:
    return "\n".join(str(m.get("content")) for m in upstream.chats[-1].messages)


def test_a_failing_model_summarizer_falls_back_and_loses_nothing(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    upstream.compaction_reply = lambda recorded: "Sure! Here is the summary you asked for."
    with make_proxy(budget=1200, summarizer="llm") as proxy:
        conversation(proxy, "llm-fails")
        assert upstream.compactions, "the llm summarizer was asked"
        assert proxy.services.compactor.stats.failures == len(upstream.compactions)
        body = state(proxy, "llm-fails").json()
        assert [f["text"] for f in body["facts"]] == [AFTER]
        assert body["reversals"][0]["before"] == BEFORE
        say(proxy, "Which database do we use?", "llm-fails")
        assert AFTER in facts_sent(upstream)


def test_a_valid_model_update_is_merged_into_the_ledger(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    def reply(recorded: Any) -> str:
        turns = str(recorded.messages[-1]["content"])
        facts = []
        if "MongoDB to PostgreSQL" in turns:
            facts.append({"subject": "database", "text": "The database is PostgreSQL.", "turn": 10})
        elif "Our database is MongoDB" in turns:
            facts.append({"subject": "database", "text": "The database is MongoDB.", "turn": 1})
        return orjson.dumps({"facts": facts, "changes": [], "summary": []}).decode()

    upstream.compaction_reply = reply
    with make_proxy(budget=1200, summarizer="llm") as proxy:
        conversation(proxy, "llm-works")
        assert proxy.services.compactor.stats.failures == 0
        body = state(proxy, "llm-works").json()
        assert [f["text"] for f in body["facts"]] == ["The database is PostgreSQL."]
        assert body["reversals"][0]["before"] == "The database is MongoDB."
        assert all(r.headers.get("x-hermes-purpose") == "compaction" for r in upstream.compactions)


class Broken:
    name = "broken"

    async def summarize(self, memory: Memory, evicted: Sequence[Message], max_tokens: int) -> Any:
        raise RuntimeError("summarizer bug")


def test_a_broken_summarizer_keeps_turns_in_the_window_or_archive(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    with make_proxy(budget=1200) as proxy:
        proxy.services.compactor.summarizer = Broken()
        say(proxy, BEFORE, "broken")
        for i in range(30):
            response = say(proxy, f"{FILLER[i % 4]} ({i})", "broken")
            assert int(response.headers["x-hermes-context-tokens"]) <= 1200
        # Background compaction never succeeded; the prompt builder folded
        # deterministically to stay in budget, and the archive has every turn.
        assert proxy.services.compactor.stats.applied == 0
        assert len(proxy.transcript("broken")) == 62
        say(proxy, "Which database do we use?", "broken")
        assert BEFORE in facts_sent(upstream)
