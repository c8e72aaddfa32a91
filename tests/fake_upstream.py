"""A fake OpenAI-compatible upstream that records what it is sent.

Replies are scripted: queue :class:`Reply` objects on ``fake.script`` (or set
``fake.responder``); without a script it answers ``"answer to: <question>"``,
streamed or not, as asked.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.types import Receive, Scope, Send

from compaction.tokens import text_of

__all__ = ["FakeUpstream", "FakeUpstreams", "Recorded", "Reply"]


@dataclass
class Reply:
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    status: int = 200
    body: bytes | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    break_after: int | None = None
    """Stream: drop the connection after this many chunks."""
    error_frame_after: int | None = None
    """Stream: send an error event after this many chunks."""
    truncate: bool = False
    """Stream: end without ``data: [DONE]``."""


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self.body["messages"]
        return messages

    @property
    def purpose(self) -> str | None:
        return self.headers.get("x-hermes-purpose")


@dataclass
class FakeUpstream:
    url: str = ""
    requests: list[Recorded] = field(default_factory=list)
    script: deque[Reply] = field(default_factory=deque)
    responder: Callable[[Recorded], Reply] | None = None
    compaction_reply: Callable[[Recorded], str] | None = None
    model: str = "fake-model"
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def chats(self) -> list[Recorded]:
        """Chat completion requests, compaction calls excluded."""
        return [
            r for r in list(self.requests) if r.path.endswith("/chat/completions") and not r.purpose
        ]

    @property
    def compactions(self) -> list[Recorded]:
        return [r for r in list(self.requests) if r.purpose == "compaction"]

    def _reply_for(self, recorded: Recorded) -> Reply:
        with self._lock:
            if self.script:
                return self.script.popleft()
        if self.responder is not None:
            return self.responder(recorded)
        question = text_of(recorded.messages[-1].get("content")) if recorded.messages else ""
        return Reply(content=f"answer to: {question}")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            body = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            body = None
        recorded = Recorded(
            method=scope["method"],
            path=scope["path"],
            headers={k.decode().lower(): v.decode() for k, v in scope["headers"]},
            body=body,
            raw=raw,
        )
        self.requests.append(recorded)
        if scope["path"].endswith("/models"):
            data = {
                "object": "list",
                "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "fake"}],
            }
            await _send(send, 200, orjson.dumps(data))
        elif scope["path"].endswith("/chat/completions"):
            await self._chat(recorded, send)
        else:
            echo = {
                "echo": {
                    "method": recorded.method,
                    "path": recorded.path,
                    "query": scope["query_string"].decode(),
                    "body": raw.decode(),
                }
            }
            await _send(send, 200, orjson.dumps(echo), extra=[(b"x-fake", b"1")])

    async def _chat(self, recorded: Recorded, send: Send) -> None:
        if recorded.purpose == "compaction":
            text = self.compaction_reply(recorded) if self.compaction_reply else "not json at all"
            await _send(send, 200, orjson.dumps(_completion(text, None, self.model)))
            return
        reply = self._reply_for(recorded)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.status >= 400:
            body = reply.body or orjson.dumps(
                {
                    "error": {
                        "message": "fake failure",
                        "type": "server_error",
                        "param": None,
                        "code": None,
                    }
                }
            )
            await _send(send, reply.status, body)
            return
        if not recorded.body.get("stream"):
            await _send(
                send, 200, orjson.dumps(_completion(reply.content, reply.tool_calls, self.model))
            )
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        include_usage = bool((recorded.body.get("stream_options") or {}).get("include_usage"))
        for i, frame in enumerate(_frames(reply, self.model, include_usage)):
            if reply.break_after is not None and i >= reply.break_after:
                raise ConnectionAbortedError("fake upstream drops the stream")
            if reply.error_frame_after is not None and i == reply.error_frame_after:
                error = {
                    "error": {
                        "message": "fake mid-stream failure",
                        "type": "server_error",
                        "param": None,
                        "code": None,
                    }
                }
                await send(
                    {
                        "type": "http.response.body",
                        "body": b"data: " + orjson.dumps(error) + b"\n\n",
                        "more_body": True,
                    }
                )
                break
            if reply.truncate and frame == b"data: [DONE]\n\n":
                break
            if reply.chunk_delay:
                await asyncio.sleep(reply.chunk_delay)
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class FakeUpstreams:
    """One server for many fake upstreams, each under a path prefix of its own.

    The suite starts it once instead of a server per test (starting and
    stopping uvicorn costs more than many tests). ``add`` returns the fake's
    base URL; the fake sees paths without the prefix, as if it were alone.
    """

    def __init__(self, url: str = "") -> None:
        self.url = url
        self._fakes: dict[str, FakeUpstream] = {}
        self._numbers = itertools.count()

    def add(self, fake: FakeUpstream) -> str:
        prefix = f"u{next(self._numbers)}"
        self._fakes[prefix] = fake
        return f"{self.url}/{prefix}"

    def remove(self, fake: FakeUpstream) -> None:
        self._fakes = {k: v for k, v in self._fakes.items() if v is not fake}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await FakeUpstream()(scope, receive, send)
            return
        prefix, _, rest = scope["path"][1:].partition("/")
        fake = self._fakes.get(prefix)
        if fake is None:
            await _send(send, 404, b'{"error": {"message": "no such fake upstream"}}')
            return
        path = "/" + rest
        await fake({**scope, "path": path, "raw_path": path.encode()}, receive, send)


async def _send(
    send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send(
        {"type": "http.response.start", "status": status, "headers": headers + (extra or [])}
    )
    await send({"type": "http.response.body", "body": body})


def _usage() -> dict[str, int]:
    return {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


def _completion(
    content: str | None, tool_calls: list[dict[str, Any]] | None, model: str
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": _usage(),
    }


def _frames(reply: Reply, model: str, include_usage: bool) -> list[bytes]:
    base = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def frame(delta: dict[str, Any], finish: str | None = None) -> bytes:
        chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    frames = [frame({"role": "assistant", "content": ""})]
    text = reply.content or ""
    step = max(1, len(text) // 3)
    for start in range(0, len(text), step):
        frames.append(frame({"content": text[start : start + step]}))
    for index, call in enumerate(reply.tool_calls or ()):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        frames.append(
            frame(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {
                                "name": call["function"]["name"],
                                "arguments": arguments[:half],
                            },
                        }
                    ]
                }
            )
        )
        frames.append(
            frame({"tool_calls": [{"index": index, "function": {"arguments": arguments[half:]}}]})
        )
    frames.append(frame({}, "tool_calls" if reply.tool_calls else "stop"))
    if include_usage:
        frames.append(
            b"data: " + orjson.dumps({**base, "choices": [], "usage": _usage()}) + b"\n\n"
        )
    frames.append(b"data: [DONE]\n\n")
    return frames
