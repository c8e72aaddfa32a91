"""The upstream HTTP/1.1 client against raw servers on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from proxy.http1 import ConnectionClosed, Http1Client, ProtocolError
from tests.servers import free_port

pytestmark = pytest.mark.anyio

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A TCP server on loopback; yields its origin and a list of connection counts."""
    connections: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            await handler(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}", connections


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head + await reader.readexactly(length)


def keep_alive(body: bytes, requests: int = 10) -> Handler:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(requests):
            try:
                await read_request(reader)
            except asyncio.IncompleteReadError:
                return
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-A: 1\r\nX-A: 2\r\n\r\n" % len(body)
                + body
            )
            await writer.drain()

    return handler


async def test_content_length_body_and_keep_alive_reuse() -> None:
    async with raw_server(keep_alive(b'{"ok": true}')) as (origin, connections):
        client = Http1Client(origin, read_timeout=5)
        for _ in range(3):
            response = await client.request(
                "POST", "/v1/x", [("Content-Type", "application/json")], b"{}"
            )
            assert response.status == 200
            assert await response.read() == b'{"ok": true}'
            assert [v for k, v in response.headers if k == "X-A"] == ["1", "2"]
        assert len(connections) == 1
        await client.aclose()


async def test_chunked_body_streams_in_pieces() -> None:
    release = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await release.wait()
        writer.write(b"6\r\nsecond\r\n0\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.1)

    async with raw_server(handler) as (origin, _):
        client = Http1Client(origin, read_timeout=5)
        response = await client.request("GET", "/", [])
        chunks = response.chunks()
        assert await anext(chunks) == b"first"
        release.set()
        assert [c async for c in chunks] == [b"second"]
        await client.aclose()


async def test_body_delimited_by_close() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end")
        await writer.drain()

    async with raw_server(handler) as (origin, _):
        client = Http1Client(origin, read_timeout=5)
        response = await client.request("GET", "/", [])
        assert await response.read() == b"until the end"
        await client.aclose()


async def test_a_stale_idle_connection_is_replaced_transparently() -> None:
    async with raw_server(keep_alive(b"fine", requests=1)) as (origin, connections):
        client = Http1Client(origin, read_timeout=5)
        assert await (await client.request("GET", "/", [])).read() == b"fine"
        await asyncio.sleep(0.1)  # the server closed the kept-alive connection meanwhile
        assert await (await client.request("GET", "/", [])).read() == b"fine"
        assert len(connections) == 2
        await client.aclose()


async def test_timeout_while_waiting_for_the_response() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(2)

    async with raw_server(handler) as (origin, _):
        client = Http1Client(origin, read_timeout=0.2)
        with pytest.raises(TimeoutError):
            await client.request("GET", "/", [])
        await client.aclose()


async def test_connection_broken_mid_body() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part")
        await writer.drain()

    async with raw_server(handler) as (origin, _):
        client = Http1Client(origin, read_timeout=5)
        response = await client.request("GET", "/", [])
        with pytest.raises(ConnectionClosed):
            await response.read()
        await client.aclose()


async def test_garbage_is_a_protocol_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"SMTP ready\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.2)

    async with raw_server(handler) as (origin, _):
        client = Http1Client(origin, read_timeout=5)
        with pytest.raises(ProtocolError):
            await client.request("GET", "/", [])
        await client.aclose()


async def test_refused_connection_raises_oserror() -> None:
    client = Http1Client(f"http://127.0.0.1:{free_port()}", connect_timeout=2)
    with pytest.raises(OSError):
        await client.request("GET", "/", [])


def test_origin_must_be_http() -> None:
    with pytest.raises(ValueError, match="http"):
        Http1Client("ftp://example.com")
