"""``hermes-proxy jobs …``: scheduled prompts, managed on the database directly.

No server is needed: each command opens the database (``--db``, or the
configured default), does its work and closes it. A running server sees the
changes at its next scheduler pass.

``jobs run`` runs the job here and now, in this process, against the
configured upstream, and prints the answer — the same turn the scheduler
would run, recorded in the run history as ``manual``. With ``--queue`` it
instead marks the job due, and the server's scheduler runs it within a tick.
Prefer ``--queue`` (or ``POST /api/jobs/{id}/run``) while a server uses the same
SQLite file: session locks are per process there, so a chat turn in the server
and the job's turn here could otherwise race on the same session.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

import click
import orjson

from proxy.app_state import Services
from proxy.config import Settings, SettingsError
from proxy.errors import ProxyError
from proxy.jobs import JobRunner, Jobs, job_json
from proxy.schedules import ScheduleError, zone
from proxy.store import SqlStore, open_store
from proxy.store.jobs import JobRecord, JobRunRecord

__all__ = ["jobs"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def database_options(fn: F) -> F:
    fn = click.option(
        "--tenant", default="default", show_default=True, help="Tenant whose jobs these are."
    )(fn)
    fn = click.option("--db", help="Database (default: configured, $HERMES_HOME/state.db).")(fn)
    return click.option(
        "--config",
        "config_file",
        type=click.Path(exists=True, dir_okay=False),
        help="TOML config file.",
    )(fn)


def settings_for(config_file: str | None, **flags: Any) -> Settings:
    try:
        return Settings.load(config_file=config_file, flags=flags)
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from exc


def with_store(settings: Settings, work: Callable[[SqlStore], Awaitable[T]]) -> T:
    async def main() -> T:
        store = await open_store(settings.db)
        try:
            return await work(store)
        finally:
            await store.close()

    try:
        return asyncio.run(main())
    except ProxyError as exc:
        raise click.ClickException(exc.message) from exc


def local(at: float | None, timezone: str) -> str:
    if at is None:
        return "-"
    try:
        return datetime.fromtimestamp(at, zone(timezone)).isoformat(timespec="minutes")
    except ScheduleError:
        return datetime.fromtimestamp(at).isoformat(timespec="minutes")


def echo_job(job: JobRecord) -> None:
    state = "enabled" if job.enabled else "paused"
    click.echo(f"{job.name}  ({job.id}, {state})")
    click.echo(f"  schedule:  {job.schedule}  [{job.timezone}]")
    click.echo(f"  next run:  {local(job.next_run_at, job.timezone)}")
    click.echo(f"  last run:  {local(job.last_run_at, job.timezone)}  {job.last_status or ''}")
    click.echo(f"  session:   {job.session_key}")
    click.echo(f"  model:     {job.model or 'hermes'}")
    click.echo(f"  prompt:    {job.prompt}")


def echo_run(run: JobRunRecord, timezone: str) -> None:
    took = f"{run.finished_at - run.started_at:.1f}s" if run.finished_at else "…"
    tokens = f"{run.input_tokens or 0}+{run.output_tokens or 0} tokens"
    click.echo(f"  #{run.id} {local(run.started_at, timezone)} {run.reason} {run.status} {took}")
    if run.status == "ok":
        click.echo(f"     {tokens}: {(run.output or '').strip()[:200]}")
    elif run.error:
        click.echo(f"     {run.error}")


@click.group()
def jobs() -> None:
    """Scheduled prompts that run against a session's memory."""


@jobs.command("list")
@database_options
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def list_jobs(config_file: str | None, db: str | None, tenant: str, as_json: bool) -> None:
    """List the tenant's jobs."""
    found = with_store(settings_for(config_file, db=db), lambda s: s.list_jobs(tenant))
    for job in found:
        if as_json:
            click.echo(orjson.dumps(job_json(job)))
            continue
        state = "" if job.enabled else "  (paused)"
        click.echo(
            f"{job.name:24} {job.schedule:18} {job.timezone:16} "
            f"next {local(job.next_run_at, job.timezone):22} {job.last_status or '-'}{state}"
        )


@jobs.command()
@database_options
@click.argument("name")
@click.option("--schedule", required=True, help="'0 9 * * 1', 'every 2h' or an ISO timestamp.")
@click.option("--prompt", required=True, help="What the job asks, in its session.")
@click.option("--session-id", help="Session the job runs in (default job:NAME).")
@click.option("--model", help="Model (default: the 'hermes' alias).")
@click.option("--timezone", default="UTC", show_default=True, help="IANA timezone.")
@click.option("--paused", is_flag=True, help="Create it paused.")
def add(
    config_file: str | None,
    db: str | None,
    tenant: str,
    name: str,
    schedule: str,
    prompt: str,
    session_id: str | None,
    model: str | None,
    timezone: str,
    paused: bool,
) -> None:
    """Add a job."""
    data = {
        "name": name,
        "schedule": schedule,
        "prompt": prompt,
        "session_id": session_id,
        "model": model,
        "timezone": timezone,
        "enabled": not paused,
    }
    job = with_store(
        settings_for(config_file, db=db), lambda s: Jobs(s, time.time).create(tenant, data)
    )
    echo_job(job)


