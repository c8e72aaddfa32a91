"""Scheduled jobs: what a job is, how it is checked and changed, and how one run goes.

A job is a prompt that runs on a schedule (:mod:`proxy.schedules`) as one
turn of a session — by default its own, ``job:<name>`` — so the answer is
built from, and stored into, that session's memory like any chat turn.
:class:`Jobs` is the logic shared by the HTTP API and the CLI; :class:`JobRunner`
runs one claimed run through :func:`proxy.oneshot.complete_turn`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import orjson

from compaction import Message
from proxy.errors import Conflict, InvalidRequest, NotFound, ProxyError, UpstreamStatus
from proxy.oneshot import complete_turn
from proxy.schedules import Schedule, ScheduleError, UnknownTimezone, parse_schedule, zone
from proxy.store import SqlStore
from proxy.store.jobs import JobRecord, JobRunRecord, new_job_id
from proxy.turns import Conversations, TurnRequest
from proxy.upstream import Upstream

__all__ = ["JobRunner", "Jobs", "job_json", "run_json"]

logger = logging.getLogger("hermes.jobs")

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,99}")
FIELDS = ("name", "schedule", "prompt", "session_id", "model", "timezone", "enabled")
Clock = Callable[[], float]


def schedule_of(job: JobRecord) -> Schedule:
    return parse_schedule(job.schedule, zone(job.timezone), job.anchor_at)


def next_run(job: JobRecord, after: float) -> float | None:
    """The job's first occurrence after ``after``; ``None`` if there is none (or it broke)."""
    try:
        return schedule_of(job).next_after(after)
    except ScheduleError:
        # Stored schedules were valid when written; a zone that vanished from
        # the tz database must not stop every other job from being claimed.
        logger.error("job %s has an unusable schedule %r", job.id, job.schedule)
        return None


