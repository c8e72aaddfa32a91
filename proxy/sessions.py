"""What the sessions API and CLI share: resolving ids, and the JSON shape of a session.

Everywhere a session id is taken it resolves, in order, to the tenant's live
session under that key, the session with that id, or the one session one of
whose ids or keys starts with it. An ambiguous prefix is an error that lists
the candidates.
"""

from __future__ import annotations

import time
from typing import Any

from compaction import Memory, MemoryRenderer
from proxy.errors import Conflict, InvalidRequest, NotFound
from proxy.store import SqlStore
from proxy.store.archive import message_json
from proxy.store.session_info import SessionInfo
from proxy.store.sessions import BUSY_WINDOW, SessionBusy

__all__ = [
    "AmbiguousSession",
    "delete_session",
    "detail_json",
    "memory_json",
    "message_json",
    "resolve_session",
    "session_json",
]


class AmbiguousSession(Conflict):
    """An id prefix that matches more than one session."""

    code = "ambiguous_session_id"

    def __init__(self, ident: str, candidates: list[SessionInfo]) -> None:
        self.candidates = candidates
        listed = ", ".join(
            c.id if c.key == c.id else f"{c.id} (key {c.key!r})" for c in candidates[:10]
        )
        more = f" and {len(candidates) - 10} more" if len(candidates) > 10 else ""
        super().__init__(
            f"Session id {ident!r} is ambiguous: it matches {listed}{more}. Give more of the id.",
            param="id",
        )


async def resolve_session(store: SqlStore, tenant: str, ident: str) -> SessionInfo:
    if not ident or not ident.isprintable() or len(ident) > 256:
        raise InvalidRequest("A session id is 1 to 256 printable characters.", param="id")
    found = await store.find_sessions(tenant, ident)
    if not found:
        raise NotFound(f"No session {ident!r}.", param="id", code="session_not_found")
    if len(found) > 1:
        raise AmbiguousSession(ident, found)
    return found[0]


async def delete_session(store: SqlStore, info: SessionInfo) -> bool:
    """Delete a session unless a turn is in flight on it (then a 409 to retry)."""
    try:
        return await store.delete_session(info.id, busy_since=time.time() - BUSY_WINDOW)
    except SessionBusy:
        raise Conflict(
            f"Session {info.id} has a turn in progress; delete it when it has finished.",
            code="session_busy",
        ) from None


def session_json(info: SessionInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "object": "session",
        "key": info.key,
        "source": info.source,
        "user_id": info.user_id,
        "title": info.title,
        "model": info.model,
        "parent_id": info.parent_id,
        "started_at": info.started_at,
        "updated_at": info.updated_at,
        "ended_at": info.ended_at,
        "end_reason": info.end_reason,
        "live": info.live,
        "message_count": info.message_count,
        "turns": info.last_turn,
        "tokens": {
            "input": info.input_tokens,
            "output": info.output_tokens,
            "compaction": info.compaction_tokens,
            "sent": info.sent_tokens,
            "full_history": info.full_tokens,
            "saved": info.saved_tokens,
        },
    }


def memory_json(memory: Memory, renderer: MemoryRenderer) -> dict[str, Any]:
    return {
        "facts": [
            {"subject": f.subject, "text": f.text, "turn": f.turn, "at": f.at} for f in memory.facts
        ],
        "reversals": [
            {
                "subject": r.subject,
                "before": r.before,
                "after": r.after,
                "turn": r.turn,
                "before_turn": r.before_turn,
                "at": r.at,
                "reason": r.reason,
            }
            for r in memory.reversals
        ],
        "summary": list(memory.summary),
        "through_seq": memory.through_seq,
        "through_turn": memory.through_turn,
        "tokens": renderer.render(memory).tokens,
    }


async def detail_json(
    store: SqlStore, info: SessionInfo, renderer: MemoryRenderer
) -> dict[str, Any]:
    """A session as inspected: metadata, counters, system prompt and what it remembers."""
    version, memory = await store.load_memory(info.id)
    messages, tokens = await store.window_size(info.id, memory.through_seq)
    return {
        **session_json(info),
        "system_prompt": [m.to_openai() for m in info.system],
        "memory": {"version": version, **memory_json(memory, renderer)},
        "window": {"messages": messages, "tokens": tokens},
        "pending_turns": await store.pending_count(info.id),
    }
