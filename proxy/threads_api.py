"""``/v1/threads``: threads, asynchronous runs and their event stream (HTTP side).

Handlers validate, scope everything by tenant and call :class:`~proxy.runs.Runs`
and :class:`~proxy.threads.Threads`; they never execute a run themselves.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route

from proxy.app_state import Services, services
from proxy.auth import tenant_of
from proxy.chat import SSE_HEADERS, parse_body, read_body
from proxy.errors import InvalidRequest, NotFound, ProxyError
from proxy.events import EventStreamResponse, event_frames
from proxy.runs import run_view
from proxy.store.threads import ThreadRecord
from proxy.threads import valid_metadata, valid_title

__all__ = ["RUN_OPTIONS", "thread_routes"]

# Request fields a run passes to the upstream on every step ("instructions"
# becomes the system prompt); anything else in a message body is an error.
RUN_OPTIONS = frozenset(
    {
        "model",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "response_format",
        "seed",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "reasoning_effort",
        "user",
    }
)
MESSAGE_FIELDS = frozenset({"role", "content", "attachments"})


def json_response(data: Any, status_code: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status_code, media_type="application/json")


async def scoped(request: Request) -> tuple[Services, str]:
    svc = services(request)
    return svc, tenant_of(request, svc.tenants)


async def json_body(request: Request, svc: Services) -> dict[str, Any]:
    raw = await read_body(request, svc.settings.max_body_bytes)
    return parse_body(raw) if raw.strip() else {}


def int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise InvalidRequest(f"'{name}' must be an integer from {low} to {high}.", param=name)
    return int(raw)


def thread_view(record: ThreadRecord) -> dict[str, Any]:
    active = {"run_id": record.run_id, "status": record.run_status} if record.run_id else None
    return {
        "thread_id": record.id,
        "object": "thread",
        "title": record.title,
        "metadata": record.metadata,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "message_count": record.message_count,
        "last_event_id": record.last_event_id,
        "active_run": active,
    }


def content_of(body: dict[str, Any]) -> str | list[dict[str, Any]]:
    """A user message's content: text or OpenAI content parts, plus any attachments."""
    content = body.get("content")
    attachments = body.get("attachments") or []
    if isinstance(content, str):
        valid = bool(content.strip()) or bool(attachments)
    else:
        valid = isinstance(content, list) and bool(content)
    if not valid:
        raise InvalidRequest(
            "'content' must be a non-empty string or array of content parts.", param="content"
        )
    parts = content if isinstance(content, list) else []
    if not isinstance(attachments, list) or not all(
        isinstance(p, dict) and isinstance(p.get("type"), str) for p in [*parts, *attachments]
    ):
        raise InvalidRequest(
            "Content parts and 'attachments' must be objects with a 'type' (OpenAI content "
            "parts such as text, image_url, input_audio or file).",
            param="attachments",
        )
    if not attachments:
        return content if isinstance(content, str) else parts
    text = [{"type": "text", "text": content}] if isinstance(content, str) and content else []
    return [*text, *parts, *attachments]


def user_message(body: dict[str, Any]) -> dict[str, Any]:
    if body.get("role", "user") != "user":
        raise InvalidRequest("A message sent to a thread has the role 'user'.", param="role")
    return {"role": "user", "content": content_of(body)}


def run_options(body: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(body) - RUN_OPTIONS - MESSAGE_FIELDS)
    if unknown:
        raise InvalidRequest(
            f"Unknown field(s) {', '.join(unknown)}. A message takes 'content' (and "
            f"'attachments'); a run takes {', '.join(sorted(RUN_OPTIONS))}.",
            param=unknown[0],
        )
    for name in ("model", "instructions"):
        if name in body and not isinstance(body[name], str):
            raise InvalidRequest(f"'{name}' must be a string.", param=name)
    if "tools" in body and not (
        isinstance(body["tools"], list) and all(isinstance(t, dict) for t in body["tools"])
    ):
        raise InvalidRequest("'tools' must be an array of tool objects.", param="tools")
    return {k: v for k, v in body.items() if k in RUN_OPTIONS}


