"""Reset with memory carry-over: by hand (API), by policy (injected clock), never mid-turn."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from compaction import Memory, Message
from proxy.live import LiveSession
from proxy.resets import carried_memory
from proxy.store.sessions import SessionBusy
from tests.conftest import Proxy, ProxyFactory
from tests.fake_upstream import FakeUpstream, Recorded
from tests.session_helpers import api, cli, rows, say, session_path

NAME = "My name is Alex and I'm building a distributed cache in Rust."
REDIS = "We removed Redis because stale prices caused 3 outages."
DATABASE = "Our database is PostgreSQL 15 on RDS."


@pytest.fixture
def proxy_with_idle_policy(make_proxy: ProxyFactory) -> Iterator[Proxy]:
    with make_proxy(reset_policy=("*=idle:30",)) as proxy:
        yield proxy


def live_memory(proxy: Proxy, key: str) -> Memory:
    (row,) = rows(
        proxy,
        "SELECT st.memory FROM session_state st JOIN sessions s ON s.id = st.session_id "
        "WHERE s.key = ? AND s.ended_at IS NULL",
        key,
    )
    return Memory.from_json(row[0])


def sent_text(upstream: FakeUpstream) -> str:
    return "\n".join(str(m["content"]) for m in upstream.chats[-1].messages)


def test_reset_carries_facts_but_not_summary_or_window(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    with make_proxy(budget=800) as proxy:
        say(proxy, "alex", NAME)
        say(proxy, "alex", REDIS)
        for i in range(25):
            say(proxy, "alex", f"Tell me more about subject number {i}, in general terms.")
        say(proxy, "alex", DATABASE)  # still in the window when the reset comes
        before = live_memory(proxy, "alex")
        assert before.summary, "the test needs a summary to leave behind"
        assert not any("PostgreSQL" in f.text for f in before.facts)

        with api(proxy) as client:
            old_id = client.get(session_path("alex")).json()["id"]
            reset = client.post(session_path("alex", "/reset"))
            assert reset.status_code == 200, reset.text
            new = reset.json()
            old = client.get(session_path(old_id)).json()

        assert new["key"] == "alex" and new["parent_id"] == old_id and new["live"]
        assert old["live"] is False and old["end_reason"] == "reset"
        # The pending compaction was completed first: the window's fact is kept.
        assert old["window"]["messages"] == 0
        facts = [f["text"] for f in new["memory"]["facts"]]
        assert any("Alex" in f for f in facts)
        assert any("Redis" in f for f in facts)
        assert any("PostgreSQL 15" in f for f in facts)
        assert [f["text"] for f in old["memory"]["facts"]] == facts
        assert new["memory"]["summary"] == [] and old["memory"]["summary"]
        assert new["window"] == {"messages": 0, "tokens": 0} and new["message_count"] == 0

        say(proxy, "alex", "Which database do we use?")
        sent = upstream.chats[-1].messages
        assert len(sent) == 2  # the memory message and the new question: no old window
        assert "PostgreSQL 15" in str(sent[0]["content"]) and "Alex" in str(sent[0]["content"])
        assert "Summary" not in str(sent[0]["content"])
        assert sent[1] == {"role": "user", "content": "Which database do we use?"}


def test_reset_uses_the_configured_summarizer_and_counts_its_tokens(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    def summarize(request: Recorded) -> str:
        facts = [{"subject": "user name", "text": "The user is called Alex.", "turn": 1}]
        return orjson.dumps({"facts": facts, "changes": [], "summary": ["turn 1: hello"]}).decode()

    upstream.compaction_reply = summarize
    with make_proxy(summarizer="llm") as proxy:
        say(proxy, "llm", "Hi, I am Alex.")
        with api(proxy) as client:
            old_id = client.get(session_path("llm")).json()["id"]
            new = client.post(session_path("llm", "/reset")).json()
            old = client.get(session_path(old_id)).json()
    assert len(upstream.compactions) == 1
    assert [f["text"] for f in new["memory"]["facts"]] == ["The user is called Alex."]
    assert new["memory"]["summary"] == [] and old["memory"]["summary"] == ["turn 1: hello"]
    assert old["tokens"]["compaction"] == 18  # the fake upstream's usage for that call


def test_carried_memory_keeps_facts_and_reversals_only() -> None:
    from compaction import Fact, Reversal

    memory = Memory(
        facts=(Fact("db", "PostgreSQL", 5, 1.0),),
        reversals=(Reversal("db", "MySQL", "PostgreSQL", 5, 1.0),),
        summary=("turn 2: something",),
        through_seq=40,
        through_turn=20,
        extra={"x": 1},
    )
    carried = carried_memory(memory)
    assert carried.facts == memory.facts and carried.reversals == memory.reversals
    assert carried.summary == () and carried.through_seq == 0 and not carried.extra


def test_reset_waits_for_a_turn_in_flight(proxy: Proxy) -> None:
    say(proxy, "busy", "hello")
    with api(proxy) as client:
        session_id = client.get(session_path("busy")).json()["id"]
        # Another process's turn in flight on this session.
        with proxy.db() as conn:
            conn.execute(
                "INSERT INTO pending_turns (id, session_id, messages, created_at) "
                "VALUES ('other', ?, '[]', ?)",
                (session_id, time.time()),
            )
        refused = client.post(session_path("busy", "/reset"))
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "session_busy"
        kept = client.delete(session_path("busy"))
        assert kept.status_code == 409 and kept.json()["error"]["code"] == "session_busy"
        in_cli = cli("sessions", "delete", "busy", "--yes", "--db", proxy.settings.db)
        assert in_cli.exit_code == 2 and "turn in progress" in in_cli.output
        assert client.get(session_path("busy")).json()["id"] == session_id
        # A pending turn left over from a crash long ago does not block it.
        with proxy.db() as conn:
            conn.execute("UPDATE pending_turns SET created_at = ?", (time.time() - 7200,))
        assert client.post(session_path("busy", "/reset")).status_code == 200
        ended = client.post(session_path(session_id, "/reset"))
        assert ended.status_code == 409 and ended.json()["error"]["code"] == "session_ended"


def test_a_reset_elsewhere_is_refused_while_a_turn_is_in_flight(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    """Another process tries to reset the session after this turn started: it is refused."""
    say(proxy, "race", DATABASE)
    conversations = proxy.services.conversations
    refused: list[BaseException] = []

    async def reset_elsewhere(live: LiveSession, new: Sequence[Message]) -> Sequence[Message]:
        store = proxy.services.store
        info = await store.live_info(live.tenant, live.key)
        assert info is not None
        version, memory = await store.load_memory(info.id)
        now = time.time()
        try:
            await store.end_and_continue(
                info,
                version=version,
                final=memory,
                carried=carried_memory(memory),
                compaction_tokens=0,
                reason="reset",
                now=now,
                busy_since=now - 60,
            )
        except SessionBusy as exc:
            refused.append(exc)
        return ()

    conversations.recall = reset_elsewhere
    try:
        say(proxy, "race", "Where does this go?")
    finally:
        conversations.recall = None
    assert len(refused) == 1
    stored = rows(
        proxy,
        "SELECT s.ended_at FROM messages m JOIN sessions s ON s.id = m.session_id "
        "WHERE m.content = ?",
        "Where does this go?",
    )
    assert [r["ended_at"] for r in stored] == [None]
    assert rows(proxy, "SELECT COUNT(*) FROM pending_turns")[0][0] == 0


def test_idle_policy_resets_at_the_next_turn(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    with make_proxy(reset_policy=("api=idle:30", "telegram=none")) as proxy:
        auto = proxy.services.conversations.auto_reset
        assert auto is not None
        say(proxy, "idle", DATABASE)
        say(proxy, "tg", DATABASE, source="telegram")
        auto.clock = lambda: time.time() + 29 * 60
        say(proxy, "idle", "Still here after 29 minutes.")
        assert auto.resets == 0

        auto.clock = lambda: time.time() + 31 * 60
        say(proxy, "tg", "Telegram never resets.")
        say(proxy, "idle", "Back after 31 minutes: which database?")
        auto.clock = time.time
        assert auto.resets == 1
        with api(proxy) as client:
            sessions = client.get("/api/sessions", params={"source": "api"}).json()["data"]
        assert [(s["key"], s["live"], s["end_reason"]) for s in sessions] == [
            ("idle", True, None),
            ("idle", False, "idle"),
        ]
        # The turn that found the session due is the first of the new one.
        assert sessions[0]["message_count"] == 2
        sent = upstream.chats[-1].messages
        assert len(sent) == 2 and "PostgreSQL 15" in str(sent[0]["content"])
        assert "Still here" not in sent_text(upstream)


def test_daily_policy_resets_after_the_hour(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    with make_proxy(reset_policy=("*=daily:4",)) as proxy:
        auto = proxy.services.conversations.auto_reset
        assert auto is not None
        auto.tz = UTC
        say(proxy, "daily", DATABASE)
        now = datetime.now(UTC)
        four = now.replace(hour=4, minute=0, second=0, microsecond=0)
        next_four = (four if four > now else four + timedelta(days=1)).timestamp()
        auto.clock = lambda: next_four - 60
        say(proxy, "daily", "Just before four.")
        assert auto.resets == 0
        auto.clock = lambda: next_four + 60
        say(proxy, "daily", "Just after four: which database?")
        assert auto.resets == 1
        ended = rows(proxy, "SELECT end_reason FROM sessions WHERE ended_at IS NOT NULL")
        assert [r[0] for r in ended] == ["daily"]
        assert "PostgreSQL 15" in sent_text(upstream) and "Just before" not in sent_text(upstream)


def test_busy_sessions_are_never_auto_reset(proxy_with_idle_policy: Proxy) -> None:
    proxy = proxy_with_idle_policy
    auto = proxy.services.conversations.auto_reset
    assert auto is not None
    say(proxy, "job", "hello")
    busy = {"job": True}

    async def job_running(record: object) -> bool:
        return busy["job"]

    auto.busy_checks.append(job_running)
    auto.clock = lambda: time.time() + 3600
    say(proxy, "job", "a job is running on this session")
    assert auto.resets == 0
    busy["job"] = False
    say(proxy, "job", "the job has finished")
    assert auto.resets == 1


def test_a_session_with_a_pending_turn_is_not_auto_reset(proxy_with_idle_policy: Proxy) -> None:
    proxy = proxy_with_idle_policy
    auto = proxy.services.conversations.auto_reset
    assert auto is not None
    say(proxy, "p", "hello")
    with proxy.db() as conn:
        conn.execute(
            "INSERT INTO pending_turns (id, session_id, messages, created_at) "
            "SELECT 'elsewhere', id, '[]', ? FROM sessions WHERE key = 'p'",
            (time.time(),),
        )
    auto.clock = lambda: time.time() + 3600
    say(proxy, "p", "another replica is mid-turn on this session")
    assert auto.resets == 0