class Jobs:
    """Create, change, pause and resume a tenant's jobs, validating every field.

    Errors are the API's: :class:`~proxy.errors.InvalidRequest` naming the
    field, :class:`~proxy.errors.Conflict` for a taken name,
    :class:`~proxy.errors.NotFound`.
    """

    def __init__(self, store: SqlStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    async def get(self, tenant: str, ref: str) -> JobRecord:
        job = await self.store.get_job(tenant, ref)
        if job is None:
            raise NotFound(f"No job {ref!r}.", param="id")
        return job

    async def create(self, tenant: str, data: Mapping[str, Any]) -> JobRecord:
        fields = _checked(data)
        for required in ("name", "schedule", "prompt"):
            if required not in fields:
                raise InvalidRequest(f"'{required}' is a required property.", param=required)
        now = float(math.floor(self.clock()))
        job = JobRecord(
            id=new_job_id(),
            tenant=tenant,
            name=fields["name"],
            schedule=fields["schedule"],
            timezone=fields.get("timezone", "UTC"),
            prompt=fields["prompt"],
            session_key=fields.get("session_id") or f"job:{fields['name']}",
            model=fields.get("model"),
            enabled=fields.get("enabled", True),
            anchor_at=now,
            next_run_at=None,
            last_run_at=None,
            last_status=None,
            created_at=now,
            updated_at=now,
        )
        first = _first_run(job, now)
        job = replace(job, next_run_at=first if job.enabled else None)
        if not await self.store.create_job(job):
            raise Conflict(f"A job named {job.name!r} already exists.", param="name")
        return job

    async def update(self, job: JobRecord, data: Mapping[str, Any]) -> JobRecord:
        fields = _checked(data)
        changes: dict[str, Any] = {
            ("session_key" if k == "session_id" else k): v for k, v in fields.items()
        }
        if "session_key" in changes and changes["session_key"] is None:
            changes["session_key"] = f"job:{changes.get('name', job.name)}"
        now = float(math.floor(self.clock()))
        updated = replace(job, **changes)
        reschedule = "schedule" in changes or "timezone" in changes
        if reschedule:
            changes["anchor_at"] = now
            updated = replace(updated, anchor_at=now)
        if reschedule or updated.enabled != job.enabled:
            # A new schedule must be valid even on a paused job.
            first = _first_run(updated, now) if reschedule or updated.enabled else None
            changes["next_run_at"] = first if updated.enabled else None
        return await self._apply(job, changes, now)

    async def pause(self, job: JobRecord) -> JobRecord:
        return await self.update(job, {"enabled": False})

    async def resume(self, job: JobRecord) -> JobRecord:
        """Enable the job again; occurrences missed while paused are skipped, not caught up."""
        return await self.update(job, {"enabled": True})

    async def _apply(self, job: JobRecord, changes: dict[str, Any], now: float) -> JobRecord:
        if not await self.store.update_job(job.id, changes, now):
            raise Conflict(f"A job named {changes.get('name')!r} already exists.", param="name")
        return await self.get(job.tenant, job.id)


def _first_run(job: JobRecord, now: float) -> float | None:
    """The first occurrence of a new or changed schedule; it must have one."""
    try:
        schedule = schedule_of(job)
    except ScheduleError as exc:
        param = "timezone" if isinstance(exc, UnknownTimezone) else "schedule"
        raise InvalidRequest(str(exc), param=param, code=f"invalid_{param}") from exc
    first = schedule.next_after(now)
    if first is None:
        why = "is in the past" if schedule.kind == "once" else "never occurs"
        raise InvalidRequest(
            f"The schedule {job.schedule!r} {why}.", param="schedule", code="invalid_schedule"
        )
    return first


def _checked(data: Mapping[str, Any]) -> dict[str, Any]:
    """The known fields of a create/update body, each checked; errors name the field."""
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise InvalidRequest(
            f"Unknown field {unknown[0]!r}; a job has {', '.join(FIELDS)}.", param=unknown[0]
        )
    out: dict[str, Any] = {}
    for field in FIELDS:
        if field not in data:
            continue
        value = data[field]
        if field == "enabled":
            if not isinstance(value, bool):
                raise InvalidRequest("'enabled' must be a boolean.", param=field)
        elif field in ("model", "session_id") and value is None:
            pass
        elif not isinstance(value, str):
            raise InvalidRequest(f"'{field}' must be a string.", param=field)
        out[field] = value
    if "name" in out and not NAME.fullmatch(out["name"]):
        raise InvalidRequest(
            f"Invalid job name {out['name']!r}: use 1 to 100 letters, digits and . _ : @ -, "
            "starting with a letter or digit.",
            param="name",
        )
    if "prompt" in out and not out["prompt"].strip():
        raise InvalidRequest("'prompt' must not be empty.", param="prompt")
    if "schedule" in out and not out["schedule"].strip():
        raise InvalidRequest("'schedule' must not be empty.", param="schedule")
    if "timezone" in out:
        try:
            zone(out["timezone"])
        except ScheduleError as exc:
            raise InvalidRequest(str(exc), param="timezone", code="invalid_timezone") from exc
    key = out.get("session_id")
    if key is not None and (not 1 <= len(key) <= 256 or not key.isprintable()):
        raise InvalidRequest(
            "'session_id' must be 1 to 256 printable characters.", param="session_id"
        )
    if out.get("model") == "":
        out["model"] = None
    return out


def job_json(job: JobRecord) -> dict[str, Any]:
    return {
        "id": job.id,
        "object": "job",
        "name": job.name,
        "schedule": job.schedule,
        "timezone": job.timezone,
        "prompt": job.prompt,
        "session_id": job.session_key,
        "model": job.model,
        "enabled": job.enabled,
        "next_run_at": _stamp(job.next_run_at),
        "last_run_at": _stamp(job.last_run_at),
        "last_status": job.last_status,
        "created_at": _stamp(job.created_at),
        "updated_at": _stamp(job.updated_at),
    }


def run_json(run: JobRunRecord) -> dict[str, Any]:
    usage = None
    if run.input_tokens is not None or run.output_tokens is not None:
        prompt, completion = run.input_tokens or 0, run.output_tokens or 0
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
    return {
        "id": run.id,
        "object": "job.run",
        "job_id": run.job_id,
        "reason": run.reason,
        "status": run.status,
        "scheduled_for": _stamp(run.scheduled_for),
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "session": run.session_id,
        "output": run.output,
        "usage": usage,
        "error": run.error,
    }


def _stamp(at: float | None) -> int | float | None:
    if at is None:
        return None
    return int(at) if at == int(at) else at


def describe(exc: BaseException) -> str:
    """What went wrong, for the run history: the upstream's own message when it sent one."""
    if isinstance(exc, UpstreamStatus):
        try:
            detail = orjson.loads(exc.raw)["error"]["message"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            detail = exc.raw[:500].decode(errors="replace")
        return f"{exc.message}: {detail}" if detail else exc.message
    if isinstance(exc, ProxyError):
        return exc.message
    return f"{type(exc).__name__}: {exc}"


class JobRunner:
    """Runs one claimed run as a turn of the job's session and records how it went."""

    def __init__(
        self, store: SqlStore, conversations: Conversations, upstream: Upstream, clock: Clock
    ) -> None:
        self.store = store
        self.conversations = conversations
        self.upstream = upstream
        self.clock = clock

    async def execute(self, job: JobRecord, run: JobRunRecord) -> JobRunRecord:
        request = TurnRequest(
            tenant=job.tenant,
            key=job.session_key,
            body={"model": job.model or "hermes"},
            source="cron",
        )
        try:
            result = await complete_turn(
                self.conversations, self.upstream, request, [Message("user", job.prompt)]
            )
        except asyncio.CancelledError:
            await self._failed(job, run, "cancelled: the proxy shut down during the run")
            raise
        except Exception as exc:
            if not isinstance(exc, ProxyError):
                logger.exception("job %s run %s failed", job.id, run.id)
            return await self._failed(job, run, describe(exc))
        return await self.store.finish_run(
            run,
            status="ok",
            finished_at=self.clock(),
            session_id=result.session_id,
            output=result.content,
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
        )

    async def _failed(self, job: JobRecord, run: JobRunRecord, error: str) -> JobRunRecord:
        session = await self.store.live_session(job.tenant, job.session_key)
        return await self.store.finish_run(
            run,
            status="error",
            finished_at=self.clock(),
            session_id=session.id if session else None,
            error=error,
        )
