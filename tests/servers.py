"""Real servers on loopback for tests: uvicorn in a thread, on a free port."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import uvicorn

__all__ = ["running", "free_port"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class _Server(uvicorn.Server):
    """uvicorn's server, woken as soon as it is told to exit.

    uvicorn looks at ``should_exit`` every 0.1 s; a suite that starts and
    stops a few hundred servers would spend half a minute just waiting to
    be noticed.
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.1)

    def exit(self) -> None:
        self.should_exit = True
        if self._loop is not None and self._wake is not None:
            with suppress(RuntimeError):  # the loop has already closed
                self._loop.call_soon_threadsafe(self._wake.set)


@contextmanager
def running(app: Any, *, port: int | None = None) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 until the block ends; yield its base URL."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port or 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=5
    )
    server = _Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.exit()
        thread.join(timeout=20)
        sock.close()
