"""``/v1/*``: the drop-in chat endpoint, the model list, and passthrough."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from compaction import Message
from proxy.app_state import services
from proxy.auth import tenant_of
from proxy.errors import InvalidRequest, PayloadTooLarge, UpstreamError, error_frame
from proxy.responses import RelayResponse, encode_headers
from proxy.sse import StreamAccumulator, completion_from_stream, replay_as_stream
from proxy.turns import Turn, TurnRequest
from proxy.upstream import HOP_BY_HOP, UpstreamResponse

__all__ = ["create_chat_completion", "list_models", "passthrough"]

SESSION_HEADER = "x-hermes-session-id"
ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
# Client headers that are the proxy's business, not the upstream's.
NOT_FORWARDED = HOP_BY_HOP | {
    "authorization",
    "idempotency-key",
    "x-hermes-session-id",
    "x-hermes-source",
    "x-hermes-user-id",
    "x-hermes-purpose",
}
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
# Relayed answers up to this size, with a known length, are read whole first.
BUFFERED_RELAY = 1 << 20


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"The request body is larger than the limit of {limit} bytes.")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise PayloadTooLarge(f"The request body is larger than the limit of {limit} bytes.")
    return bytes(body)


def forwarded_headers(request: Request, *, keep_encoding: bool) -> dict[str, str]:
    """The client's headers, minus the proxy's own; bodies the proxy reads come uncompressed."""
    headers = {k: v for k, v in request.headers.items() if k not in NOT_FORWARDED}
    if not keep_encoding:
        headers["accept-encoding"] = "identity"
    headers.update(services(request).upstream.auth_headers(request.headers.get("authorization")))
    return headers


def parse_body(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"The request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    if "model" in body and not isinstance(body["model"], str):
        raise InvalidRequest("'model' must be a string.", param="model")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise InvalidRequest("'stream' must be a boolean.", param="stream")
    return body


def parse_messages(body: Mapping[str, Any]) -> list[Message]:
    messages = body.get("messages")
    if messages is None:
        raise InvalidRequest("'messages' is a required property.", param="messages")
    if not isinstance(messages, list):
        raise InvalidRequest("'messages' must be an array of messages.", param="messages")
    if not messages:
        raise InvalidRequest("'messages' must contain at least one message.", param="messages")
    out = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise InvalidRequest(f"{where} must be an object.", param=where)
        role = m.get("role")
        if role not in ROLES:
            raise InvalidRequest(
                f"{where}.role must be one of {', '.join(sorted(ROLES))}.", param=f"{where}.role"
            )
        content = m.get("content")
        if content is not None and not isinstance(content, str | list):
            raise InvalidRequest(
                f"{where}.content must be a string or an array of parts.", param=f"{where}.content"
            )
        if content is None and role in ("system", "developer", "user", "tool"):
            raise InvalidRequest(f"{where}.content is required.", param=f"{where}.content")
        if role == "tool" and not isinstance(m.get("tool_call_id"), str):
            raise InvalidRequest(
                f"{where}.tool_call_id is required.", param=f"{where}.tool_call_id"
            )
        if m.get("tool_calls") is not None and not isinstance(m["tool_calls"], list):
            raise InvalidRequest(
                f"{where}.tool_calls must be an array.", param=f"{where}.tool_calls"
            )
        out.append(Message.from_openai(m))
    return out


def valid_session_id(value: str) -> str:
    if not 1 <= len(value) <= 256 or not value.isprintable():
        raise InvalidRequest(
            "X-Hermes-Session-Id must be 1 to 256 printable characters.",
            param="X-Hermes-Session-Id",
            code="invalid_session_id",
        )
    return value


async def create_chat_completion(request: Request) -> Response:
    svc = services(request)
    tenant = tenant_of(request, svc.tenants)
    raw = await read_body(request, svc.settings.max_body_bytes)
    key = request.headers.get(SESSION_HEADER)
    if key is None:
        return await relay(request, "chat/completions", raw)
    key = valid_session_id(key)
    body = parse_body(raw)
    incoming = parse_messages(body)
    stream = body.get("stream") is True
    turn_request = TurnRequest(
        tenant=tenant,
        key=key,
        body=body,
        source=request.headers.get("x-hermes-source", "api")[:64] or "api",
        user_id=request.headers.get("x-hermes-user-id"),
        idempotency_key=request.headers.get("idempotency-key"),
    )
    turn = await svc.conversations.begin(turn_request, incoming)
    if isinstance(turn, bytes):
        return replayed(turn, key, stream)
    headers = {
        "X-Hermes-Session-Id": key,
        "X-Hermes-Context-Tokens": str(turn.context_tokens),
    }
    try:
        response = await svc.upstream.request(
            "POST",
            "chat/completions",
            body=orjson.dumps(turn.upstream_body),
            headers=forwarded_headers(request, keep_encoding=False),
        )
        await response.raise_for_status()
    except BaseException as exc:
        turn.fail()
        if isinstance(exc, UpstreamError):
            svc.conversations.stats.upstream_errors[type(exc).__name__] += 1
        raise
    if stream:
        return RelayResponse(
            relay_turn(turn, response),
            headers={**SSE_HEADERS, **headers},
            media_type=response.header("content-type", "text/event-stream"),
            on_close=turn.fail,
        )
    try:
        raw_answer = await response.read()
    except BaseException:
        turn.fail()
        raise
    finally:
        response.close()
    try:
        completion = orjson.loads(raw_answer)
        assistant = completion["choices"][0]["message"]
        usage = completion.get("usage")
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
        turn.fail()
        raise UpstreamError(
            "The upstream answered with something that is not a completion."
        ) from exc
    turn.finish(assistant, usage, raw_answer)
    return Response(
        raw_answer,
        status_code=response.status,
        headers=headers,
        media_type=response.header("content-type", "application/json"),
    )


async def relay_turn(turn: Turn, response: UpstreamResponse) -> AsyncIterator[bytes]:
    """Relay the upstream's stream untouched while rebuilding the answer beside it."""
    acc = StreamAccumulator()
    try:
        async for chunk in response.chunks():
            acc.feed(chunk)
            yield chunk
    except UpstreamError as exc:
        turn.fail()
        turn.conversations.stats.upstream_errors["UpstreamStreamBroken"] += 1
        yield error_frame(exc)
        return
    finally:
        response.close()
    if acc.error is not None:
        turn.fail()
        if not acc.done:
            yield b"data: [DONE]\n\n"
    elif not acc.done:
        turn.fail()
        yield error_frame(UpstreamError("The upstream ended the stream before [DONE]."))
    else:
        stored = None
        if turn.request.idempotency_key:
            stored = orjson.dumps(completion_from_stream(acc, turn.upstream_body["model"]))
        turn.finish(acc.message(), acc.usage, stored)


