"""Sessions in memory: what a turn needs, cached between turns.

A :class:`LiveSession` is only changed while its session lock is held. Each
turn checks it against the store's session row (one indexed read); anything
changed behind the proxy's back — a CLI reset, another replica — reloads it.
"""

from __future__ import annotations

import bisect
from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from compaction import Memory, Message, term_keys
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
    window_keys: Counter[str] = field(default_factory=Counter)
    """Words of the window (see :func:`compaction.term_keys`), counted, kept up to date."""
    memory_keys: frozenset[str] = frozenset()
    """Words of the memory."""

    def __post_init__(self) -> None:
        self.window_tokens = sum(m.tokens for m in self.window)
        self.window_wire = [m.to_openai() for m in self.window]
        self.window_keys = Counter(k for m in self.window for k in _keys(m))
        self.memory_keys = memory_keys(self.memory)

    def covers(self, keys: Iterable[str]) -> bool:
        """Whether the window or the memory already mentions each of ``keys``."""
        return all(k in self.window_keys or k in self.memory_keys for k in keys)

    @property
    def system_tokens(self) -> int:
        return sum(m.tokens for m in self.system)

    def append(self, messages: list[Message]) -> None:
        self.window.extend(messages)
        self.window_tokens += sum(m.tokens for m in messages)
        self.window_wire.extend(m.to_openai() for m in messages)
        self.window_keys.update(k for m in messages for k in _keys(m))
        self.tail = (self.tail + messages)[-TAIL:]
        self.last_seq = messages[-1].seq
        self.last_turn = messages[-1].turn

    def folded(self, memory: Memory) -> None:
        """Adopt a memory that folded in the oldest window messages."""
        self.memory = memory
        self.version += 1
        cut = bisect.bisect_right(self.window, memory.through_seq, key=lambda m: m.seq)
        self.window_tokens -= sum(m.tokens for m in self.window[:cut])
        self.window_keys.subtract(k for m in self.window[:cut] for k in _keys(m))
        self.window_keys += Counter()  # drop the words no longer in the window
        self.memory_keys = memory_keys(memory)
        del self.window[:cut]
        del self.window_wire[:cut]


def _keys(message: Message) -> Iterator[str]:
    if message.role in ("user", "assistant"):
        yield from term_keys(text_of(message.content))


def memory_keys(memory: Memory) -> frozenset[str]:
    texts = [f.text for f in memory.facts]
    texts += [f"{r.before} {r.after}" for r in memory.reversals]
    texts += list(memory.summary)
    return frozenset(k for text in texts for k in term_keys(text))


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
