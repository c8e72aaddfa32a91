"""Threads: the rows that make a session a thread (title, metadata, event counter).

A thread's id is its session's key, so a thread's conversation is the live
session under ``(tenant, thread id)``, whatever created it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.errors import Conflict
from proxy.store.core import CoreStore
from proxy.store.database import Row, Tx

__all__ = ["ThreadRecord", "ThreadStore"]

THREAD_SELECT = """
    SELECT t.tenant, t.id, t.title, t.metadata, t.created_at, t.updated_at, t.last_event_id,
           s.id AS session_id, s.message_count, r.id AS run_id, r.status AS run_status
    FROM threads t
    LEFT JOIN sessions s ON s.tenant = t.tenant AND s.key = t.id AND s.ended_at IS NULL
    LEFT JOIN runs r ON r.tenant = t.tenant AND r.thread_id = t.id
                    AND r.status IN ('running', 'waiting_on_human')
"""


@dataclass(frozen=True, slots=True)
class ThreadRecord:
    tenant: str
    id: str
    title: str | None
    metadata: dict[str, str]
    created_at: float
    updated_at: float
    last_event_id: int
    session_id: str | None
    message_count: int
    run_id: str | None
    """The active run (running or waiting_on_human), if any."""
    run_status: str | None

    @classmethod
    def from_row(cls, row: Row) -> ThreadRecord:
        return cls(
            tenant=row["tenant"],
            id=row["id"],
            title=row["title"],
            metadata=orjson.loads(row["metadata"]) if row["metadata"] else {},
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            last_event_id=row["last_event_id"],
            session_id=row["session_id"],
            message_count=row["message_count"] or 0,
            run_id=row["run_id"],
            run_status=row["run_status"],
        )


class ThreadStore(CoreStore):
    """Thread rows; the conversation itself is the session's, in :class:`CoreStore`."""

    async def insert_thread(
        self, tenant: str, thread_id: str, title: str | None, metadata: dict[str, str], now: float
    ) -> None:
        """Add the thread row (a no-op if it exists, which makes the default thread lazy)."""
        await self.db.write(
            [
                (
                    "INSERT INTO threads (tenant, id, title, metadata, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, id) DO NOTHING",
                    (
                        tenant,
                        thread_id,
                        title,
                        orjson.dumps(metadata).decode() if metadata else None,
                        now,
                        now,
                    ),
                ),
                (
                    "UPDATE sessions SET title = COALESCE(title, ?) "
                    "WHERE tenant = ? AND key = ? AND ended_at IS NULL",
                    (title, tenant, thread_id),
                ),
            ]
        )

    async def get_thread(self, tenant: str, thread_id: str) -> ThreadRecord | None:
        row = await self.db.fetchone(
            f"{THREAD_SELECT} WHERE t.tenant = ? AND t.id = ?", (tenant, thread_id)
        )
        return ThreadRecord.from_row(row) if row else None

    async def threads_with_prefix(self, tenant: str, prefix: str) -> list[str]:
        """At most two thread ids starting with ``prefix`` (two means: ambiguous)."""
        rows = await self.db.fetchall(
            "SELECT id FROM threads WHERE tenant = ? AND substr(id, 1, ?) = ? ORDER BY id LIMIT 2",
            (tenant, len(prefix), prefix),
        )
        return [row["id"] for row in rows]

    async def list_threads(
        self, tenant: str, limit: int, before: ThreadRecord | None = None, pinned: str = ""
    ) -> list[ThreadRecord]:
        """The ``pinned`` thread first, then newest first; ``before`` pages on
        (created_at, id), which never change."""
        sql = f"{THREAD_SELECT} WHERE t.tenant = ?"
        args: tuple[Any, ...] = (tenant,)
        if before is not None:
            sql += " AND t.id <> ?"
            args += (pinned,)
            if before.id != pinned:
                sql += " AND (t.created_at < ? OR (t.created_at = ? AND t.id < ?))"
                args += (before.created_at, before.created_at, before.id)
        sql += (
            " ORDER BY CASE WHEN t.id = ? THEN 0 ELSE 1 END, t.created_at DESC, t.id DESC LIMIT ?"
        )
        rows = await self.db.fetchall(sql, (*args, pinned, limit))
        return [ThreadRecord.from_row(row) for row in rows]

    async def update_thread(
        self,
        tenant: str,
        thread_id: str,
        *,
        title: str | None = None,
        set_title: bool = False,
        metadata: dict[str, str] | None = None,
    ) -> None:
        now = time.time()
        statements: list[tuple[str, tuple[Any, ...]]] = []
        if set_title:
            statements += [
                (
                    "UPDATE threads SET title = ?, updated_at = ? WHERE tenant = ? AND id = ?",
                    (title, now, tenant, thread_id),
                ),
                (
                    "UPDATE sessions SET title = ? "
                    "WHERE tenant = ? AND key = ? AND ended_at IS NULL",
                    (title, tenant, thread_id),
                ),
            ]
        if metadata is not None:
            statements.append(
                (
                    "UPDATE threads SET metadata = ?, updated_at = ? WHERE tenant = ? AND id = ?",
                    (orjson.dumps(metadata).decode() if metadata else None, now, tenant, thread_id),
                )
            )
        if statements:
            await self.db.write(statements)

    async def delete_thread(self, tenant: str, thread_id: str) -> bool:
        """Delete the thread, its runs and events, and every session under its id.

        Refused (:class:`Conflict`) while a run is executing on it: cancel it first.
        """

        async def delete(tx: Tx) -> bool:
            running = await tx.fetchall(
                "SELECT id FROM runs WHERE tenant = ? AND thread_id = ? AND status = 'running'",
                (tenant, thread_id),
            )
            if running:
                raise Conflict(
                    f"Thread {thread_id!r} has a running run ({running[0]['id']}); "
                    "cancel it before deleting the thread."
                )
            deleted = await tx.execute(
                "DELETE FROM threads WHERE tenant = ? AND id = ?", (tenant, thread_id)
            )
            await tx.execute(
                "DELETE FROM sessions WHERE tenant = ? AND key = ?", (tenant, thread_id)
            )
            return bool(deleted)

        return await self.db.transact(delete)

    async def carryover_sessions(self, tenant: str, limit: int) -> list[str]:
        """Live sessions of the tenant's ``limit`` most recently active threads, oldest first."""
        rows = await self.db.fetchall(
            "SELECT s.id FROM threads t JOIN sessions s "
            "ON s.tenant = t.tenant AND s.key = t.id AND s.ended_at IS NULL "
            "WHERE t.tenant = ? ORDER BY s.updated_at DESC LIMIT ?",
            (tenant, limit),
        )
        return [row["id"] for row in reversed(rows)]