# -- threads -------------------------------------------------------------------


async def threads_root(request: Request) -> Response:
    if request.method == "POST":
        return await create_thread(request)
    if request.method == "GET":
        return await list_threads(request)
    error = ProxyError(f"Method {request.method} is not allowed on {request.url.path}.")
    error.status, error.type = 405, "invalid_request_error"
    raise error


async def create_thread(request: Request) -> Response:
    svc, tenant = await scoped(request)
    body = await json_body(request, svc)
    unknown = sorted(set(body) - {"title", "metadata"})
    if unknown:
        raise InvalidRequest(
            f"Unknown field(s) {', '.join(unknown)}: a thread takes 'title' and 'metadata'.",
            param=unknown[0],
        )
    title = valid_title(body.get("title"))
    record = await svc.runs.threads.create(tenant, title, valid_metadata(body.get("metadata")))
    return json_response(thread_view(record))


async def list_threads(request: Request) -> Response:
    svc, tenant = await scoped(request)
    limit = int_param(request, "limit", 20, 1, 100)
    records = await svc.runs.threads.page(tenant, limit + 1, request.query_params.get("after"))
    return json_response(
        {
            "object": "list",
            "data": [thread_view(r) for r in records[:limit]],
            "has_more": len(records) > limit,
        }
    )


async def get_thread(request: Request) -> Response:
    svc, tenant = await scoped(request)
    record = await svc.runs.threads.get(tenant, request.path_params["thread_id"])
    return json_response(thread_view(record))


async def update_thread(request: Request) -> Response:
    svc, tenant = await scoped(request)
    body = await json_body(request, svc)
    record = await svc.runs.threads.update(tenant, request.path_params["thread_id"], body)
    return json_response(thread_view(record))


async def delete_thread(request: Request) -> Response:
    svc, tenant = await scoped(request)
    thread_id = await svc.runs.threads.delete(tenant, request.path_params["thread_id"])
    return json_response({"thread_id": thread_id, "object": "thread.deleted", "deleted": True})


async def list_messages(request: Request) -> Response:
    svc, tenant = await scoped(request)
    record = await svc.runs.threads.get(tenant, request.path_params["thread_id"])
    after = int_param(request, "after", 0, 0, 2**62)
    limit = int_param(request, "limit", 100, 1, 1000)
    messages = []
    if record.session_id is not None:
        stored = await svc.store.load_messages(record.session_id, after, limit + 1)
        messages = [{**m.to_openai(), "seq": m.seq, "created_at": m.created_at} for m in stored]
    return json_response(
        {"object": "list", "data": messages[:limit], "has_more": len(messages) > limit}
    )


# -- runs ----------------------------------------------------------------------


async def post_message(request: Request) -> Response:
    svc, tenant = await scoped(request)
    body = await json_body(request, svc)
    options = run_options(body)
    posted = await svc.runs.post_message(
        tenant,
        request.path_params["thread_id"],
        user_message(body),
        options,
        request.headers.get("idempotency-key"),
    )
    return json_response(
        {
            "run_id": posted.run.id,
            "thread_id": posted.run.thread_id,
            "status": posted.run.status,
            "input_id": posted.input_id,
            "steering": posted.steering,
            "replayed": posted.replayed,
        },
        status_code=202,
    )


async def list_runs(request: Request) -> Response:
    svc, tenant = await scoped(request)
    thread_id = await svc.runs.threads.resolve(tenant, request.path_params["thread_id"])
    limit = int_param(request, "limit", 20, 1, 100)
    runs = await svc.store.list_runs(tenant, thread_id, limit)
    return json_response({"object": "list", "data": [run_view(r) for r in runs]})


