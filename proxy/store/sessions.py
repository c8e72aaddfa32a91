"""Session management queries: list, resolve, rename, delete, prune, stats, reset.

Used by the sessions API and by the ``sessions`` CLI, which opens the same
store on the same database while a server may be running on it: every write
is one short transaction, and the ones that race with turns (reset) check
what they read is still true when they commit.
"""

from __future__ import annotations

from typing import Any

from compaction import Memory
from proxy.store import space
from proxy.store.core import SESSION_FROM, CoreStore
from proxy.store.database import Tx
from proxy.store.records import encode_system, new_session_id
from proxy.store.session_info import (
    INFO_COLUMNS,
    Page,
    SessionInfo,
    SessionStats,
    SourceStats,
    decode_cursor,
    encode_cursor,
    load_infos,
)

__all__ = ["BUSY_WINDOW", "SessionAdmin", "SessionBusy", "SessionChanged"]

# A pending turn older than this is a leftover of a crash, not a turn in flight.
BUSY_WINDOW = 3600.0

# Sorts after every character a key or id can hold: prefix ranges use indexes.
PREFIX_END = "\U0010ffff"
MAX_CANDIDATES = 20
PRUNE_BATCH = 200


class SessionBusy(Exception):
    """The session has a turn in flight: it cannot be ended now."""


class SessionChanged(Exception):
    """The session changed between reading it and ending it: read again."""


