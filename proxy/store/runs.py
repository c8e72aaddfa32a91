"""Runs, their inputs, and each thread's event log.

Every change to a run goes through :meth:`RunStore.change`: one transaction
that first locks the thread's row (serializing it against every other change
on the thread, in PostgreSQL as in SQLite), lets the caller read and write
through a :class:`RunTx`, and appends the events it emitted under the
thread's next ids. An event is therefore stored in the same transaction as
the state it reports, and a thread's event ids become visible in order.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import orjson

from proxy.errors import NotFound
from proxy.store.core import CoreStore
from proxy.store.database import Row, Tx

__all__ = ["ACTIVE", "RunInput", "RunRecord", "RunStore", "RunTx", "ThreadEvent"]

T = TypeVar("T")

ACTIVE = ("running", "waiting_on_human")
RUN_COLUMNS = (
    "id, tenant, thread_id, status, request, step, attempt, waiting, error, "
    "lease_owner, lease_until, created_at, updated_at, ended_at"
)
# Columns RunTx.update may set (and how each is stored).
_JSON_COLUMNS = frozenset({"waiting", "error"})
_UPDATABLE = frozenset(
    {"status", "step", "attempt", "waiting", "error", "lease_owner", "lease_until", "ended_at"}
)


def _json(value: str | None) -> Any:
    return orjson.loads(value) if value else None


@dataclass(frozen=True, slots=True)
class RunRecord:
    id: str
    tenant: str
    thread_id: str
    status: str
    request: dict[str, Any]
    step: int
    attempt: int
    waiting: list[dict[str, Any]] | None
    error: dict[str, Any] | None
    lease_owner: str | None
    lease_until: float | None
    created_at: float
    updated_at: float
    ended_at: float | None

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @classmethod
    def from_row(cls, row: Row) -> RunRecord:
        return cls(
            id=row["id"],
            tenant=row["tenant"],
            thread_id=row["thread_id"],
            status=row["status"],
            request=orjson.loads(row["request"]),
            step=row["step"],
            attempt=row["attempt"],
            waiting=_json(row["waiting"]),
            error=_json(row["error"]),
            lease_owner=row["lease_owner"],
            lease_until=row["lease_until"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            ended_at=row["ended_at"],
        )


@dataclass(frozen=True, slots=True)
class RunInput:
    id: int
    run_id: str
    step: int | None
    message: dict[str, Any]
    created_at: float


@dataclass(frozen=True, slots=True)
class ThreadEvent:
    id: int
    run_id: str | None
    type: str
    data: str
    """The payload, as the JSON text that was stored."""
    created_at: float


def _input(row: Row) -> RunInput:
    return RunInput(
        id=row["id"],
        run_id=row["run_id"],
        step=row["step"],
        message=orjson.loads(row["message"]),
        created_at=row["created_at"],
    )


class RunTx:
    """One thread's state inside a :meth:`RunStore.change` transaction."""

    def __init__(self, tx: Tx, tenant: str, thread_id: str, last_event_id: int, now: float):
        self.tx = tx
        self.tenant = tenant
        self.thread_id = thread_id
        self.now = now
        self.last_event_id = last_event_id
        self.events: list[tuple[int, str | None, str, bytes]] = []

    def emit(self, run_id: str | None, type: str, data: Mapping[str, Any]) -> int:
        """Append an event; it is stored with the transaction, under the next id."""
        self.last_event_id += 1
        payload = {"thread_id": self.thread_id, "run_id": run_id, **data}
        self.events.append((self.last_event_id, run_id, type, orjson.dumps(payload)))
        return self.last_event_id

    async def run(self, run_id: str) -> RunRecord | None:
        rows = await self.tx.fetchall(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ? AND tenant = ? AND thread_id = ?",
            (run_id, self.tenant, self.thread_id),
        )
        return RunRecord.from_row(rows[0]) if rows else None

    async def active_run(self) -> RunRecord | None:
        rows = await self.tx.fetchall(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE tenant = ? AND thread_id = ? "
            "AND status IN ('running', 'waiting_on_human')",
            (self.tenant, self.thread_id),
        )
        return RunRecord.from_row(rows[0]) if rows else None

    async def create_run(self, request: Mapping[str, Any]) -> RunRecord:
        run_id = "run_" + uuid.uuid4().hex
        await self.tx.execute(
            "INSERT INTO runs (id, tenant, thread_id, status, request, created_at, updated_at) "
            "VALUES (?, ?, ?, 'running', ?, ?, ?)",
            (
                run_id,
                self.tenant,
                self.thread_id,
                orjson.dumps(request).decode(),
                self.now,
                self.now,
            ),
        )
        run = await self.run(run_id)
        assert run is not None
        return run

    async def update(self, run: RunRecord, **changes: Any) -> RunRecord:
        unknown = set(changes) - _UPDATABLE
        if unknown:
            raise ValueError(f"not updatable: {', '.join(sorted(unknown))}")
        columns = [*changes, "updated_at"]
        values = [
            orjson.dumps(v).decode() if k in _JSON_COLUMNS and v is not None else v
            for k, v in changes.items()
        ]
        await self.tx.execute(
            f"UPDATE runs SET {', '.join(f'{c} = ?' for c in columns)} WHERE id = ?",
            (*values, self.now, run.id),
        )
        return replace(run, **changes, updated_at=self.now)

    async def add_input(
        self, run_id: str, message: Mapping[str, Any], client_key: str | None = None
    ) -> int:
        rows = await self.tx.fetchall(
            "INSERT INTO run_inputs (run_id, tenant, thread_id, message, client_key, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
            (
                run_id,
                self.tenant,
                self.thread_id,
                orjson.dumps(message).decode(),
                client_key,
                self.now,
            ),
        )
        input_id: int = rows[0]["id"]
        return input_id

    async def input_by_client_key(self, client_key: str) -> RunInput | None:
        rows = await self.tx.fetchall(
            "SELECT id, run_id, step, message, created_at FROM run_inputs "
            "WHERE tenant = ? AND thread_id = ? AND client_key = ?",
            (self.tenant, self.thread_id, client_key),
        )
        return _input(rows[0]) if rows else None

    async def pending_inputs(self, run_id: str) -> int:
        rows = await self.tx.fetchall(
            "SELECT COUNT(*) AS n FROM run_inputs WHERE run_id = ? AND step IS NULL", (run_id,)
        )
        count: int = rows[0]["n"]
        return count

    async def forget_answer(self, idempotency_key: str) -> None:
        """Drop a step's stored answer once the step is reported: it is never redone."""
        await self.tx.execute(
            "DELETE FROM idempotency WHERE tenant = ? AND key = ?", (self.tenant, idempotency_key)
        )

    async def take_inputs(self, run_id: str, step: int) -> list[RunInput]:
        """Give the pending inputs to ``step``; return all of that step's inputs, in order."""
        await self.tx.execute(
            "UPDATE run_inputs SET step = ? WHERE run_id = ? AND step IS NULL", (step, run_id)
        )
        rows = await self.tx.fetchall(
            "SELECT id, run_id, step, message, created_at FROM run_inputs "
            "WHERE run_id = ? AND step = ? ORDER BY id",
            (run_id, step),
        )
        return [_input(row) for row in rows]


