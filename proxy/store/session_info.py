"""What session management reads: a session with all its counters, pages, stats."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from compaction import Message
from proxy.store.core import SESSION_COLUMNS, SESSION_FROM
from proxy.store.database import Database, Row
from proxy.store.records import decode_system

__all__ = [
    "INFO_COLUMNS",
    "Page",
    "SessionInfo",
    "SessionStats",
    "SourceStats",
    "decode_cursor",
    "encode_cursor",
    "load_infos",
]

INFO_COLUMNS = SESSION_COLUMNS + ", s.end_reason, s.transcript_tokens, s.sent_tokens, s.full_tokens"


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session row with everything management shows: metadata and counters."""

    id: str
    tenant: str
    key: str
    source: str
    user_id: str | None
    title: str | None
    model: str | None
    system: tuple[Message, ...]
    parent_id: str | None
    started_at: float
    updated_at: float
    ended_at: float | None
    end_reason: str | None
    message_count: int
    last_seq: int
    last_turn: int
    input_tokens: int
    output_tokens: int
    compaction_tokens: int
    transcript_tokens: int
    sent_tokens: int
    full_tokens: int
    state_version: int

    @property
    def live(self) -> bool:
        return self.ended_at is None

    @property
    def saved_tokens(self) -> int:
        """Prompt tokens a full-history client would have sent beyond what the proxy sent."""
        return self.full_tokens - self.sent_tokens

    @classmethod
    def from_row(cls, row: Row) -> SessionInfo:
        return cls(
            id=row["id"],
            tenant=row["tenant"],
            key=row["key"],
            source=row["source"],
            user_id=row["user_id"],
            title=row["title"],
            model=row["model"],
            system=decode_system(row["system_prompt"]),
            parent_id=row["parent_id"],
            started_at=row["started_at"],
            updated_at=row["updated_at"],
            ended_at=row["ended_at"],
            end_reason=row["end_reason"],
            message_count=row["message_count"],
            last_seq=row["last_seq"],
            last_turn=row["last_turn"],
            input_tokens=int(row["input_tokens"]),
            output_tokens=int(row["output_tokens"]),
            compaction_tokens=int(row["compaction_tokens"]),
            transcript_tokens=int(row["transcript_tokens"]),
            sent_tokens=int(row["sent_tokens"]),
            full_tokens=int(row["full_tokens"]),
            state_version=row["state_version"] or 0,
        )


@dataclass(frozen=True, slots=True)
class Page:
    items: list[SessionInfo]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class SourceStats:
    source: str
    sessions: int
    live: int
    messages: int


@dataclass(frozen=True, slots=True)
class SessionStats:
    sources: list[SourceStats]
    input_tokens: int
    output_tokens: int
    compaction_tokens: int
    sent_tokens: int
    full_tokens: int
    database_bytes: int

    @property
    def sessions(self) -> int:
        return sum(s.sessions for s in self.sources)

    @property
    def messages(self) -> int:
        return sum(s.messages for s in self.sources)

    @property
    def saved_tokens(self) -> int:
        return self.full_tokens - self.sent_tokens


def encode_cursor(info: SessionInfo) -> str:
    raw = orjson.dumps([info.started_at, info.id])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """ValueError when the cursor is not one this store issued."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        started_at, session_id = orjson.loads(raw)
        return float(started_at), str(session_id)
    except (ValueError, TypeError, orjson.JSONDecodeError) as exc:
        raise ValueError(f"invalid cursor {cursor!r}") from exc


async def load_infos(db: Database, ids: Sequence[str]) -> dict[str, SessionInfo]:
    if not ids:
        return {}
    marks = ", ".join("?" for _ in ids)
    rows = await db.fetchall(
        f"SELECT {INFO_COLUMNS} FROM {SESSION_FROM} WHERE s.id IN ({marks})", tuple(ids)
    )
    return {row["id"]: SessionInfo.from_row(row) for row in rows}
