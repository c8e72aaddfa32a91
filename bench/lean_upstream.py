"""A lean OpenAI-compatible upstream for benchmarks: one canned answer, as fast as it goes.

``uvicorn bench.lean_upstream:app --port 9000`` (or ``python -m bench.lean_upstream
--port 9000``) answers every request with the same small completion, without
parsing it, so a benchmark measures the proxy, not this.
"""

from __future__ import annotations

import argparse

import orjson
import uvicorn
from starlette.types import Receive, Scope, Send

ANSWER = orjson.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "bench-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Noted; the plan stands as agreed."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 9, "total_tokens": 109},
    }
)
HEADERS = [
    (b"content-type", b"application/json"),
    (b"content-length", str(len(ANSWER)).encode()),
]


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": ANSWER})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        loop="auto",
        http="auto",
    )


if __name__ == "__main__":
    main()
