"""An offline stand-in for a model, so ``hermes-proxy demo`` works with no network.

It is no language model: it answers a question with the line of its context
that shares the most words with it, and reports how much context it was
sent. That is enough to watch the proxy's memory work — a fact stated at
turn 3 is still "remembered" at turn 300, while the prompt stays the same size.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from compaction import TiktokenCounter, prompt_tokens
from compaction.tokens import text_of

__all__ = ["answer", "demo_upstream"]

DEMO_MODEL = "hermes-demo"
_WORD = re.compile(r"[a-z0-9][a-z0-9.+#-]*")
_STOP = frozenset(
    (
        "a an and are as at be but by can did do does for from had has have how i in is it its me "
        "my of on or our remember so that the their them there they this to us was we were what "
        "when where which who why will with you your again tell know about please"
    ).split()
)
_QUESTION = re.compile(
    r"\?\s*$|^(what|who|when|where|which|why|how|do|does|did|is|are|remind)\b", re.I
)


def _words(text: str) -> set[str]:
    return {w.strip(".") for w in _WORD.findall(text.lower())} - _STOP


def answer(messages: list[dict[str, Any]]) -> str:
    """What the demo model says to a prompt."""
    question = text_of(messages[-1].get("content")) if messages else ""
    if not _QUESTION.search(question.strip()):
        return f"Noted. ({_footer(messages)})"
    wanted = _words(question)
    best, best_score = "", 0
    for message in messages[:-1]:
        for line in text_of(message.get("content")).splitlines():
            line = line.strip().lstrip("- ")
            if not line or line.startswith("[") or _QUESTION.search(line):
                continue
            score = len(wanted & _words(line))
            if score > best_score:
                best, best_score = line, score
    if not best:
        return f"I have nothing about that in my context. ({_footer(messages)})"
    return f"From what I remember: {best} ({_footer(messages)})"


def _footer(messages: list[dict[str, Any]]) -> str:
    return (
        f"demo model; context: {len(messages)} messages, {prompt_tokens(messages, _COUNTER)} tokens"
    )


_COUNTER = TiktokenCounter()


async def _complete(request: Request) -> Response:
    body = orjson.loads(await request.body())
    messages = body.get("messages") or []
    text = answer(messages)
    usage = {
        "prompt_tokens": prompt_tokens(messages, _COUNTER),
        "completion_tokens": _COUNTER.count(text),
    }
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    ident, created = f"chatcmpl-{uuid.uuid4().hex[:12]}", int(time.time())
    if not body.get("stream"):
        return Response(
            orjson.dumps(
                {
                    "id": ident,
                    "object": "chat.completion",
                    "created": created,
                    "model": DEMO_MODEL,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage,
                }
            ),
            media_type="application/json",
        )

    async def frames() -> AsyncIterator[bytes]:
        base = {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": DEMO_MODEL,
        }
        pieces = re.findall(r"\S+\s*", text)
        for i, piece in enumerate(pieces):
            delta = {"role": "assistant", "content": piece} if i == 0 else {"content": piece}
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            yield b"data: " + orjson.dumps(chunk) + b"\n\n"
        end = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        yield b"data: " + orjson.dumps(end) + b"\n\n"
        if (body.get("stream_options") or {}).get("include_usage"):
            yield b"data: " + orjson.dumps({**base, "choices": [], "usage": usage}) + b"\n\n"
        yield b"data: [DONE]\n\n"

    return StreamingResponse(frames(), media_type="text/event-stream")


async def _models(request: Request) -> Response:
    data = {
        "object": "list",
        "data": [{"id": DEMO_MODEL, "object": "model", "created": 0, "owned_by": "demo"}],
    }
    return Response(orjson.dumps(data), media_type="application/json")


def demo_upstream() -> Starlette:
    return Starlette(
        routes=[
            Route("/v1/chat/completions", _complete, methods=["POST"]),
            Route("/v1/models", _models, methods=["GET"]),
        ]
    )
