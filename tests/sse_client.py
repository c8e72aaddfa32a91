"""A small Server-Sent Events client over httpx streaming, for the thread event tests."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

__all__ = ["Event", "EventStream", "terminal"]


@dataclass
class Event:
    id: int
    type: str
    data: dict[str, Any]


@dataclass
class EventStream:
    """``with EventStream(client, url) as s: s.until(terminal)`` — frames as they arrive."""

    client: httpx.Client
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    comments: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    retry: int | None = None

    def __enter__(self) -> EventStream:
        self._cm = self.client.stream("GET", self.url, headers=self.headers)
        self.response = self._cm.__enter__()
        self._lines = self.response.iter_lines()
        return self

    def __exit__(self, *exc: object) -> None:
        self._cm.__exit__(None, None, None)

    def frames(self) -> Iterator[Event | str]:
        """Events, and comments (as strings), in arrival order."""
        fields: dict[str, str] = {}
        for line in self._lines:
            if line == "":
                if "data" in fields:
                    event = Event(
                        int(fields["id"]),
                        fields.get("event", "message"),
                        orjson.loads(fields["data"]),
                    )
                    self.events.append(event)
                    yield event
                fields = {}
            elif line.startswith(":"):
                self.comments.append(line[1:].strip())
                yield line[1:].strip()
            else:
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "retry":
                    self.retry = int(value)
                else:
                    fields[name] = value

    def until(self, stop: Callable[[Event], bool], timeout: float = 15.0) -> list[Event]:
        """Read until an event satisfies ``stop``; return the events read by this call."""
        deadline = time.monotonic() + timeout
        read: list[Event] = []
        for frame in self.frames():
            if isinstance(frame, Event):
                read.append(frame)
                if stop(frame):
                    return read
            if time.monotonic() > deadline:
                break
        raise TimeoutError(f"no matching event; read {[(e.id, e.type) for e in read]}")

    def take(self, count: int, timeout: float = 15.0) -> list[Event]:
        seen = [0]

        def enough(_: Event) -> bool:
            seen[0] += 1
            return seen[0] >= count

        return self.until(enough, timeout)


def terminal(run_id: str | None = None) -> Callable[[Event], bool]:
    """Stop at the run's move to a status the run rests in."""

    def stop(event: Event) -> bool:
        return (
            event.type == "run_status"
            and event.data["status"] in ("completed", "error", "cancelled", "waiting_on_human")
            and (run_id is None or event.data["run_id"] == run_id)
        )

    return stop
