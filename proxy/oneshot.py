"""One non-streaming session turn with nobody waiting on a socket (jobs, runs).

The same pipeline as ``POST /v1/chat/completions`` — session lock, context
building within budget, pending turn, compaction — but the caller is the
proxy itself, so the answer is stored before this returns::

    result = await complete_turn(
        services.conversations,
        services.upstream,
        TurnRequest(tenant, "repo:acme/backend", {"model": "hermes"}, source="cron"),
        [Message("user", "Which decisions were reversed this week?")],
    )
    result.content, result.input_tokens
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson

from compaction import Message
from compaction.tokens import text_of
from proxy.errors import UpstreamError
from proxy.turns import Conversations, TurnRequest
from proxy.upstream import Upstream

__all__ = ["TurnResult", "complete_turn"]


@dataclass(frozen=True, slots=True)
class TurnResult:
    """A finished turn: the answer as stored and what it cost."""

    session_id: str | None
    """The session the turn was stored in (``None`` for an idempotent replay)."""
    message: dict[str, Any]
    """The assistant message, OpenAI-shaped (``content``, maybe ``tool_calls``)."""
    completion: dict[str, Any]
    """The upstream's whole completion object."""
    input_tokens: int
    output_tokens: int
    context_tokens: int

    @property
    def content(self) -> str:
        return text_of(self.message.get("content"))


async def complete_turn(
    conversations: Conversations,
    upstream: Upstream,
    request: TurnRequest,
    incoming: Sequence[Message],
    headers: Mapping[str, str] | None = None,
) -> TurnResult:
    """Run one turn of ``request``'s session end to end and store it.

    ``request.body`` holds the completion fields (``model``, ``temperature``,
    ``tools``…); its ``messages`` are replaced by the session's context, and it
    is sent without streaming. Any failure — the prompt does not fit, the
    upstream fails or answers nonsense — raises a :class:`~proxy.errors.ProxyError`
    and leaves no half turn in the session.
    """
    body = {**request.body, "stream": False}
    body.pop("stream_options", None)
    turn = await conversations.begin(replace(request, body=body), incoming)
    if isinstance(turn, bytes):
        completion = _parse(turn)
        return _result(None, completion, 0)
    try:
        response = await upstream.request(
            "POST",
            "chat/completions",
            body=orjson.dumps(turn.upstream_body),
            headers={
                "Content-Type": "application/json",
                **upstream.auth_headers(None),
                **(headers or {}),
            },
        )
        try:
            await response.raise_for_status()
            raw = await response.read()
        finally:
            response.close()
        completion = _parse(raw)
        message = completion["choices"][0]["message"]
        stored = await turn.commit(message, completion.get("usage"), raw)
    except BaseException:
        turn.fail()
        raise
    result = _result(turn.session_id, completion, turn.context_tokens)
    return result if result.output_tokens else replace(result, output_tokens=stored.tokens)


def _parse(raw: bytes) -> dict[str, Any]:
    try:
        completion = orjson.loads(raw)
        if not isinstance(completion["choices"][0]["message"], dict):
            raise TypeError("message is not an object")
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
        raise UpstreamError(
            "The upstream answered with something that is not a completion."
        ) from exc
    return dict(completion)


def _result(session_id: str | None, completion: dict[str, Any], context_tokens: int) -> TurnResult:
    usage = completion.get("usage") or {}
    return TurnResult(
        session_id=session_id,
        message=completion["choices"][0]["message"],
        completion=completion,
        input_tokens=int(usage.get("prompt_tokens") or context_tokens),
        output_tokens=int(usage.get("completion_tokens") or 0),
        context_tokens=context_tokens,
    )