class RunStore(CoreStore):
    """Queries of the runs API; the conversation itself goes through the turn pipeline."""

    async def change(self, tenant: str, thread_id: str, fn: Callable[[RunTx], Awaitable[T]]) -> T:
        """Run ``fn`` in one transaction on the thread and store the events it emitted."""
        now = time.time()

        async def body(tx: Tx) -> T:
            # The row lock comes first: every change on a thread is serialized by it.
            rows = await tx.fetchall(
                "UPDATE threads SET updated_at = ? WHERE tenant = ? AND id = ? "
                "RETURNING last_event_id",
                (now, tenant, thread_id),
            )
            if not rows:
                raise NotFound(f"No thread {thread_id!r}.", param="thread_id")
            run_tx = RunTx(tx, tenant, thread_id, rows[0]["last_event_id"], now)
            result = await fn(run_tx)
            for event_id, run_id, type, data in run_tx.events:
                await tx.execute(
                    "INSERT INTO thread_events (tenant, thread_id, id, run_id, type, data, "
                    "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (tenant, thread_id, event_id, run_id, type, data.decode(), now),
                )
            if run_tx.events:
                await tx.execute(
                    "UPDATE threads SET last_event_id = ? WHERE tenant = ? AND id = ?",
                    (run_tx.last_event_id, tenant, thread_id),
                )
            return result

        return await self.db.transact(body)

    async def get_run(self, run_id: str) -> RunRecord | None:
        row = await self.db.fetchone(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,))
        return RunRecord.from_row(row) if row else None

    async def thread_run(self, tenant: str, thread_id: str, run_id: str) -> RunRecord | None:
        row = await self.db.fetchone(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ? AND tenant = ? AND thread_id = ?",
            (run_id, tenant, thread_id),
        )
        return RunRecord.from_row(row) if row else None

    async def list_runs(self, tenant: str, thread_id: str, limit: int) -> list[RunRecord]:
        rows = await self.db.fetchall(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE tenant = ? AND thread_id = ? "
            "ORDER BY created_at DESC, id DESC LIMIT ?",
            (tenant, thread_id, limit),
        )
        return [RunRecord.from_row(row) for row in rows]

    async def run_inputs(self, run_id: str) -> list[RunInput]:
        rows = await self.db.fetchall(
            "SELECT id, run_id, step, message, created_at FROM run_inputs "
            "WHERE run_id = ? ORDER BY id",
            (run_id,),
        )
        return [_input(row) for row in rows]

    async def events_after(
        self, tenant: str, thread_id: str, after: int, limit: int = 500
    ) -> list[ThreadEvent]:
        rows = await self.db.fetchall(
            "SELECT id, run_id, type, data, created_at FROM thread_events "
            "WHERE tenant = ? AND thread_id = ? AND id > ? ORDER BY id LIMIT ?",
            (tenant, thread_id, after, limit),
        )
        return [
            ThreadEvent(row["id"], row["run_id"], row["type"], row["data"], row["created_at"])
            for row in rows
        ]

    # -- leases: which process executes a running run ----------------------

    async def claim_run(self, run_id: str, owner: str, until: float, *, force: bool) -> bool:
        """Take the run's lease unless another live owner holds it (``force``: even then).

        One conditional ``UPDATE … RETURNING``, so of processes claiming one
        expired lease at once exactly one gets it: SQLite runs writes one at a
        time, and PostgreSQL makes the second ``UPDATE`` wait for the first and
        re-check its ``WHERE`` against the row the first committed.
        """
        sql = "UPDATE runs SET lease_owner = ?, lease_until = ? WHERE id = ? AND status = 'running'"
        args: tuple[Any, ...] = (owner, until, run_id)
        if not force:
            sql += " AND (lease_owner IS NULL OR lease_owner = ? OR lease_until < ?)"
            args += (owner, time.time())
        (claimed,) = await self.db.write([(sql + " RETURNING id", args)])
        return bool(claimed)

    async def claimable_runs(self, *, force: bool, limit: int = 100) -> list[str]:
        """Running runs nobody (alive) executes: lease free or expired (``force``: all)."""
        sql = "SELECT id FROM runs WHERE status = 'running'"
        args: tuple[Any, ...] = ()
        if not force:
            sql += " AND (lease_owner IS NULL OR lease_until < ?)"
            args = (time.time(),)
        rows = await self.db.fetchall(f"{sql} ORDER BY updated_at LIMIT ?", (*args, limit))
        return [row["id"] for row in rows]

    async def renew_leases(
        self, owner: str, run_ids: Sequence[str], until: float
    ) -> dict[str, str]:
        """Extend the leases ``owner`` holds; return every listed run's current status."""
        if not run_ids:
            return {}
        marks = ", ".join("?" for _ in run_ids)
        await self.db.write(
            [
                (
                    f"UPDATE runs SET lease_until = ? WHERE lease_owner = ? AND id IN ({marks}) "
                    "AND status = 'running'",
                    (until, owner, *run_ids),
                )
            ]
        )
        rows = await self.db.fetchall(
            f"SELECT id, status, lease_owner FROM runs WHERE id IN ({marks})", tuple(run_ids)
        )
        return {
            row["id"]: row["status"] if row["lease_owner"] in (owner, None) else "elsewhere"
            for row in rows
        }

    async def release_leases(self, owner: str) -> None:
        await self.db.write(
            [
                (
                    "UPDATE runs SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = ?",
                    (owner,),
                )
            ]
        )

    async def drop_pending_turns(self, idempotency_key: str) -> None:
        """Forget pending turns a dead process left for this step (the step is redone)."""
        await self.db.write(
            [("DELETE FROM pending_turns WHERE idempotency_key = ?", (idempotency_key,))]
        )
