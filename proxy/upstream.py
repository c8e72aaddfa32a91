"""The upstream: one pooled HTTP client, error mapping at the boundary.

The client is aiohttp rather than httpx: on this workload (many small
requests relayed concurrently) httpx's pool tops out near 200 requests/s at
concurrency 32 where aiohttp serves about 1,800 on the same machine
(encode/httpx#3215). Everything the rest of the proxy sees is this module's
:class:`UpstreamResponse` and the :mod:`proxy.errors` hierarchy.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import aiohttp
import orjson
from multidict import CIMultiDict
from yarl import URL

from proxy.errors import (
    InvalidRequest,
    UpstreamError,
    UpstreamStatus,
    UpstreamTimeout,
    UpstreamUnreachable,
)

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
def map_errors(what: str) -> Iterator[None]:
    """Translate aiohttp's and asyncio's exceptions into the proxy's own."""
    try:
        yield
    except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
        raise UpstreamTimeout(f"The upstream did not answer in time ({what}).") from exc
    except aiohttp.InvalidURL as exc:
        raise InvalidRequest(f"Invalid upstream URL: {exc}") from exc
    except (aiohttp.ClientConnectorError, aiohttp.ServerDisconnectedError) as exc:
        raise UpstreamUnreachable(f"The upstream is unreachable ({what}): {exc}") from exc
    except aiohttp.ClientPayloadError as exc:
        raise UpstreamError(f"The upstream broke off its response ({what}): {exc}") from exc
    except (aiohttp.ClientError, OSError) as exc:
        raise UpstreamUnreachable(f"The upstream request failed ({what}): {exc}") from exc


class UpstreamResponse:
    """A response whose body has not been read yet. Always :meth:`close` it."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status = response.status
        self.headers: Mapping[str, str] = response.headers

    @property
    def ok(self) -> bool:
        return self.status < 400

    def relay_headers(self) -> dict[str, str]:
        return {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}

    async def read(self) -> bytes:
        with map_errors("reading the response"):
            return await self._response.read()

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives, chunk by chunk, unchanged."""
        with map_errors("streaming the response"):
            async for chunk in self._response.content.iter_any():
                yield chunk

    async def raise_for_status(self) -> None:
        if not self.ok:
            body = await self.read()
            self.close()
            raise UpstreamStatus(self.status, body, self.headers.get("content-type"))

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
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=connect_timeout, sock_read=timeout
        )
        self._session: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, enable_cleanup_closed=True)
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=self._timeout,
            auto_decompress=False,
            skip_auto_headers=("User-Agent",),
            json_serialize=lambda obj: orjson.dumps(obj).decode(),
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

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
        headers: Mapping[str, str] | CIMultiDict[str] | None = None,
        query: str = "",
        decompress: bool = True,
    ) -> UpstreamResponse:
        """Send a request and return once the response headers arrived."""
        assert self._session is not None, "upstream client is not open"
        with map_errors(f"{method} {path}"):
            response = await self._session.request(
                method,
                URL(self.url(path) + (f"?{query}" if query else ""), encoded=True),
                data=body,
                headers=headers,
                allow_redirects=False,
                auto_decompress=decompress,
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
            headers={"Content-Type": "application/json", **headers},
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