async def get_run(request: Request) -> Response:
    svc, tenant = await scoped(request)
    thread_id = await svc.runs.threads.resolve(tenant, request.path_params["thread_id"])
    run_id = request.path_params["run_id"]
    run = await svc.store.thread_run(tenant, thread_id, run_id)
    if run is None:
        raise NotFound(f"No run {run_id!r} on thread {thread_id!r}.", param="run_id")
    return json_response(run_view(run))


async def cancel_run(request: Request) -> Response:
    svc, tenant = await scoped(request)
    run = await svc.runs.cancel(
        tenant, request.path_params["thread_id"], request.path_params["run_id"]
    )
    return json_response(run_view(run))


async def submit_input(request: Request) -> Response:
    svc, tenant = await scoped(request)
    body = await json_body(request, svc)
    unknown = sorted(set(body) - {"tool_outputs", *MESSAGE_FIELDS})
    if unknown:
        raise InvalidRequest(
            f"Unknown field(s) {', '.join(unknown)}: input takes 'tool_outputs' and/or a "
            "message ('content', 'attachments').",
            param=unknown[0],
        )
    outputs = body.get("tool_outputs") or []
    if not isinstance(outputs, list) or not all(
        isinstance(o, dict) and isinstance(o.get("tool_call_id"), str) and "output" in o
        for o in outputs
    ):
        raise InvalidRequest(
            '\'tool_outputs\' must be an array of {"tool_call_id": ..., "output": ...}.',
            param="tool_outputs",
        )
    for output in outputs:
        if not isinstance(output["output"], str):
            output["output"] = orjson.dumps(output["output"]).decode()
    message = user_message(body) if "content" in body or "attachments" in body else None
    if not outputs and message is None:
        raise InvalidRequest("Send 'tool_outputs', a message ('content'), or both.")
    run = await svc.runs.submit_input(
        tenant,
        request.path_params["thread_id"],
        request.path_params["run_id"],
        outputs,
        message,
    )
    return json_response(run_view(run), status_code=202)


async def stream_events(request: Request) -> Response:
    svc, tenant = await scoped(request)
    thread_id = await svc.runs.threads.resolve(tenant, request.path_params["thread_id"])
    last = request.headers.get("last-event-id")
    if last is not None and last.strip().isdigit():
        after = int(last)
    else:
        after = int_param(request, "after", 0, 0, 2**62)
    store = svc.store

    async def read(after: int) -> list[Any]:
        return await store.events_after(tenant, thread_id, after)

    async def alive() -> bool:
        return await store.get_thread(tenant, thread_id) is not None

    frames = event_frames(
        svc.runs.hub, tenant, thread_id, after, read, alive, svc.settings.events_keepalive
    )
    return EventStreamResponse(frames, headers=SSE_HEADERS)


def thread_routes() -> list[BaseRoute]:
    """The routes, to be placed before the ``/v1/{path}`` passthrough."""
    return [
        Route(
            "/v1/threads",
            threads_root,
            methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
        ),
        # Under the prefix, unknown paths and methods are the proxy's 404/405,
        # never forwarded to the upstream (whose /v1/threads is another API).
        Mount(
            "/v1/threads",
            routes=[
                Route("/{thread_id}", get_thread, methods=["GET"]),
                Route("/{thread_id}", update_thread, methods=["PATCH"]),
                Route("/{thread_id}", delete_thread, methods=["DELETE"]),
                Route("/{thread_id}/messages", list_messages, methods=["GET"]),
                Route("/{thread_id}/messages", post_message, methods=["POST"]),
                Route("/{thread_id}/events", stream_events, methods=["GET"]),
                Route("/{thread_id}/runs", list_runs, methods=["GET"]),
                Route("/{thread_id}/runs/{run_id}", get_run, methods=["GET"]),
                Route("/{thread_id}/runs/{run_id}/cancel", cancel_run, methods=["POST"]),
                Route("/{thread_id}/runs/{run_id}/input", submit_input, methods=["POST"]),
            ],
        ),
    ]
