"""The core of the store: sessions, messages, memory and turns.

SQL here is written once, with ``?`` placeholders, in the subset SQLite and
PostgreSQL share; a driver translates what it must. Dialect-specific SQL
(full-text search, locking) branches on ``self.db.dialect``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import orjson

from compaction import Memory, Message
from compaction.tokens import text_of
from proxy.store.database import Database, Row, Tx
from proxy.store.records import (
    SessionRecord,
    TurnCommit,
    encode_system,
    new_pending_id,
    new_session_id,
)

__all__ = ["CoreStore", "OpenedTurn", "message_from_row", "message_row"]


@dataclass(frozen=True, slots=True)
class OpenedTurn:
    record: SessionRecord
    pending_id: str | None
    replay: bytes | None
    """The stored answer of an earlier request with the same ``Idempotency-Key``."""


SESSION_COLUMNS = """
    s.id, s.tenant, s.key, s.source, s.user_id, s.title, s.model, s.system_prompt,
    s.parent_id, s.started_at, s.updated_at, s.ended_at, s.message_count, s.last_seq,
    s.last_turn, s.input_tokens, s.output_tokens, s.compaction_tokens,
    st.version AS state_version
"""
SESSION_FROM = "sessions s LEFT JOIN session_state st ON st.session_id = s.id"

INSERT_MESSAGE = """
    INSERT INTO messages (session_id, seq, turn, role, content, parts, name, tool_calls,
                          tool_call_id, token_count, created_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
EMPTY_MEMORY = Memory().to_json().decode()
MESSAGE_COLUMNS = (
    "seq, turn, role, content, parts, name, tool_calls, tool_call_id, token_count, created_at"
)


def message_row(session_id: str, m: Message) -> tuple[Any, ...]:
    content, parts = m.content, None
    if content is not None and not isinstance(content, str):
        parts, content = orjson.dumps(content).decode(), text_of(content)
    return (
        session_id,
        m.seq,
        m.turn,
        m.role,
        content,
        parts,
        m.name,
        orjson.dumps(m.tool_calls).decode() if m.tool_calls else None,
        m.tool_call_id,
        m.tokens,
        m.created_at,
    )


def message_from_row(row: Row) -> Message:
    parts = row["parts"]
    calls = row["tool_calls"]
    return Message(
        role=row["role"],
        content=orjson.loads(parts) if parts else row["content"],
        name=row["name"],
        tool_calls=orjson.loads(calls) if calls else None,
        tool_call_id=row["tool_call_id"],
        tokens=row["token_count"],
        seq=row["seq"],
        turn=row["turn"],
        created_at=row["created_at"],
    )


class CoreStore:
    """Turn-path queries. Feature stores (sessions admin, jobs, runs) extend it."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def open(self) -> None:
        await self.db.open()

    async def close(self) -> None:
        await self.db.close()

    def session_lock(self, tenant: str, key: str) -> AbstractAsyncContextManager[None]:
        return self.db.lock(f"session\x00{tenant}\x00{key}")

    # -- sessions ---------------------------------------------------------

    async def live_session(self, tenant: str, key: str) -> SessionRecord | None:
        row = await self.db.fetchone(
            f"SELECT {SESSION_COLUMNS} FROM {SESSION_FROM} "
            "WHERE s.tenant = ? AND s.key = ? AND s.ended_at IS NULL",
            (tenant, key),
        )
        return SessionRecord.from_row(row) if row else None

    async def get_session(self, session_id: str) -> SessionRecord | None:
        row = await self.db.fetchone(
            f"SELECT {SESSION_COLUMNS} FROM {SESSION_FROM} WHERE s.id = ?", (session_id,)
        )
        return SessionRecord.from_row(row) if row else None

    async def create_session(
        self,
        tenant: str,
        key: str | None = None,
        *,
        source: str = "api",
        user_id: str | None = None,
        model: str | None = None,
        parent_id: str | None = None,
        memory: Memory | None = None,
        now: float | None = None,
    ) -> SessionRecord:
        """The live session under ``key``, created if there is none."""
        now = time.time() if now is None else now
        session_id = new_session_id(now)
        key = key or session_id
        state = (memory or Memory()).to_json().decode()

        async def create(tx: Tx) -> None:
            created = await tx.execute(
                "INSERT INTO sessions (id, tenant, key, source, user_id, model, parent_id, "
                "started_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant, key) WHERE ended_at IS NULL DO NOTHING",
                (session_id, tenant, key, source, user_id, model, parent_id, now, now),
            )
            if created:
                await tx.execute(
                    "INSERT INTO session_state (session_id, version, memory, updated_at) "
                    "VALUES (?, 0, ?, ?)",
                    (session_id, state, now),
                )

        await self.db.transact(create)
        record = await self.live_session(tenant, key)
        assert record is not None, "a live session exists right after its creation"
        return record

    # -- memory and messages ---------------------------------------------

    async def load_memory(self, session_id: str) -> tuple[int, Memory]:
        row = await self.db.fetchone(
            "SELECT version, memory FROM session_state WHERE session_id = ?", (session_id,)
        )
        if row is None:
            return 0, Memory()
        return row["version"], Memory.from_json(row["memory"])

    async def load_messages(
        self, session_id: str, after_seq: int = 0, limit: int | None = None
    ) -> list[Message]:
        sql = (
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq"
        )
        args: tuple[Any, ...] = (session_id, after_seq)
        if limit is not None:
            sql += " LIMIT ?"
            args += (limit,)
        return [message_from_row(row) for row in await self.db.fetchall(sql, args)]

    async def save_memory(
        self, session_id: str, expected_version: int, memory: Memory, tokens: int = 0
    ) -> bool:
        """Replace the memory if nobody changed it since ``expected_version``.

        ``tokens`` (what producing it cost) are counted whether or not it is saved.
        """
        results = await self.db.write(
            [
                (
                    "UPDATE session_state SET version = version + 1, memory = ?, updated_at = ? "
                    "WHERE session_id = ? AND version = ? RETURNING version",
                    (memory.to_json().decode(), time.time(), session_id, expected_version),
                ),
                (
                    "UPDATE sessions SET compaction_tokens = compaction_tokens + ? WHERE id = ?",
                    (tokens, session_id),
                ),
            ]
        )
        return bool(results[0])

    # -- turns -------------------------------------------------------------

    async def open_turn(
        self,
        tenant: str,
        key: str,
        raw_messages: Sequence[Any],
        *,
        source: str = "api",
        user_id: str | None = None,
        idempotency_key: str | None = None,
        known: bool = False,
    ) -> OpenedTurn:
        """Start a turn in one round trip, before anything is sent upstream.

        Creates the live session if there is none, reads its row (for the
        caller's cache check) and records the request's messages as a pending
        turn — unless ``idempotency_key`` already has a stored answer, which
        is returned instead. ``known``: the caller has seen the live session
        (it is cached), so creating it is skipped — and done after all in a
        second round trip if it has ended meanwhile.
        """
        now = time.time()
        pending_id = new_pending_id()
        live = "FROM sessions WHERE tenant = ? AND key = ? AND ended_at IS NULL"
        unanswered = ""
        pending_args: tuple[Any, ...] = (
            pending_id,
            orjson.dumps(raw_messages).decode(),
            idempotency_key,
            now,
            tenant,
            key,
        )
        if idempotency_key is not None:
            unanswered = " AND NOT EXISTS (SELECT 1 FROM idempotency WHERE tenant = ? AND key = ?)"
            pending_args += (tenant, idempotency_key)
        statements: list[tuple[str, Sequence[Any]]] = []
        if not known:
            statements += [
                (
                    "INSERT INTO sessions (id, tenant, key, source, user_id, started_at, "
                    "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (tenant, key) WHERE ended_at IS NULL DO NOTHING",
                    (new_session_id(now), tenant, key, source, user_id, now, now),
                ),
                (
                    "INSERT INTO session_state (session_id, version, memory, updated_at) "
                    f"SELECT id, 0, ?, ? {live} ON CONFLICT (session_id) DO NOTHING",
                    (EMPTY_MEMORY, now, tenant, key),
                ),
            ]
        first = len(statements)
        statements += [
            (
                f"SELECT {SESSION_COLUMNS} FROM {SESSION_FROM} "
                "WHERE s.tenant = ? AND s.key = ? AND s.ended_at IS NULL",
                (tenant, key),
            ),
            (
                "INSERT INTO pending_turns (id, session_id, messages, idempotency_key, created_at) "
                f"SELECT ?, id, ?, ?, ? {live}{unanswered}",
                pending_args,
            ),
        ]
        if idempotency_key is not None:
            statements.append(
                (
                    "SELECT response FROM idempotency WHERE tenant = ? AND key = ?",
                    (tenant, idempotency_key),
                )
            )
        results = await self.db.write(statements, urgent=True)
        if not results[first]:
            # The session ended since the caller saw it (a reset elsewhere).
            return await self.open_turn(
                tenant,
                key,
                raw_messages,
                source=source,
                user_id=user_id,
                idempotency_key=idempotency_key,
            )
        record = SessionRecord.from_row(results[first][0])
        if idempotency_key is not None and results[first + 2]:
            return OpenedTurn(record, None, results[first + 2][0]["response"].encode())
        return OpenedTurn(record, pending_id, None)

    async def commit_turn(self, turn: TurnCommit) -> None:
        """Store the turn's messages and counters; drop its pending record."""
        last = turn.messages[-1]
        statements: list[tuple[str, Sequence[Any]]] = [
            (INSERT_MESSAGE, message_row(turn.session_id, m)) for m in turn.messages
        ]
        # SET expressions all read the row as it was: full_tokens adds the
        # transcript as it stood before this turn.
        statements.append(
            (
                "UPDATE sessions SET last_seq = ?, last_turn = ?, "
                "message_count = message_count + ?, input_tokens = input_tokens + ?, "
                "output_tokens = output_tokens + ?, updated_at = ?, "
                "model = COALESCE(?, model), "
                "system_prompt = CASE WHEN ? THEN ? ELSE system_prompt END, "
                "sent_tokens = sent_tokens + ?, "
                "full_tokens = full_tokens + ? + transcript_tokens, "
                "transcript_tokens = transcript_tokens + ? WHERE id = ?",
                (
                    last.seq,
                    last.turn,
                    len(turn.messages),
                    turn.input_tokens,
                    turn.output_tokens,
                    turn.updated_at,
                    turn.model,
                    turn.system is not None,
                    encode_system(turn.system or ()),
                    turn.sent_tokens,
                    turn.history_floor,
                    sum(m.tokens for m in turn.messages),
                    turn.session_id,
                ),
            )
        )
        statements.append(("DELETE FROM pending_turns WHERE id = ?", (turn.pending_id,)))
        if turn.idempotency is not None:
            tenant, key, response = turn.idempotency
            statements.append(
                (
                    "INSERT INTO idempotency (tenant, key, session_id, response, created_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (tenant, key, turn.session_id, response.decode(), turn.updated_at),
                )
            )
        await self.db.write(statements, urgent=True)

    async def abort_turn(self, pending_id: str) -> None:
        await self.db.write([("DELETE FROM pending_turns WHERE id = ?", (pending_id,))])

    async def idempotent_response(self, tenant: str, key: str) -> bytes | None:
        row = await self.db.fetchone(
            "SELECT response FROM idempotency WHERE tenant = ? AND key = ?", (tenant, key)
        )
        return row["response"].encode() if row else None

    async def load_tail(self, session_id: str, count: int) -> list[Message]:
        """The last ``count`` messages, oldest first."""
        rows = await self.db.fetchall(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? "
            "ORDER BY seq DESC LIMIT ?",
            (session_id, count),
        )
        return [message_from_row(row) for row in reversed(rows)]
