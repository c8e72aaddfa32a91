"""Errors, and their one rendering: OpenAI's error envelope.

::

    ProxyError                      every error a client can be shown
    ├── InvalidRequest              400 invalid_request_error
    │   └── ContextLengthExceeded   400 context_length_exceeded
    ├── AuthenticationFailed        401 invalid_api_key
    ├── NotFound                    404
    ├── Conflict                    409
    ├── PayloadTooLarge             413
    ├── StorageError                503 the database failed
    └── UpstreamError               the upstream failed
        ├── UpstreamUnreachable     502
        ├── UpstreamTimeout         504
        └── UpstreamStatus          the upstream's own status and body, relayed

Handlers raise; :func:`error_response` renders, once, for every route.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import orjson

if TYPE_CHECKING:
    # The store raises these errors too, and the CLI uses the store: it should
    # not have to load the HTTP stack to start.
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = [
    "AuthenticationFailed",
    "Conflict",
    "ContextLengthExceeded",
    "InvalidRequest",
    "NotFound",
    "PayloadTooLarge",
    "StorageError",
    "ProxyError",
    "UpstreamError",
    "UpstreamStatus",
    "UpstreamTimeout",
    "UpstreamUnreachable",
    "error_body",
    "error_response",
]

logger = logging.getLogger("hermes.errors")


class ProxyError(Exception):
    status = 500
    type = "server_error"
    code: str | None = None

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code

    def body(self) -> bytes:
        return error_body(self.message, self.type, self.code, self.param)

    def response(self) -> Response:
        from starlette.responses import Response

        return Response(self.body(), status_code=self.status, media_type="application/json")


class InvalidRequest(ProxyError):
    status = 400
    type = "invalid_request_error"


class ContextLengthExceeded(InvalidRequest):
    code = "context_length_exceeded"


class AuthenticationFailed(ProxyError):
    status = 401
    type = "invalid_request_error"
    code = "invalid_api_key"


class NotFound(ProxyError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


class Conflict(ProxyError):
    status = 409
    type = "invalid_request_error"
    code = "conflict"


class PayloadTooLarge(ProxyError):
    status = 413
    type = "invalid_request_error"
    code = "request_too_large"


class UpstreamError(ProxyError):
    status = 502
    type = "upstream_error"


class UpstreamUnreachable(UpstreamError):
    code = "upstream_unreachable"


class UpstreamTimeout(UpstreamError):
    status = 504
    code = "upstream_timeout"


class UpstreamStatus(UpstreamError):
    """The upstream answered with an error: relayed with its own status and body."""

    def __init__(self, status: int, body: bytes, content_type: str | None) -> None:
        super().__init__(f"upstream answered {status}")
        self.status = status
        self.raw = body
        self.content_type = content_type or "application/json"

    def body(self) -> bytes:
        return self.raw

    def response(self) -> Response:
        from starlette.responses import Response

        return Response(self.raw, status_code=self.status, media_type=self.content_type)


def error_body(message: str, type: str, code: str | None = None, param: str | None = None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": type, "param": param, "code": code}})


def error_frame(error: ProxyError) -> bytes:
    """The SSE frames that end a stream which failed after it started."""
    body = error.body()
    try:
        parsed = orjson.loads(body)
        if not isinstance(parsed, dict) or "error" not in parsed:
            raise ValueError
    except ValueError:
        body = error_body(error.message, error.type, error.code)
    return b"data: " + body + b"\n\ndata: [DONE]\n\n"


async def error_response(request: Request, exc: Exception) -> Response:
    if isinstance(exc, ProxyError):
        return exc.response()
    logger.exception("unhandled error on %s %s", request.method, request.url.path)
    return ProxyError("The proxy failed unexpectedly; see its log.").response()


class StorageError(ProxyError):
    """The database failed; nothing of the request was half-written."""

    status = 503
    type = "server_error"
    code = "storage_unavailable"