@jobs.command()
@database_options
@click.argument("job")
@click.option("--runs", default=10, show_default=True, help="How many recent runs to show.")
def show(config_file: str | None, db: str | None, tenant: str, job: str, runs: int) -> None:
    """Show a job (by name or id) and its recent runs."""

    async def work(store: SqlStore) -> tuple[JobRecord, list[JobRunRecord]]:
        found = await Jobs(store, time.time).get(tenant, job)
        return found, await store.list_job_runs(found.id, runs)

    found, history = with_store(settings_for(config_file, db=db), work)
    echo_job(found)
    click.echo("runs:" if history else "runs: none yet")
    for run in history:
        echo_run(run, found.timezone)


async def _set_enabled(store: SqlStore, tenant: str, ref: str, enabled: bool) -> JobRecord:
    jobs_ = Jobs(store, time.time)
    found = await jobs_.get(tenant, ref)
    return await (jobs_.resume(found) if enabled else jobs_.pause(found))


@jobs.command()
@database_options
@click.argument("job")
def pause(config_file: str | None, db: str | None, tenant: str, job: str) -> None:
    """Pause a job (by name or id): it does not run until resumed."""
    settings = settings_for(config_file, db=db)
    echo_job(with_store(settings, lambda s: _set_enabled(s, tenant, job, False)))


@jobs.command()
@database_options
@click.argument("job")
def resume(config_file: str | None, db: str | None, tenant: str, job: str) -> None:
    """Resume a paused job; occurrences missed while paused are skipped."""
    settings = settings_for(config_file, db=db)
    echo_job(with_store(settings, lambda s: _set_enabled(s, tenant, job, True)))


@jobs.command()
@database_options
@click.argument("job")
def delete(config_file: str | None, db: str | None, tenant: str, job: str) -> None:
    """Delete a job (by name or id) and its run history; its session stays."""

    async def work(store: SqlStore) -> JobRecord:
        found = await Jobs(store, time.time).get(tenant, job)
        await store.delete_job(found.id)
        return found

    found = with_store(settings_for(config_file, db=db), work)
    click.echo(f"deleted {found.name} ({found.id})")


@jobs.command()
@database_options
@click.argument("job")
@click.option("--queue", is_flag=True, help="Mark it due for the server's scheduler instead.")
@click.option("--upstream", help="Upstream base URL (default: configured).")
@click.option("--model", "alias", help="Model the 'hermes' alias stands for (default: configured).")
def run(
    config_file: str | None,
    db: str | None,
    tenant: str,
    job: str,
    queue: bool,
    upstream: str | None,
    alias: str | None,
) -> None:
    """Run a job now, here, and print its answer (or --queue it for the server)."""
    # This process must not start a scheduler of its own.
    settings = settings_for(config_file, db=db, upstream=upstream, model=alias, jobs_tick=0)
    if queue:
        with_store(settings, lambda s: _queue(s, tenant, job))
        click.echo(f"queued {job}: the server's scheduler runs it at its next pass")
        return
    try:
        result = asyncio.run(_run_here(settings, tenant, job))
    except ProxyError as exc:
        raise click.ClickException(exc.message) from exc
    if result.status != "ok":
        raise click.ClickException(f"run {result.id} failed: {result.error}")
    click.echo(result.output or "")


async def _queue(store: SqlStore, tenant: str, ref: str) -> None:
    found = await Jobs(store, time.time).get(tenant, ref)
    if not found.enabled:
        raise click.ClickException(f"{found.name} is paused: resume it, or run it without --queue")
    now = time.time()
    await store.update_job(found.id, {"next_run_at": now}, now)


async def _run_here(settings: Settings, tenant: str, ref: str) -> JobRunRecord:
    from proxy.app import create_app

    app = create_app(settings)
    # The app's own lifespan builds the pipeline (store, upstream, compactor)
    # and, on the way out, waits for the compaction a turn may have started.
    async with app.router.lifespan_context(app):
        svc: Services = app.state.services
        found = await Jobs(svc.store, svc.clock).get(tenant, ref)
        started = await svc.store.start_run(found, svc.clock())
        runner = JobRunner(svc.store, svc.conversations, svc.upstream, svc.clock)
        return await runner.execute(found, started)
