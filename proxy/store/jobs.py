"""Jobs and their run history: the queries behind ``/api/jobs`` and the scheduler.

The one subtle query is :meth:`JobStore.claim_due`: it moves a due job's
``next_run_at`` on and inserts its run row in one transaction, guarded by
``next_run_at = <the due value read>``, so an occurrence is claimed by exactly
one scheduler however many share the database.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from proxy.store.core import CoreStore
from proxy.store.database import Row, Tx

__all__ = ["JobRecord", "JobStore", "JobRunRecord", "new_job_id"]

# Run history kept per job; older runs are pruned as new ones finish.
KEEP_RUNS = 500

JOB_COLUMNS = (
    "id, tenant, name, schedule, timezone, prompt, session_key, model, enabled, anchor_at, "
    "next_run_at, last_run_at, last_status, created_at, updated_at"
)
RUN_COLUMNS = (
    "id, job_id, tenant, reason, scheduled_for, session_id, status, started_at, finished_at, "
    "output, input_tokens, output_tokens, error"
)
# What PATCH, pause and resume may change.
MUTABLE = frozenset(
    {
        "name",
        "schedule",
        "timezone",
        "prompt",
        "session_key",
        "model",
        "enabled",
        "anchor_at",
        "next_run_at",
    }
)


def new_job_id() -> str:
    return f"job_{secrets.token_hex(8)}"


@dataclass(frozen=True, slots=True)
class JobRecord:
    id: str
    tenant: str
    name: str
    schedule: str
    timezone: str
    prompt: str
    session_key: str
    model: str | None
    enabled: bool
    anchor_at: float
    next_run_at: float | None
    last_run_at: float | None
    last_status: str | None
    created_at: float
    updated_at: float

    @classmethod
    def from_row(cls, row: Row) -> JobRecord:
        values = {f.name: row[f.name] for f in fields(cls)}
        return cls(**values | {"enabled": bool(row["enabled"])})


@dataclass(frozen=True, slots=True)
class JobRunRecord:
    id: int
    job_id: str
    tenant: str
    reason: str
    scheduled_for: float | None
    session_id: str | None
    status: str
    started_at: float
    finished_at: float | None
    output: str | None
    input_tokens: int | None
    output_tokens: int | None
    error: str | None

    @classmethod
    def from_row(cls, row: Row) -> JobRunRecord:
        return cls(**{f.name: row[f.name] for f in fields(cls)})


NextRun = Callable[[JobRecord, float], "float | None"]
"""The job's next occurrence strictly after an instant."""


