"""The leanest OpenAI-compatible upstream we can write: fixed answers, no parsing.

Benchmarks put it behind the proxy and also call it directly, so the
difference is what the proxy adds. Run: ``uvicorn bench.lean_upstream:app``.
"""

from __future__ import annotations

import orjson
from starlette.types import Receive, Scope, Send

ANSWER = "Sure: here is a short, fixed answer from the lean upstream."
COMPLETION = orjson.dumps(
    {
        "id": "chatcmpl-lean",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "lean",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": ANSWER},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 20, "completion_tokens": 12, "total_tokens": 32},
    }
)


def _chunk(delta: dict[str, str], finish: str | None = None) -> bytes:
    event = {
        "id": "chatcmpl-lean",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "lean",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(event) + b"\n\n"


FRAMES = [
    _chunk({"role": "assistant", "content": ""}),
    *(_chunk({"content": word + " "}) for word in ANSWER.split()),
    _chunk({}, "stop"),
    b"data: [DONE]\n\n",
]
JSON_HEADERS = [
    (b"content-type", b"application/json"),
    (b"content-length", str(len(COMPLETION)).encode()),
]
SSE_HEADERS = [(b"content-type", b"text/event-stream")]


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if b'"stream":true' in body.replace(b" ", b""):
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        for frame in FRAMES:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    await send({"type": "http.response.start", "status": 200, "headers": JSON_HEADERS})
    await send({"type": "http.response.body", "body": COMPLETION})
