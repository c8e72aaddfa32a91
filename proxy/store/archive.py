"""Export and import of whole sessions: one JSON object per session (JSONL).

A line holds the session's metadata and counters, its memory exactly as
stored, and every message in OpenAI shape (content parts and tool calls
included) with its bookkeeping. Importing it back restores the session
byte for byte: export → delete → import → export gives the same lines.

The tenant is not part of a line: export is per tenant, and import writes
into the tenant it is given.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from compaction import Message
from proxy.store.core import (
    INSERT_MESSAGE,
    MESSAGE_COLUMNS,
    SESSION_FROM,
    CoreStore,
    message_from_row,
    message_row,
)
from proxy.store.database import Tx
from proxy.store.records import encode_system
from proxy.store.session_info import INFO_COLUMNS, SessionInfo

__all__ = ["EXPORT_FORMAT", "ArchiveError", "SessionArchive", "message_json"]

EXPORT_FORMAT = "hermes-session/1"
BATCH = 100
COUNTERS = (
    "message_count",
    "last_seq",
    "last_turn",
    "input_tokens",
    "output_tokens",
    "compaction_tokens",
    "transcript_tokens",
    "sent_tokens",
    "full_tokens",
)


class ArchiveError(ValueError):
    """A line that is not an exported session."""


def message_json(m: Message) -> dict[str, Any]:
    return {
        "seq": m.seq,
        "turn": m.turn,
        "role": m.role,
        "content": m.content,
        "name": m.name,
        "tool_calls": m.tool_calls,
        "tool_call_id": m.tool_call_id,
        "tokens": m.tokens,
        "created_at": m.created_at,
    }


def session_line(
    info: SessionInfo, state: Any, state_at: float | None, messages: list[Message]
) -> dict[str, Any]:
    return {
        "format": EXPORT_FORMAT,
        "id": info.id,
        "key": info.key,
        "source": info.source,
        "user_id": info.user_id,
        "title": info.title,
        "model": info.model,
        "system_prompt": [{**m.to_openai(), "tokens": m.tokens} for m in info.system] or None,
        "parent_id": info.parent_id,
        "started_at": info.started_at,
        "updated_at": info.updated_at,
        "ended_at": info.ended_at,
        "end_reason": info.end_reason,
        **{name: getattr(info, name) for name in COUNTERS},
        "memory_version": info.state_version,
        "memory": state,
        "memory_updated_at": state_at,
        "messages": [message_json(m) for m in messages],
    }


@dataclass(frozen=True, slots=True)
class Imported:
    outcome: str
    """``imported``, ``exists`` (that id is already stored) or ``live_conflict``
    (its key already has another live session in this tenant)."""
    messages: int = 0
    detached: bool = False
    """Its parent session is not in the database, so the link was dropped."""


class SessionArchive(CoreStore):
    """Lossless JSONL export and import of sessions."""

    def _selection(
        self, tenant: str, source: str | None, session_ids: list[str] | None
    ) -> tuple[str, list[Any]]:
        where: list[str] = ["s.tenant = ?"]
        args: list[Any] = [tenant]
        if source is not None:
            where.append("s.source = ?")
            args.append(source)
        if session_ids is not None:
            where.append(f"s.id IN ({', '.join('?' for _ in session_ids) or 'NULL'})")
            args += session_ids
        return " AND ".join(where), args

    async def count_sessions(
        self, tenant: str, *, source: str | None = None, session_ids: list[str] | None = None
    ) -> int:
        where, args = self._selection(tenant, source, session_ids)
        row = await self.db.fetchone(f"SELECT COUNT(*) AS n FROM sessions s WHERE {where}", args)
        return int(row["n"]) if row else 0

    async def export_sessions(
        self, tenant: str, *, source: str | None = None, session_ids: list[str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """Sessions oldest first (a parent before the sessions reset from it)."""
        where, args = self._selection(tenant, source, session_ids)
        after: tuple[float, str] | None = None
        while True:
            page_where = where + (" AND (s.started_at, s.id) > (?, ?)" if after else "")
            rows = await self.db.fetchall(
                f"SELECT {INFO_COLUMNS}, st.memory AS memory, st.updated_at AS memory_updated_at "
                f"FROM {SESSION_FROM} "
                f"WHERE {page_where} ORDER BY s.started_at, s.id LIMIT ?",
                (*args, *(after or ()), BATCH),
            )
            if not rows:
                return
            for row in rows:
                info = SessionInfo.from_row(row)
                messages = await self.db.fetchall(
                    f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY seq",
                    (info.id,),
                )
                state = orjson.loads(row["memory"]) if row["memory"] is not None else None
                yield session_line(
                    info,
                    state,
                    row["memory_updated_at"],
                    [message_from_row(m) for m in messages],
                )
            last = SessionInfo.from_row(rows[-1])
            after = (last.started_at, last.id)

    async def import_session(self, tenant: str, line: Mapping[str, Any]) -> Imported:
        """Store one exported session in ``tenant``, unless it is already there."""
        data = _validated(line)

        async def run(tx: Tx) -> Imported:
            if await tx.fetchall("SELECT 1 FROM sessions WHERE id = ?", (data["id"],)):
                return Imported("exists")
            if data["ended_at"] is None and await tx.fetchall(
                "SELECT 1 FROM sessions WHERE tenant = ? AND key = ? AND ended_at IS NULL",
                (tenant, data["key"]),
            ):
                return Imported("live_conflict")
            parent = data["parent_id"]
            detached = False
            if parent is not None and not await tx.fetchall(
                "SELECT 1 FROM sessions WHERE id = ?", (parent,)
            ):
                parent, detached = None, True
            system = tuple(
                Message.from_openai(m, tokens=int(m.get("tokens", 0)))
                for m in data["system_prompt"] or ()
            )
            await tx.execute(
                "INSERT INTO sessions (id, tenant, key, source, user_id, title, model, "
                "system_prompt, parent_id, started_at, updated_at, ended_at, end_reason, "
                f"{', '.join(COUNTERS)}) VALUES ({', '.join('?' for _ in range(13 + 9))})",
                (
                    data["id"],
                    tenant,
                    data["key"],
                    data["source"],
                    data["user_id"],
                    data["title"],
                    data["model"],
                    encode_system(system),
                    parent,
                    data["started_at"],
                    data["updated_at"],
                    data["ended_at"],
                    data["end_reason"],
                    *(int(data[name]) for name in COUNTERS),
                ),
            )
            if data["memory"] is not None:
                await tx.execute(
                    "INSERT INTO session_state (session_id, version, memory, updated_at) "
                    "VALUES (?, ?, ?, ?)",
                    (
                        data["id"],
                        int(data["memory_version"]),
                        orjson.dumps(data["memory"]).decode(),
                        data["memory_updated_at"] or data["updated_at"],
                    ),
                )
            for m in data["messages"]:
                await tx.execute(INSERT_MESSAGE, message_row(data["id"], _message(m)))
            return Imported("imported", len(data["messages"]), detached)

        return await self.db.transact(run)


REQUIRED: dict[str, type | tuple[type, ...]] = {
    "id": str,
    "key": str,
    "source": str,
    "started_at": (int, float),
    "updated_at": (int, float),
    "messages": list,
}


def _validated(line: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(line, Mapping):
        raise ArchiveError("not a JSON object")
    if line.get("format") != EXPORT_FORMAT:
        raise ArchiveError(f"'format' is {line.get('format')!r}, expected {EXPORT_FORMAT!r}")
    for name, kind in REQUIRED.items():
        if not isinstance(line.get(name), kind):
            raise ArchiveError(f"{name!r} is missing or has the wrong type")
    for name in COUNTERS:
        if not isinstance(line.get(name, 0), int):
            raise ArchiveError(f"{name!r} must be an integer")
    defaults = {name: 0 for name in COUNTERS} | {
        "user_id": None,
        "title": None,
        "model": None,
        "system_prompt": None,
        "parent_id": None,
        "ended_at": None,
        "end_reason": None,
        "memory": None,
        "memory_version": 0,
        "memory_updated_at": None,
    }
    for i, m in enumerate(line["messages"]):
        if not (isinstance(m, Mapping) and isinstance(m.get("role"), str)):
            raise ArchiveError(f"messages[{i}] is not a message with a role")
        if not isinstance(m.get("seq"), int):
            raise ArchiveError(f"messages[{i}].seq must be an integer")
    return defaults | dict(line)


def _message(m: Mapping[str, Any]) -> Message:
    return Message.from_openai(
        m,
        tokens=int(m.get("tokens") or 0),
        seq=int(m["seq"]),
        turn=int(m.get("turn") or 0),
        created_at=float(m.get("created_at") or 0.0),
    )