class JobStore(CoreStore):
    """Job definitions, claims and run history."""

    async def create_job(self, job: JobRecord) -> bool:
        """Insert ``job``; False if its tenant already has a job by that name."""

        async def insert(tx: Tx) -> int:
            return await tx.execute(
                f"INSERT INTO jobs ({JOB_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant, name) DO NOTHING",
                (
                    job.id,
                    job.tenant,
                    job.name,
                    job.schedule,
                    job.timezone,
                    job.prompt,
                    job.session_key,
                    job.model,
                    job.enabled,
                    job.anchor_at,
                    job.next_run_at,
                    job.last_run_at,
                    job.last_status,
                    job.created_at,
                    job.updated_at,
                ),
            )

        return bool(await self.db.transact(insert))

    async def get_job(self, tenant: str, ref: str) -> JobRecord | None:
        """A tenant's job by id, or else by name."""
        for column in ("id", "name"):
            row = await self.db.fetchone(
                f"SELECT {JOB_COLUMNS} FROM jobs WHERE tenant = ? AND {column} = ?", (tenant, ref)
            )
            if row is not None:
                return JobRecord.from_row(row)
        return None

    async def list_jobs(self, tenant: str) -> list[JobRecord]:
        rows = await self.db.fetchall(
            f"SELECT {JOB_COLUMNS} FROM jobs WHERE tenant = ? ORDER BY name", (tenant,)
        )
        return [JobRecord.from_row(row) for row in rows]

    async def update_job(self, job_id: str, changes: Mapping[str, Any], now: float) -> bool:
        """Apply ``changes`` (columns of :data:`MUTABLE`); False if the new name is taken."""
        unknown = set(changes) - MUTABLE
        if unknown:
            raise ValueError(f"not updatable: {', '.join(sorted(unknown))}")
        assignments = "".join(f"{column} = ?, " for column in changes)

        async def update(tx: Tx) -> bool:
            if "name" in changes:
                taken = await tx.fetchall(
                    "SELECT 1 FROM jobs WHERE name = ? AND id <> ? "
                    "AND tenant = (SELECT tenant FROM jobs WHERE id = ?)",
                    (changes["name"], job_id, job_id),
                )
                if taken:
                    return False
            await tx.execute(
                f"UPDATE jobs SET {assignments}updated_at = ? WHERE id = ?",
                (*changes.values(), now, job_id),
            )
            return True

        return await self.db.transact(update)

    async def delete_job(self, job_id: str) -> bool:
        sql = "DELETE FROM jobs WHERE id = ?"
        return bool(await self.db.transact(lambda tx: tx.execute(sql, (job_id,))))

    # -- running -----------------------------------------------------------

    async def claim_due(
        self, now: float, limit: int, next_run: NextRun
    ) -> list[tuple[JobRecord, JobRunRecord]]:
        """Claim up to ``limit`` jobs due at ``now`` and open a run for each.

        A claim moves ``next_run_at`` to the first occurrence after ``now`` —
        so occurrences missed while nobody was running collapse into this one
        run — and only succeeds if ``next_run_at`` still holds the value read:
        another scheduler that claimed it first leaves nothing to update.
        """
        # Most passes find nothing due: answer those from the reader, without
        # taking the write lock.
        due = "SELECT 1 FROM jobs WHERE enabled AND next_run_at <= ? LIMIT 1"
        if await self.db.fetchone(due, (now,)) is None:
            return []
        select = (
            f"SELECT {JOB_COLUMNS} FROM jobs WHERE enabled AND next_run_at <= ? "
            "ORDER BY next_run_at LIMIT ?"
        )
        if self.db.dialect == "postgresql":
            # Replicas skip the rows another one is claiming instead of queueing on them.
            select += " FOR UPDATE SKIP LOCKED"

        async def claim(tx: Tx) -> list[tuple[JobRecord, JobRunRecord]]:
            claimed = []
            for row in await tx.fetchall(select, (now, limit)):
                job = JobRecord.from_row(row)
                changed = await tx.execute(
                    "UPDATE jobs SET next_run_at = ?, last_run_at = ?, updated_at = ? "
                    "WHERE id = ? AND enabled AND next_run_at = ?",
                    (next_run(job, now), now, now, job.id, job.next_run_at),
                )
                if changed:
                    run = await self._insert_run(tx, job, "schedule", job.next_run_at, now)
                    claimed.append((job, run))
            return claimed

        return await self.db.transact(claim)

    async def start_run(self, job: JobRecord, now: float) -> JobRunRecord:
        """Open a run of ``job`` outside its schedule (run now)."""

        async def start(tx: Tx) -> JobRunRecord:
            await tx.execute(
                "UPDATE jobs SET last_run_at = ?, updated_at = ? WHERE id = ?", (now, now, job.id)
            )
            return await self._insert_run(tx, job, "manual", None, now)

        return await self.db.transact(start)

    @staticmethod
    async def _insert_run(
        tx: Tx, job: JobRecord, reason: str, scheduled_for: float | None, now: float
    ) -> JobRunRecord:
        rows = await tx.fetchall(
            "INSERT INTO job_runs (job_id, tenant, reason, scheduled_for, status, started_at) "
            f"VALUES (?, ?, ?, ?, 'running', ?) RETURNING {RUN_COLUMNS}",
            (job.id, job.tenant, reason, scheduled_for, now),
        )
        return JobRunRecord.from_row(rows[0])

    async def finish_run(
        self,
        run: JobRunRecord,
        *,
        status: str,
        finished_at: float,
        session_id: str | None = None,
        output: str | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        error: str | None = None,
    ) -> JobRunRecord:
        """Record how a run ended, and prune the job's oldest runs."""
        statements: Sequence[tuple[str, Sequence[Any]]] = [
            (
                "UPDATE job_runs SET status = ?, finished_at = ?, session_id = ?, output = ?, "
                "input_tokens = ?, output_tokens = ?, error = ? WHERE id = ?",
                (
                    status,
                    finished_at,
                    session_id,
                    output,
                    input_tokens,
                    output_tokens,
                    error,
                    run.id,
                ),
            ),
            ("UPDATE jobs SET last_status = ? WHERE id = ?", (status, run.job_id)),
            (
                "DELETE FROM job_runs WHERE job_id = ? AND id <= "
                "(SELECT id FROM job_runs WHERE job_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
                (run.job_id, run.job_id, KEEP_RUNS),
            ),
        ]
        await self.db.write(statements)
        found = await self.get_job_run(run.id)
        return found if found is not None else run

    async def get_job_run(self, run_id: int) -> JobRunRecord | None:
        row = await self.db.fetchone(f"SELECT {RUN_COLUMNS} FROM job_runs WHERE id = ?", (run_id,))
        return JobRunRecord.from_row(row) if row else None

    async def list_job_runs(
        self, job_id: str, limit: int = 20, before: int | None = None
    ) -> list[JobRunRecord]:
        """A job's runs, newest first; ``before`` (a run id) pages back."""
        sql = f"SELECT {RUN_COLUMNS} FROM job_runs WHERE job_id = ?"
        args: tuple[Any, ...] = (job_id,)
        if before is not None:
            sql += " AND id < ?"
            args += (before,)
        rows = await self.db.fetchall(sql + " ORDER BY id DESC LIMIT ?", (*args, limit))
        return [JobRunRecord.from_row(row) for row in rows]

    async def interrupt_runs(self, started_before: float, now: float) -> int:
        """Close runs left ``running`` by a process that stopped before finishing them."""
        return await self.db.transact(
            lambda tx: tx.execute(
                "UPDATE job_runs SET status = 'error', finished_at = ?, "
                "error = 'interrupted: the proxy stopped before the run finished' "
                "WHERE status = 'running' AND started_at < ?",
                (now, started_before),
            )
        )
