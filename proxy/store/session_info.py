"""What session management reads: a session with all its counters, pages, stats."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, fields

import orjson

from proxy.store.core import SESSION_COLUMNS, SESSION_FROM
from proxy.store.database import Database, Row
from proxy.store.records import SessionRecord

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
class SessionInfo(SessionRecord):
    """A session row with everything management shows: metadata and all counters."""

    end_reason: str | None
    transcript_tokens: int
    sent_tokens: int
    full_tokens: int

    @property
    def live(self) -> bool:
        return self.ended_at is None

    @property
    def saved_tokens(self) -> int:
        """Prompt tokens a full-history client would have sent beyond what the proxy sent."""
        return self.full_tokens - self.sent_tokens

    @classmethod
    def from_row(cls, row: Row) -> SessionInfo:
        base = SessionRecord.from_row(row)
        return cls(
            **{f.name: getattr(base, f.name) for f in fields(SessionRecord)},
            end_reason=row["end_reason"],
            transcript_tokens=int(row["transcript_tokens"]),
            sent_tokens=int(row["sent_tokens"]),
            full_tokens=int(row["full_tokens"]),
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
