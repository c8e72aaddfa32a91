"""Sessions in memory: what a turn needs, cached between turns.

A :class:`LiveSession` is only changed while its session lock is held. Each
turn checks it against the store's session row (one indexed read); anything
changed behind the proxy's back — a CLI reset, another replica — reloads it.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from compaction import Memory, Message
from compaction.tokens import text_of

__all__ = ["TAIL", "LiveSession", "SessionCache"]

# How many stored messages the merge step compares incoming history with.
TAIL = 32


@dataclass
class LiveSession:
    id: str
    tenant: str
    key: str
    last_seq: int
    last_turn: int
    version: int
    memory: Memory
    system: tuple[Message, ...]
    window: list[Message]
    tail: list[Message] = field(default_factory=list)
    window_tokens: int = 0
    """The window's total tokens, kept up to date."""
    window_wire: list[dict[str, Any]] = field(default_factory=list)
    """The window's messages in OpenAI form, kept up to date."""
    window_lower: list[str] = field(default_factory=list)
    """Each window message's text, lowercased, for :meth:`unseen`."""

    def __post_init__(self) -> None:
        self.window_tokens = sum(m.tokens for m in self.window)
        self.window_wire = [m.to_openai() for m in self.window]
        self.window_lower = [_lower(m) for m in self.window]

    def unseen(self, words: Iterable[str], memory_text: str) -> list[str]:
        """Those of ``words`` that neither the window nor the memory's text mentions."""
        window = "\n".join(self.window_lower)
        memory = memory_text.lower()
        return [word for word in words if (w := word.lower()) not in window and w not in memory]

    @property
    def system_tokens(self) -> int:
        return sum(m.tokens for m in self.system)

    def append(self, messages: list[Message]) -> None:
        self.window.extend(messages)
        self.window_tokens += sum(m.tokens for m in messages)
        self.window_wire.extend(m.to_openai() for m in messages)
        self.window_lower.extend(_lower(m) for m in messages)
        self.tail = (self.tail + messages)[-TAIL:]
        self.last_seq = messages[-1].seq
        self.last_turn = messages[-1].turn

    def folded(self, memory: Memory) -> None:
        """Adopt a memory that folded in the oldest window messages."""
        self.memory = memory
        self.version += 1
        cut = bisect.bisect_right(self.window, memory.through_seq, key=lambda m: m.seq)
        self.window_tokens -= sum(m.tokens for m in self.window[:cut])
        del self.window_lower[:cut]
        del self.window[:cut]
        del self.window_wire[:cut]


def _lower(message: Message) -> str:
    return text_of(message.content).lower() if message.role in ("user", "assistant") else ""


class SessionCache:
    """At most ``size`` live sessions, least recently used evicted first."""

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, str], LiveSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, tenant: str, key: str) -> LiveSession | None:
        live = self._items.get((tenant, key))
        if live is not None:
            self._items.move_to_end((tenant, key))
        return live

    def put(self, live: LiveSession) -> None:
        self._items[(live.tenant, live.key)] = live
        self._items.move_to_end((live.tenant, live.key))
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def drop(self, tenant: str, key: str) -> None:
        self._items.pop((tenant, key), None)
