"""A streaming response that always runs its finalizer."""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Mapping, Sequence

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

__all__ = ["RelayResponse", "encode_headers"]


def encode_headers(headers: Sequence[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]


class RelayResponse(StreamingResponse):
    """Relays an async byte stream; ``on_close`` runs however the response ends.

    Starlette cancels the body iterator when the client disconnects; an
    iterator that never started would never run its own ``finally``, so the
    cleanup a turn needs (fail it unless it finished) lives here instead.
    """

    def __init__(
        self,
        content: AsyncIterable[bytes],
        *,
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
        header_list: Sequence[tuple[str, str]] = (),
        media_type: str | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(content, status_code=status_code, headers=headers, media_type=media_type)
        # Relayed headers keep their repeats (Set-Cookie, …), so they go in raw.
        self.raw_headers.extend(
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in header_list
        )
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            if self.on_close is not None:
                self.on_close()
