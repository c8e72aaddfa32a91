"""``/api/sessions`` and ``/api/search``: list, inspect, rename, delete, export, reset, search.

Every endpoint is scoped by the caller's tenant: another tenant's sessions
are not found, whatever their id. ``{id}`` is anything
:func:`~proxy.sessions.resolve_session` accepts (key, id or unique prefix);
a key containing ``/`` is sent percent-encoded (``repo:acme%2Fbackend``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import unquote

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Scope

from proxy.app_state import Services, services
from proxy.auth import tenant_of
from proxy.errors import Conflict, InvalidRequest
from proxy.resets import Resetter
from proxy.sessions import delete_session as remove_session
from proxy.sessions import detail_json, message_json, resolve_session, session_json
from proxy.store.search import QueryError
from proxy.store.session_info import SessionInfo

__all__ = ["SESSION_ROUTES", "SessionRoute"]

MAX_TITLE = 200
# Stands in for an encoded "/" while routing; a session id is printable, so never this.
_SLASH = "\x00"


class SessionRoute(Route):
    """A route whose ``{id}`` may contain ``/``, sent percent-encoded as ``%2F``.

    Routing sees the decoded path, where such a slash would split the id; this
    route matches on the raw path instead, keeping encoded slashes inside the
    segment they belong to, so ``/api/sessions/{id}/state`` and the like stay
    free for other routes.
    """

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        raw = scope.get("raw_path")
        if scope["type"] != "http" or not raw or b"%2f" not in raw.lower():
            return super().matches(scope)
        text = raw.decode("latin-1").replace("%2F", _SLASH).replace("%2f", _SLASH)
        path = unquote(text, encoding="utf-8", errors="strict")
        match, child = super().matches({**scope, "path": path})
        if match is not Match.NONE:
            params = child["path_params"]
            child["path_params"] = {
                k: v.replace(_SLASH, "/") if isinstance(v, str) else v for k, v in params.items()
            }
        return match, child


def json_response(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


def int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidRequest(f"'{name}' must be an integer, not {raw!r}.", param=name) from None
    if not low <= value <= high:
        raise InvalidRequest(f"'{name}' must be between {low} and {high}.", param=name)
    return value


async def json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw:
        return {}
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"The request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    return body


async def target(request: Request) -> tuple[Services, str, SessionInfo]:
    svc = services(request)
    tenant = tenant_of(request, svc.tenants)
    info = await resolve_session(svc.store, tenant, request.path_params["id"])
    return svc, tenant, info


async def list_sessions(request: Request) -> Response:
    svc = services(request)
    tenant = tenant_of(request, svc.tenants)
    limit = int_param(request, "limit", 20, 1, 200)
    try:
        page = await svc.store.list_sessions(
            tenant,
            source=request.query_params.get("source") or None,
            limit=limit,
            cursor=request.query_params.get("cursor") or None,
        )
    except ValueError as exc:
        raise InvalidRequest(f"{exc}: pass back a next_cursor as given.", param="cursor") from exc
    return json_response(
        {
            "object": "list",
            "data": [session_json(info) for info in page.items],
            "has_more": page.next_cursor is not None,
            "next_cursor": page.next_cursor,
        }
    )


async def create_session(request: Request) -> Response:
    """A new session whose key is its generated id (for clients like ``chat``)."""
    svc = services(request)
    tenant = tenant_of(request, svc.tenants)
    body = await json_body(request)
    source = body.get("source", "api")
    if not isinstance(source, str) or not 1 <= len(source) <= 64:
        raise InvalidRequest("'source' must be a string of 1 to 64 characters.", param="source")
    user_id = body.get("user_id")
    if user_id is not None and not isinstance(user_id, str):
        raise InvalidRequest("'user_id' must be a string.", param="user_id")
    title = _title(body) if "title" in body else None
    record = await svc.store.create_session(tenant, source=source, user_id=user_id)
    if title:
        await svc.store.rename(record.id, title)
    info = await svc.store.session_info(record.id)
    assert info is not None
    return json_response(session_json(info), status=201)


def _title(body: dict[str, Any]) -> str | None:
    title = body.get("title")
    if title is not None and (not isinstance(title, str) or len(title) > MAX_TITLE):
        raise InvalidRequest(
            f"'title' must be a string of at most {MAX_TITLE} characters, or null.", param="title"
        )
    return title.strip() or None if isinstance(title, str) else None


async def get_session(request: Request) -> Response:
    svc, _, info = await target(request)
    return json_response(await detail_json(svc.store, info, svc.conversations.renderer))


async def update_session(request: Request) -> Response:
    svc, _, info = await target(request)
    body = await json_body(request)
    if "title" not in body:
        raise InvalidRequest("Send {'title': ...} to rename a session.", param="title")
    await svc.store.rename(info.id, _title(body))
    renamed = await svc.store.session_info(info.id)
    assert renamed is not None
    return json_response(await detail_json(svc.store, renamed, svc.conversations.renderer))


async def delete_session(request: Request) -> Response:
    svc, tenant, info = await target(request)
    # Not in the middle of one of this proxy's turns.
    async with svc.store.session_lock(tenant, info.key):
        await remove_session(svc.store, info)
        svc.conversations.cache.drop(tenant, info.key)
    return json_response({"id": info.id, "object": "session.deleted", "deleted": True})


async def list_messages(request: Request) -> Response:
    svc, _, info = await target(request)
    after = int_param(request, "after", 0, 0, 2**62)
    limit = int_param(request, "limit", 100, 1, 1000)
    messages = await svc.store.load_messages(info.id, after, limit + 1)
    more = len(messages) > limit
    messages = messages[:limit]
    return json_response(
        {
            "object": "list",
            "session_id": info.id,
            "data": [message_json(m) for m in messages],
            "has_more": more,
            "next_after": messages[-1].seq if more else None,
        }
    )


async def export_session(request: Request) -> Response:
    svc, tenant, info = await target(request)

    async def lines() -> AsyncIterator[bytes]:
        async for line in svc.store.export_sessions(tenant, session_ids=[info.id]):
            yield orjson.dumps(line) + b"\n"

    return StreamingResponse(
        lines(),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{info.id}.jsonl"'},
    )


async def reset_session(request: Request) -> Response:
    svc, tenant, info = await target(request)
    if not info.live:
        raise Conflict(
            f"Session {info.id} has already ended ({info.end_reason or 'ended'}); "
            f"reset the live session under key {info.key!r} instead.",
            code="session_ended",
        )
    resetter = Resetter(
        svc.store, svc.compactor.summarizer, svc.compactor.budget, cache=svc.conversations.cache
    )
    new = await resetter.reset(tenant, info.key)
    return json_response(await detail_json(svc.store, new, svc.conversations.renderer))


async def search(request: Request) -> Response:
    svc = services(request)
    tenant = tenant_of(request, svc.tenants)
    query = request.query_params.get("q", "")
    limit = int_param(request, "limit", 3, 1, 50)
    try:
        result = await svc.store.search_sessions(
            tenant, query, limit=limit, source=request.query_params.get("source") or None
        )
    except QueryError as exc:
        raise InvalidRequest(str(exc), param="q", code="invalid_query") from exc
    return json_response(
        {
            "object": "list",
            "query": result.query,
            "rewritten": result.rewritten,
            "data": [
                {
                    "session": session_json(hit.session),
                    "score": hit.score,
                    "hits": hit.hits,
                    "excerpts": [
                        {
                            "seq": e.seq,
                            "turn": e.turn,
                            "role": e.role,
                            "created_at": e.created_at,
                            "text": e.text,
                        }
                        for e in hit.excerpts
                    ],
                }
                for hit in result.sessions
            ],
        }
    )


SESSION_ROUTES: list[BaseRoute] = [
    Route("/api/sessions", list_sessions, methods=["GET"]),
    Route("/api/sessions", create_session, methods=["POST"]),
    SessionRoute("/api/sessions/{id}", get_session, methods=["GET"]),
    SessionRoute("/api/sessions/{id}", update_session, methods=["PATCH"]),
    SessionRoute("/api/sessions/{id}", delete_session, methods=["DELETE"]),
    SessionRoute("/api/sessions/{id}/messages", list_messages, methods=["GET"]),
    SessionRoute("/api/sessions/{id}/export", export_session, methods=["GET"]),
    SessionRoute("/api/sessions/{id}/reset", reset_session, methods=["POST"]),
    Route("/api/search", search, methods=["GET"]),
]
