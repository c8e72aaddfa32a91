"""The upstream: one pooled HTTP client, error mapping at the boundary.

Everything the rest of the proxy sees is this module's :class:`UpstreamResponse`
and the :mod:`proxy.errors` hierarchy; the client itself is
:class:`proxy.http1.Http1Client` (see there for why it is not aiohttp or httpx).
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import orjson

from proxy.errors import (
    UpstreamError,
    UpstreamStatus,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from proxy.http1 import ConnectionClosed, Http1Client, Http1Response, ProtocolError

__all__ = ["HOP_BY_HOP", "Upstream", "UpstreamResponse"]

# Headers that describe one connection, not the message: never relayed.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


@contextmanager
def map_errors(what: str, *, started: bool = False) -> Iterator[None]:
    """Translate connection and timeout errors into the proxy's own.

    ``started``: the response had begun, so a broken connection is a broken
    response, not an unreachable upstream.
    """
    try:
        yield
    except TimeoutError as exc:
        raise UpstreamTimeout(f"The upstream did not answer in time ({what}).") from exc
    except (ConnectionClosed, ProtocolError) as exc:
        if started:
            raise UpstreamError(f"The upstream broke off its response ({what}): {exc}") from exc
        raise UpstreamUnreachable(f"The upstream closed the connection ({what}): {exc}") from exc
    except (OSError, ssl.SSLError) as exc:
        raise UpstreamUnreachable(f"The upstream is unreachable ({what}): {exc}") from exc


class UpstreamResponse:
    """A response whose body has not been read yet. Always :meth:`close` it."""

    def __init__(self, response: Http1Response) -> None:
        self._response = response
        self.status = response.status
        self.headers = response.headers

    @property
    def ok(self) -> bool:
        return self.status < 400

    def header(self, name: str, default: str | None = None) -> str | None:
        value = self._response.header(name)
        return default if value is None else value

    def relay_headers(self) -> list[tuple[str, str]]:
        return [(k, v) for k, v in self.headers if k.lower() not in HOP_BY_HOP]

    async def read(self) -> bytes:
        with map_errors("reading the response", started=True):
            return await self._response.read()

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives, chunk by chunk, unchanged."""
        with map_errors("streaming the response", started=True):
            async for chunk in self._response.chunks():
                yield chunk

    async def raise_for_status(self) -> None:
        if not self.ok:
            body = await self.read()
            self.close()
            raise UpstreamStatus(self.status, body, self.header("content-type"))

    def close(self) -> None:
        self._response.close()


class Upstream:
    """The OpenAI-compatible server every request is relayed to.

    >>> upstream = Upstream("https://api.openai.com/v1", api_key="sk-...")  # doctest: +SKIP
    >>> response = await upstream.request("POST", "chat/completions", body=b"{...}")
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
    ) -> None:
        parts = urlsplit(base_url.rstrip("/"))
        self.base_url = base_url.rstrip("/")
        self.base_path = parts.path
        self.api_key = api_key
        self._client = Http1Client(
            f"{parts.scheme}://{parts.netloc}",
            connect_timeout=connect_timeout,
            read_timeout=timeout,
        )

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        await self._client.aclose()

    def auth_headers(self, client_authorization: str | None) -> dict[str, str]:
        if self.api_key:
            return {"Authorization": f"Bearer {self.api_key}"}
        if client_authorization:
            return {"Authorization": client_authorization}
        return {}

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        query: str = "",
    ) -> UpstreamResponse:
        """Send a request and return once the response headers arrived."""
        target = f"{self.base_path}/{path.lstrip('/')}" + (f"?{query}" if query else "")
        with map_errors(f"{method} {path}"):
            response = await self._client.request(
                method, target, list((headers or {}).items()), body
            )
        return UpstreamResponse(response)

    async def post_json(
        self, path: str, payload: Mapping[str, Any], headers: Mapping[str, str]
    ) -> Any:
        """POST JSON, read the whole answer; upstream errors raise."""
        response = await self.request(
            "POST",
            path,
            body=orjson.dumps(payload),
            headers={"Content-Type": "application/json", "Accept-Encoding": "identity", **headers},
        )
        try:
            await response.raise_for_status()
            body = await response.read()
        finally:
            response.close()
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise UpstreamError("The upstream answered with invalid JSON.") from exc
