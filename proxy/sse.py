"""Reading OpenAI chat-completion streams on the side, without touching them.

The proxy relays the upstream's bytes as they arrive; a
:class:`StreamAccumulator` is fed the same bytes and rebuilds the assistant
message (content and tool-call deltas), the finish reason and the usage, so
the turn can be stored once the stream is complete.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

__all__ = ["StreamAccumulator", "completion_from_stream", "replay_as_stream"]


class StreamAccumulator:
    def __init__(self) -> None:
        self._buffer = b""
        self.done = False
        self.error: Any = None
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.id: str | None = None
        self.model: str | None = None
        self.created: int | None = None

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk
        if b"\n" not in chunk:
            return
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            if line.startswith(b"data:"):
                self._data(line[5:].strip())

    def _data(self, payload: bytes) -> None:
        if payload == b"[DONE]":
            self.done = True
            return
        try:
            event = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return
        if not isinstance(event, dict):
            return
        if "error" in event:
            self.error = event["error"]
            return
        self.id = self.id or event.get("id")
        self.model = self.model or event.get("model")
        self.created = self.created or event.get("created")
        if event.get("usage"):
            self.usage = event["usage"]
        for choice in event.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue  # with n > 1 the session keeps the first choice
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.content.append(delta["content"])
            if delta.get("refusal"):
                self.refusal.append(delta["refusal"])
            for call in delta.get("tool_calls") or ():
                slot = self.tool_calls.setdefault(
                    call.get("index", 0),
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if call.get("id"):
                    slot["id"] = call["id"]
                if call.get("type"):
                    slot["type"] = call["type"]
                function = call.get("function") or {}
                if function.get("name"):
                    slot["function"]["name"] += function["name"]
                if function.get("arguments"):
                    slot["function"]["arguments"] += function["arguments"]
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def message(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(self.content) if self.content or not self.tool_calls else None,
        }
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        if self.refusal:
            message["refusal"] = "".join(self.refusal)
        return message


def completion_from_stream(acc: StreamAccumulator, model: str) -> dict[str, Any]:
    """The non-streaming completion object equivalent to an accumulated stream."""
    return {
        "id": acc.id or "chatcmpl-hermes",
        "object": "chat.completion",
        "created": acc.created or int(time.time()),
        "model": acc.model or model,
        "choices": [
            {
                "index": 0,
                "message": acc.message(),
                "finish_reason": acc.finish_reason or "stop",
            }
        ],
        "usage": acc.usage,
    }


def replay_as_stream(completion: dict[str, Any]) -> bytes:
    """A stored completion as SSE frames, for a streamed retry of a finished turn."""
    base = {
        "id": completion.get("id"),
        "object": "chat.completion.chunk",
        "created": completion.get("created"),
        "model": completion.get("model"),
    }
    frames = []
    for choice in completion.get("choices") or ():
        message = choice.get("message") or {}
        delta = {k: v for k, v in message.items() if v is not None}
        if "tool_calls" in delta:
            delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(delta["tool_calls"])]
        frames.append(
            {
                **base,
                "choices": [
                    {"index": choice.get("index", 0), "delta": delta, "finish_reason": None}
                ],
            }
        )
        frames.append(
            {
                **base,
                "choices": [
                    {
                        "index": choice.get("index", 0),
                        "delta": {},
                        "finish_reason": choice.get("finish_reason"),
                    }
                ],
            }
        )
    if completion.get("usage"):
        frames.append({**base, "choices": [], "usage": completion["usage"]})
    return b"".join(b"data: " + orjson.dumps(f) + b"\n\n" for f in frames) + b"data: [DONE]\n\n"