class SessionAdmin(CoreStore):
    """Queries behind ``/api/sessions`` and ``hermes-proxy sessions``."""

    async def session_info(self, session_id: str) -> SessionInfo | None:
        return (await load_infos(self.db, [session_id])).get(session_id)

    async def live_info(self, tenant: str, key: str) -> SessionInfo | None:
        row = await self.db.fetchone(
            f"SELECT {INFO_COLUMNS} FROM {SESSION_FROM} "
            "WHERE s.tenant = ? AND s.key = ? AND s.ended_at IS NULL",
            (tenant, key),
        )
        return SessionInfo.from_row(row) if row else None

    async def list_sessions(
        self, tenant: str, *, source: str | None = None, limit: int = 20, cursor: str | None = None
    ) -> Page:
        """Newest first; ``cursor`` continues after the previous page (stable under inserts)."""
        where: list[str] = ["s.tenant = ?"]
        args: list[Any] = [tenant]
        if source is not None:
            where.append("s.source = ?")
            args.append(source)
        if cursor is not None:
            started_at, session_id = decode_cursor(cursor)
            where.append("(s.started_at, s.id) < (?, ?)")
            args += [started_at, session_id]
        rows = await self.db.fetchall(
            f"SELECT {INFO_COLUMNS} FROM {SESSION_FROM} WHERE {' AND '.join(where)} "
            "ORDER BY s.started_at DESC, s.id DESC LIMIT ?",
            (*args, limit + 1),
        )
        items = [SessionInfo.from_row(row) for row in rows[:limit]]
        more = len(rows) > limit
        return Page(items, encode_cursor(items[-1]) if more and items else None)

    async def find_sessions(self, tenant: str, ident: str) -> list[SessionInfo]:
        """What ``ident`` names, in order: the live session under that key, the
        session with that id, else every session one of whose ids or keys it is
        a prefix of (sessions sharing a key count once: the live or newest one).
        One item is a match; more are the candidates of an ambiguous prefix."""
        live = await self.live_info(tenant, ident)
        if live is not None:
            return [live]
        exact = await self.session_info(ident)
        if exact is not None and exact.tenant == tenant:
            return [exact]
        rows = await self.db.fetchall(
            f"SELECT {INFO_COLUMNS} FROM {SESSION_FROM} WHERE s.tenant = ? AND "
            "((s.id >= ? AND s.id < ?) OR (s.key >= ? AND s.key < ?)) "
            "ORDER BY s.ended_at IS NOT NULL, s.started_at DESC LIMIT ?",
            (tenant, ident, ident + PREFIX_END, ident, ident + PREFIX_END, MAX_CANDIDATES * 5),
        )
        found: dict[str, SessionInfo] = {}
        by_key: dict[str, SessionInfo] = {}
        for info in map(SessionInfo.from_row, rows):
            if info.id.startswith(ident):
                found[info.id] = info
            elif info.key.startswith(ident):
                # Live rows sort first, then newest: the first one seen stands for its key.
                by_key.setdefault(info.key, info)
        for info in by_key.values():
            found.setdefault(info.id, info)
        return list(found.values())[:MAX_CANDIDATES]

    async def tenants(self, limit: int = 20) -> list[str]:
        """Tenants that have sessions (to hint at the right ``--tenant``)."""
        rows = await self.db.fetchall(
            "SELECT DISTINCT tenant FROM sessions ORDER BY tenant LIMIT ?", (limit,)
        )
        return [row["tenant"] for row in rows]

    async def window_size(self, session_id: str, through_seq: int) -> tuple[int, int]:
        """Messages and tokens in the recent window (after what memory folded in)."""
        row = await self.db.fetchone(
            "SELECT COUNT(*) AS n, COALESCE(SUM(token_count), 0) AS tokens FROM messages "
            "WHERE session_id = ? AND seq > ?",
            (session_id, through_seq),
        )
        return (int(row["n"]), int(row["tokens"])) if row else (0, 0)

    async def pending_count(self, session_id: str, since: float = 0.0) -> int:
        """Turns of the session in flight (pending turns written at or after ``since``)."""
        row = await self.db.fetchone(
            "SELECT COUNT(*) AS n FROM pending_turns WHERE session_id = ? AND created_at >= ?",
            (session_id, since),
        )
        return int(row["n"]) if row else 0

    async def rename(self, session_id: str, title: str | None) -> bool:
        async def run(tx: Tx) -> int:
            return await tx.execute(
                "UPDATE sessions SET title = ? WHERE id = ?", (title or None, session_id)
            )

        return bool(await self.db.transact(run))

    async def delete_session(self, session_id: str, busy_since: float | None = None) -> bool:
        """Remove the session, its messages (and their search rows), state and turns.

        With ``busy_since``, raise :class:`SessionBusy` instead if a turn written
        since then is still in flight (its answer would have nowhere to go).
        """

        async def run(tx: Tx) -> int:
            if busy_since is not None:
                busy = await tx.fetchall(
                    "SELECT 1 FROM pending_turns WHERE session_id = ? AND created_at >= ?",
                    (session_id, busy_since),
                )
                if busy:
                    raise SessionBusy(session_id)
            return await tx.execute("DELETE FROM sessions WHERE id = ?", (session_id,))

        return bool(await self.db.transact(run))

    def _prunable(self, tenant: str, cutoff: float, source: str | None) -> tuple[str, list[Any]]:
        where = "tenant = ? AND ended_at IS NOT NULL AND ended_at < ?"
        args: list[Any] = [tenant, cutoff]
        if source is not None:
            where += " AND source = ?"
            args.append(source)
        return where, args

    async def count_prunable(
        self, tenant: str, cutoff: float, source: str | None = None
    ) -> tuple[int, int]:
        """Ended sessions that ended before ``cutoff``, and their messages."""
        where, args = self._prunable(tenant, cutoff, source)
        row = await self.db.fetchone(
            "SELECT COUNT(*) AS n, COALESCE(SUM(message_count), 0) AS messages "
            f"FROM sessions WHERE {where}",
            args,
        )
        return (int(row["n"]), int(row["messages"])) if row else (0, 0)

    async def prune(self, tenant: str, cutoff: float, source: str | None = None) -> int:
        """Delete ended sessions that ended before ``cutoff``; live ones are never touched.

        Batches keep each write transaction short, so a server on the same
        database keeps storing turns while a large prune runs.
        """
        where, args = self._prunable(tenant, cutoff, source)
        sql = f"DELETE FROM sessions WHERE id IN (SELECT id FROM sessions WHERE {where} LIMIT ?)"
        deleted = 0
        while True:

            async def batch(tx: Tx) -> int:
                return await tx.execute(sql, (*args, PRUNE_BATCH))

            count = await self.db.transact(batch)
            deleted += count
            if count < PRUNE_BATCH:
                return deleted

    async def stats(self, tenant: str) -> SessionStats:
        rows = await self.db.fetchall(
            "SELECT source, COUNT(*) AS sessions, "
            "SUM(CASE WHEN ended_at IS NULL THEN 1 ELSE 0 END) AS live, "
            "SUM(message_count) AS messages, SUM(input_tokens) AS input_tokens, "
            "SUM(output_tokens) AS output_tokens, SUM(compaction_tokens) AS compaction_tokens, "
            "SUM(sent_tokens) AS sent_tokens, SUM(full_tokens) AS full_tokens "
            "FROM sessions WHERE tenant = ? GROUP BY source ORDER BY COUNT(*) DESC, source",
            (tenant,),
        )

        def total(name: str) -> int:
            return sum(int(row[name] or 0) for row in rows)

        return SessionStats(
            sources=[
                SourceStats(r["source"], int(r["sessions"]), int(r["live"]), int(r["messages"]))
                for r in rows
            ],
            input_tokens=total("input_tokens"),
            output_tokens=total("output_tokens"),
            compaction_tokens=total("compaction_tokens"),
            sent_tokens=total("sent_tokens"),
            full_tokens=total("full_tokens"),
            database_bytes=await self.database_size(),
        )

    # -- size on disk and giving freed space back (proxy/store/space.py) ------

    async def database_size(self) -> int:
        return await space.database_size(self.db)

    async def reclaim_space(self) -> str:
        """Make the space pruned sessions held free again (see :mod:`proxy.store.space`)."""
        return await space.reclaim_space(self.db)

    # -- reset ----------------------------------------------------------------

    async def end_and_continue(
        self,
        old: SessionInfo,
        *,
        version: int,
        final: Memory,
        carried: Memory,
        compaction_tokens: int,
        reason: str,
        now: float,
        busy_since: float,
    ) -> SessionInfo:
        """End ``old`` with its ``final`` memory and start a live session under the
        same key that remembers ``carried``, in one transaction.

        Raises :class:`SessionBusy` if a turn of ``old`` is in flight and
        :class:`SessionChanged` if it changed since it was read (a turn was
        stored, a compaction saved, another reset won).
        """
        new_id = new_session_id(now)

        async def run(tx: Tx) -> None:
            busy = await tx.fetchall(
                "SELECT COUNT(*) AS n FROM pending_turns WHERE session_id = ? AND created_at >= ?",
                (old.id, busy_since),
            )
            if busy[0]["n"]:
                raise SessionBusy(old.id)
            saved = await tx.execute(
                "INSERT INTO session_state (session_id, version, memory, updated_at) "
                "VALUES (?, 1, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
                "version = session_state.version + 1, memory = excluded.memory, "
                "updated_at = excluded.updated_at WHERE session_state.version = ?",
                (old.id, final.to_json().decode(), now, version),
            )
            ended = saved and await tx.execute(
                "UPDATE sessions SET ended_at = ?, end_reason = ?, "
                "compaction_tokens = compaction_tokens + ? "
                "WHERE id = ? AND ended_at IS NULL AND last_seq = ?",
                (now, reason, compaction_tokens, old.id, old.last_seq),
            )
            if not ended:
                raise SessionChanged(old.id)
            await tx.execute(
                "INSERT INTO sessions (id, tenant, key, source, user_id, model, system_prompt, "
                "parent_id, started_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    new_id,
                    old.tenant,
                    old.key,
                    old.source,
                    old.user_id,
                    old.model,
                    encode_system(old.system),
                    old.id,
                    now,
                    now,
                ),
            )
            await tx.execute(
                "INSERT INTO session_state (session_id, version, memory, updated_at) "
                "VALUES (?, 0, ?, ?)",
                (new_id, carried.to_json().decode(), now),
            )

        await self.db.transact(run)
        new = await self.session_info(new_id)
        assert new is not None, "the new session exists right after the reset"
        return new
