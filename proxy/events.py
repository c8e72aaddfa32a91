"""Thread events on the wire: wakeups for live readers, SSE framing, the stream.

Events are always read from the store; :class:`EventHub` only says *when* to
read again. In one process a notification wakes the readers at once. Several
processes on one database (PostgreSQL) cannot see each other's notifications,
so there readers also re-read every ``poll_interval`` seconds: the hub is the
one place that would change to use ``LISTEN/NOTIFY`` instead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress

from starlette.responses import StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from proxy.store.runs import ThreadEvent

__all__ = ["EventHub", "EventStreamResponse", "event_frames", "frame"]

# Events read from the store per query while catching up.
PAGE = 500


class _Channel:
    __slots__ = ("changed", "readers", "version")

    def __init__(self) -> None:
        self.version = 0
        self.readers = 0
        self.changed = asyncio.Event()


class EventHub:
    """Per-thread wakeups: ``notify`` after storing events, ``wait`` to hear of them.

    >>> hub = EventHub()
    >>> with hub.subscribe("tenant", "thread") as version:  # doctest: +SKIP
    ...     events = read_from_store()
    ...     await hub.wait("tenant", "thread", version(), within=15)
    """

    def __init__(self, poll_interval: float | None = None) -> None:
        self.poll_interval = poll_interval
        self._channels: dict[tuple[str, str], _Channel] = {}

    def notify(self, tenant: str, thread_id: str) -> None:
        channel = self._channels.get((tenant, thread_id))
        if channel is not None:
            channel.version += 1
            channel.changed.set()
            channel.changed = asyncio.Event()

    @contextmanager
    def subscribe(self, tenant: str, thread_id: str) -> Iterator[Callable[[], int]]:
        """Keep the thread's channel while reading; yields a function returning its version.

        Read the version *before* reading the store, then :meth:`wait` for a
        newer one, and no notification can fall between the two.
        """
        key = (tenant, thread_id)
        channel = self._channels.get(key)
        if channel is None:
            channel = self._channels[key] = _Channel()
        channel.readers += 1
        try:
            yield lambda: channel.version
        finally:
            channel.readers -= 1
            if channel.readers == 0 and self._channels.get(key) is channel:
                del self._channels[key]

    async def wait(self, tenant: str, thread_id: str, version: int, within: float) -> bool:
        """Wait until the thread has news after ``version`` (True) or ``within`` seconds pass."""
        channel = self._channels.get((tenant, thread_id))
        if channel is None:
            raise RuntimeError("wait() outside subscribe()")
        if channel.version != version:
            return True
        if self.poll_interval is not None:
            within = min(within, self.poll_interval)
        with suppress(TimeoutError):
            await asyncio.wait_for(channel.changed.wait(), within)
        return channel.version != version


def frame(event: ThreadEvent) -> bytes:
    return f"id: {event.id}\nevent: {event.type}\ndata: {event.data}\n\n".encode()


async def event_frames(
    hub: EventHub,
    tenant: str,
    thread_id: str,
    after: int,
    read: Callable[[int], Awaitable[list[ThreadEvent]]],
    alive: Callable[[], Awaitable[bool]],
    keepalive: float,
) -> AsyncIterator[bytes]:
    """SSE frames: the stored events after ``after``, then new ones as they are stored.

    ``read(after)`` returns up to :data:`PAGE` stored events; ``alive()``
    says whether the thread still exists (the stream ends when it is deleted).
    """
    # The client's reconnection delay, and bytes that make proxies flush headers.
    yield b"retry: 1000\n: connected\n\n"
    last_sent = time.monotonic()
    woken = False
    with hub.subscribe(tenant, thread_id) as version:
        while True:
            seen = version()
            events = await read(after)
            if events:
                after = events[-1].id
                yield b"".join(frame(e) for e in events)
                last_sent = time.monotonic()
                if len(events) >= PAGE:
                    continue
            elif woken and not await alive():
                return  # woken by the thread's deletion
            remaining = keepalive - (time.monotonic() - last_sent)
            if remaining <= 0:
                if not await alive():
                    return
                yield b": keep-alive\n\n"
                last_sent = time.monotonic()
                continue
            woken = await hub.wait(tenant, thread_id, seen, remaining)


class EventStreamResponse(StreamingResponse):
    """``text/event-stream`` that stops as soon as the client goes away.

    Starlette notices a disconnect only when a write fails; an idle event
    stream writes only a keep-alive now and then, so this one also listens.
    """

    media_type = "text/event-stream"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        streaming = asyncio.ensure_future(self.stream_response(send))
        listening = asyncio.ensure_future(self._disconnected(receive))
        try:
            await asyncio.wait({streaming, listening}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (streaming, listening):
                task.cancel()
            for task in (streaming, listening):
                with suppress(asyncio.CancelledError, OSError):
                    await task

    @staticmethod
    async def _disconnected(receive: Receive) -> None:
        message: Message = {}
        while message.get("type") != "http.disconnect":
            message = await receive()
