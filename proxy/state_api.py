"""``GET /api/sessions/{id}/state``: what a session remembers, and what each part costs.

``{id}`` is the session's external id (the ``X-Hermes-Session-Id`` value) and
names the tenant's live session. The answer shows the facts ledger, the
reversals, the running summary and the recent window, with the tokens each
part costs in the prompt — what the model will be shown of the past.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from compaction import Memory, Message
from compaction.render import memory_sections
from proxy.app_state import services
from proxy.auth import tenant_of
from proxy.errors import NotFound

__all__ = ["get_session_state"]


def _window_message(m: Message) -> dict[str, Any]:
    return {
        **m.to_openai(),
        "seq": m.seq,
        "turn": m.turn,
        "tokens": m.tokens,
        "created_at": m.created_at,
    }


def state_body(
    request: Request, key: str, session_id: str, version: int, memory: Memory, window: list[Message]
) -> dict[str, Any]:
    svc = services(request)
    conversations = svc.conversations
    counter, budget = conversations.counter, conversations.budget
    sections = memory_sections(memory)
    tokens = {
        "budget": budget.total,
        "memory_limit": budget.memory_tokens,
        "recall_limit": budget.recall_tokens,
        "memory": conversations.renderer.render(memory).tokens,
        "facts": counter.count("\n".join(sections.get("facts", ()))),
        "reversals": counter.count("\n".join(sections.get("reversals", ()))),
        "summary": counter.count("\n".join(sections.get("summary", ()))),
        "window": sum(m.tokens for m in window),
    }
    return {
        "object": "session.state",
        "id": session_id,
        "key": key,
        "version": version,
        "through_seq": memory.through_seq,
        "through_turn": memory.through_turn,
        "facts": [
            {"subject": f.subject, "text": f.text, "turn": f.turn, "at": f.at} for f in memory.facts
        ],
        "reversals": [
            {
                "subject": r.subject,
                "before": r.before,
                "after": r.after,
                "before_turn": r.before_turn,
                "turn": r.turn,
                "at": r.at,
                "reason": r.reason,
            }
            for r in memory.reversals
        ],
        "summary": list(memory.summary),
        "window": [_window_message(m) for m in window],
        "tokens": tokens,
    }


async def get_session_state(request: Request) -> Response:
    svc = services(request)
    tenant = tenant_of(request, svc.tenants)
    key = request.path_params["key"]
    record = await svc.store.live_session(tenant, key)
    if record is None:
        raise NotFound(f"No session {key!r}: no live session has this X-Hermes-Session-Id.")
    version, memory = await svc.store.load_memory(record.id)
    window = await svc.store.load_messages(record.id, memory.through_seq)
    body = state_body(request, record.key, record.id, version, memory, window)
    body["tokens"]["system"] = sum(m.tokens for m in record.system)
    return Response(orjson.dumps(body), media_type="application/json")