def replayed(stored: bytes, key: str, stream: bool) -> Response:
    headers = {"X-Hermes-Session-Id": key, "X-Hermes-Replayed": "true"}
    if stream:
        return Response(
            replay_as_stream(orjson.loads(stored)),
            headers={**SSE_HEADERS, **headers},
            media_type="text/event-stream",
        )
    return Response(stored, headers=headers, media_type="application/json")


async def relay(request: Request, path: str, body: bytes | None = None) -> Response:
    """Forward a request as it came and relay the answer byte for byte."""
    svc = services(request)
    if body is None:
        body = await read_body(request, svc.settings.max_body_bytes)
    response = await svc.upstream.request(
        request.method,
        path,
        body=body or None,
        headers=forwarded_headers(request, keep_encoding=True),
        query=request.url.query,
    )
    length = response.header("content-length")
    if length is not None and int(length) <= BUFFERED_RELAY and not is_event_stream(response):
        # A small answer of known length goes out in one piece (fewer writes
        # than streaming it, and no chunked framing); the bytes are the same.
        try:
            answer = await response.read()
        finally:
            response.close()
        relayed = Response(answer, status_code=response.status)
        relayed.raw_headers.extend(encode_headers(response.relay_headers()))
        return relayed
    return RelayResponse(
        response.chunks(),
        status_code=response.status,
        header_list=response.relay_headers(),
        on_close=response.close,
    )


def is_event_stream(response: UpstreamResponse) -> bool:
    return (response.header("content-type") or "").startswith("text/event-stream")


async def passthrough(request: Request) -> Response:
    tenant_of(request, services(request).tenants)
    return await relay(request, request.path_params["path"])


async def list_models(request: Request) -> Response:
    svc = services(request)
    tenant_of(request, svc.tenants)
    listing = await svc.upstream.request(
        "GET", "models", headers=forwarded_headers(request, keep_encoding=False)
    )
    try:
        await listing.raise_for_status()
        data = orjson.loads(await listing.read())
    except orjson.JSONDecodeError as exc:
        raise UpstreamError("The upstream's model list is not JSON.") from exc
    finally:
        listing.close()
    models = data.get("data") if isinstance(data, dict) else None
    if not isinstance(models, list):
        raise UpstreamError("The upstream's model list has no 'data' array.")
    alias = {"id": "hermes", "object": "model", "created": 0, "owned_by": "hermes-proxy"}
    return Response(
        orjson.dumps({"object": "list", "data": [alias, *models]}), media_type="application/json"
    )
