"""Background compaction through the proxy: the llm summarizer and its fallback."""

from __future__ import annotations

import openai
import orjson

from tests.conftest import ProxyFactory
from tests.fake_upstream import FakeUpstream, Recorded


def chat(client: openai.OpenAI, text: str) -> None:
    client.chat.completions.create(
        model="hermes",
        messages=[{"role": "user", "content": text}],
        extra_headers={"X-Hermes-Session-Id": "compact"},
    )


def llm_summary(recorded: Recorded) -> str:
    prompt = recorded.messages[-1]["content"]
    assert "Turns leaving the window" in prompt
    return orjson.dumps(
        {
            "facts": [{"subject": "database", "text": "The database is PostgreSQL 15.", "turn": 1}],
            "changes": [],
            "summary": ["turn 1: the user described their stack"],
        }
    ).decode()


def test_llm_summarizer_is_called_incrementally_and_its_output_used(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    upstream.compaction_reply = llm_summary
    with make_proxy(budget=400, summarizer="llm", summary_model="summarizer-model") as proxy:
        client = proxy.client()
        chat(client, "The database is PostgreSQL 15.")
        for i in range(30):
            chat(client, f"Some chatter to fill the window, message {i}, nothing important.")
            proxy.settle()
        calls = upstream.compactions
        assert calls, "no compaction call was made"
        assert all(c.body["model"] == "summarizer-model" for c in calls)
        # Incremental: each call carries the current memory and only evicted turns.
        for call in calls:
            assert "message 29" not in call.messages[-1]["content"]
        memory = upstream.chats[-1].messages[0]["content"]
        assert "The database is PostgreSQL 15." in memory
        assert "turn 1: the user described their stack" in memory
        assert proxy.services.compactor.stats.failures == 0


def test_invalid_llm_output_falls_back_to_extractive_and_is_counted(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    upstream.compaction_reply = lambda recorded: "Sure! Here is a summary: it went well."
    with make_proxy(budget=400, summarizer="llm") as proxy:
        client = proxy.client()
        chat(client, "Our database is PostgreSQL 15 on RDS.")
        for i in range(30):
            chat(client, f"Some chatter to fill the window, message {i}, nothing important.")
            proxy.settle()
        assert upstream.compactions
        stats = proxy.services.compactor.stats
        assert stats.failures >= 1 and stats.failures == stats.runs
        memory = upstream.chats[-1].messages[0]["content"]
        assert "Our database is PostgreSQL 15 on RDS." in memory
