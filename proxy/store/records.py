"""Small typed values the store returns (rather than raw rows)."""

from __future__ import annotations

import itertools
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from compaction import Message

__all__ = ["SessionRecord", "TurnCommit", "new_pending_id", "new_session_id"]


# Ids need to be unique, not secret: a generator seeded once from the OS is
# enough, and costs nothing per call (the turn path makes one per request).
_random = random.Random(os.urandom(16))
_process = f"{_random.getrandbits(48):012x}"
_counter = itertools.count()


def new_session_id(now: float | None = None) -> str:
    """An id like ``20250305_091523_a1b2c3d4``: sortable by time, unique by chance."""
    stamp = time.strftime("%Y%m%d_%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"{stamp}_{_random.getrandbits(32):08x}"


def new_pending_id() -> str:
    """A unique id for a pending turn: this process's random tag and a counter."""
    return f"{_process}-{next(_counter)}"


@dataclass(frozen=True, slots=True)
class SessionRecord:
    id: str
    tenant: str
    key: str
    source: str
    user_id: str | None
    title: str | None
    model: str | None
    system_prompt: str | None
    parent_id: str | None
    started_at: float
    updated_at: float
    ended_at: float | None
    message_count: int
    last_seq: int
    last_turn: int
    input_tokens: int
    output_tokens: int
    compaction_tokens: int
    state_version: int

    @classmethod
    def from_row(cls, row: Any) -> SessionRecord:
        return cls(
            id=row["id"],
            tenant=row["tenant"],
            key=row["key"],
            source=row["source"],
            user_id=row["user_id"],
            title=row["title"],
            model=row["model"],
            system_prompt=row["system_prompt"],
            parent_id=row["parent_id"],
            started_at=row["started_at"],
            updated_at=row["updated_at"],
            ended_at=row["ended_at"],
            message_count=row["message_count"],
            last_seq=row["last_seq"],
            last_turn=row["last_turn"],
            input_tokens=row["input_tokens"],
            output_tokens=row["output_tokens"],
            compaction_tokens=row["compaction_tokens"],
            state_version=row["state_version"] or 0,
        )

    @property
    def system(self) -> tuple[Message, ...]:
        """The system prompt snapshot (decoded on demand: the turn path rarely needs it)."""
        return decode_system(self.system_prompt)


def encode_system(system: Sequence[Message]) -> str | None:
    if not system:
        return None
    return orjson.dumps([{**m.to_openai(), "tokens": m.tokens} for m in system]).decode()


def decode_system(raw: str | None) -> tuple[Message, ...]:
    if not raw:
        return ()
    return tuple(
        Message.from_openai(item, tokens=int(item.get("tokens", 0))) for item in orjson.loads(raw)
    )


@dataclass(frozen=True, slots=True)
class TurnCommit:
    """Everything one successful turn writes, in one transaction."""

    session_id: str
    pending_id: str
    messages: Sequence[Message]
    system: tuple[Message, ...] | None
    model: str | None
    input_tokens: int
    output_tokens: int
    updated_at: float
    idempotency: tuple[str, str, bytes] | None = None
    sent_tokens: int = 0
    """Prompt tokens the proxy sent upstream for this turn (its own count)."""
    history_floor: int = 0
    """The turn's prompt cost beside the stored transcript (system, new messages,
    tool schemas, reply priming): a full-history replay costs this plus the
    transcript's tokens."""
