"""``hermes-proxy sessions …``: manage sessions on the database directly.

The commands open the same store as ``serve`` (``--db``, default the same
database, with the environment and config file applied) and work while a
server runs on it: SQLite in WAL mode lets them read beside it, and each
write is a short transaction that waits for the server's writer (busy
timeout) and is retried if the database stays busy.

Errors a user can fix (an unknown or ambiguous id, a malformed search, a bad
import line) exit with status 2; a database failure exits with 1.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO, TypeVar

import click
import orjson

from proxy.cli_view import search_lines, session_table, show_lines, stats_lines
from proxy.config import Settings, SettingsError
from proxy.errors import Conflict, ProxyError, StorageError
from proxy.sessions import delete_session, detail_json, resolve_session
from proxy.store import Database, SqlStore, database_for
from proxy.store.archive import ArchiveError
from proxy.store.search import QueryError
from proxy.store.session_info import SessionInfo
from proxy.store.sqlite import sqlite_path

__all__ = ["sessions"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

# proxy.auth.DEFAULT_TENANT, without importing the HTTP stack for it.
DEFAULT_TENANT = "default"
BUSY_ATTEMPTS = 4
PROGRESS_FROM = 20  # sessions: smaller exports need no progress bar


class UserError(click.ClickException):
    """Something the user can fix: exit status 2, like a usage error."""

    exit_code = 2


@dataclass(frozen=True)
class Target:
    """Where a command works: the settings' database and one tenant's sessions."""

    settings: Settings
    tenant: str

    def run(self, fn: Callable[[SqlStore], Awaitable[T]], *, create: bool = False) -> T:
        """Open the store, run ``fn`` on it, close it; retry while the database is busy."""
        url = self.settings.db
        if not create and not url.startswith(("postgres://", "postgresql://")):
            path = Path(sqlite_path(url)).expanduser()
            if not path.exists():
                raise click.ClickException(f"No database at {path} (pass --db, or start serve).")
        for attempt in range(BUSY_ATTEMPTS):
            try:
                database = database_for(url)
            except ValueError as exc:
                raise click.ClickException(f"--db {url}: {exc}") from exc
            try:
                return asyncio.run(_with_store(database, fn))
            except StorageError as exc:
                busy = "locked" in exc.message or "busy" in exc.message
                if busy and attempt < BUSY_ATTEMPTS - 1:
                    time.sleep(0.25 * 2**attempt)
                    continue
                raise click.ClickException(exc.message) from exc
            except ProxyError as exc:
                raise UserError(exc.message) from exc
            except (QueryError, ArchiveError) as exc:
                raise UserError(str(exc)) from exc
        raise AssertionError("unreachable")

    async def resolve(self, store: SqlStore, ident: str) -> SessionInfo:
        return await resolve_session(store, self.tenant, ident)


async def _with_store(database: Database, fn: Callable[[SqlStore], Awaitable[T]]) -> T:
    store = SqlStore(database)
    await store.open()
    try:
        return await fn(store)
    finally:
        await store.close()


def store_options(fn: F) -> F:
    """``--db``, ``--tenant`` and ``--config`` on every command; passes a :class:`Target`."""

    def build(config_file: str | None, db: str | None, tenant: str, **kwargs: Any) -> Any:
        try:
            settings = Settings.load(config_file=config_file, flags={"db": db})
        except SettingsError as exc:
            raise click.UsageError(str(exc)) from exc
        return fn(Target(settings, tenant), **kwargs)

    build.__name__, build.__doc__ = fn.__name__, fn.__doc__
    wrapped: Any = click.option(
        "--tenant",
        default=DEFAULT_TENANT,
        show_default=True,
        envvar="HERMES_TENANT",
        help="Tenant whose sessions to use (the name after KEY: in --api-key).",
    )(build)
    wrapped = click.option(
        "--db", help="Database, as for serve (default $HERMES_DB or $HERMES_HOME/state.db)."
    )(wrapped)
    wrapped = click.option(
        "--config",
        "config_file",
        type=click.Path(exists=True, dir_okay=False),
        help="TOML config file, as for serve.",
    )(wrapped)
    return wrapped  # type: ignore[no-any-return]


@click.group()
def sessions() -> None:
    """List, inspect, search, export, reset and prune sessions."""


@sessions.command("list")
@click.option("--source", help="Only sessions from this source (cli, telegram, api, …).")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@store_options
def list_command(target: Target, source: str | None, limit: int, as_json: bool) -> None:
    """Recent sessions, newest first."""
    from proxy.sessions import session_json

    async def run(store: SqlStore) -> tuple[list[SessionInfo], list[str]]:
        page = await store.list_sessions(target.tenant, source=source, limit=limit)
        return page.items, [] if page.items else await store.tenants()

    items, tenants = target.run(run)
    if as_json:
        for info in items:
            click.echo(orjson.dumps(session_json(info)))
        return
    if not items:
        others = [t for t in tenants if t != target.tenant]
        hint = f" Tenants with sessions: {', '.join(others)} (--tenant)." if others else ""
        click.echo(f"No sessions for tenant {target.tenant!r}.{hint}")
        return
    click.echo("\n".join(session_table(items)))


@sessions.command()
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print the session as JSON.")
@store_options
def show(target: Target, session_id: str, as_json: bool) -> None:
    """Metadata, token counters and what the session remembers."""
    from compaction import MemoryRenderer, TiktokenCounter

    async def run(store: SqlStore) -> dict[str, Any]:
        info = await target.resolve(store, session_id)
        return await detail_json(store, info, MemoryRenderer(TiktokenCounter()))

    detail = target.run(run)
    if as_json:
        click.echo(orjson.dumps(detail, option=orjson.OPT_INDENT_2))
    else:
        click.echo("\n".join(show_lines(detail)))


@sessions.command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--source", help="Only sessions from this source.")
@click.option("--session-id", "session_id", help="Only this session (id, key or prefix).")
@store_options
def export(target: Target, file: str, source: str | None, session_id: str | None) -> None:
    """Write sessions to FILE as JSONL (one session per line; - for stdout)."""

    async def run(store: SqlStore, out: IO[bytes]) -> int:
        ids = [(await target.resolve(store, session_id)).id] if session_id else None
        total = await store.count_sessions(target.tenant, source=source, session_ids=ids)
        hidden = total < PROGRESS_FROM or not sys.stderr.isatty()
        with click.progressbar(
            length=total, label="Exporting sessions", file=sys.stderr, hidden=hidden
        ) as bar:
            async for line in store.export_sessions(target.tenant, source=source, session_ids=ids):
                out.write(orjson.dumps(line) + b"\n")
                bar.update(1)
        return total

    # Lazy: nothing is created if the session id does not resolve.
    with click.open_file(file, "wb", lazy=True) as out:
        total = target.run(lambda store: run(store, out))
    where = "stdout" if file == "-" else file
    click.echo(f"Exported {total} session{'s' if total != 1 else ''} to {where}.", err=True)


@sessions.command("import")
@click.argument("file", type=click.File("rb"))
@store_options
def import_command(target: Target, file: BinaryIO) -> None:
    """Restore sessions from a JSONL export (- for stdin); existing ones are skipped."""

    async def run(store: SqlStore) -> dict[str, int]:
        counts = {"imported": 0, "exists": 0, "live_conflict": 0, "messages": 0, "detached": 0}
        for number, raw in enumerate(file, 1):
            if not raw.strip():
                continue
            try:
                done = await store.import_session(target.tenant, orjson.loads(raw))
            except (orjson.JSONDecodeError, ArchiveError) as exc:
                raise UserError(
                    f"line {number}: {exc}; {counts['imported']} sessions were imported before it"
                ) from exc
            counts[done.outcome] += 1
            counts["messages"] += done.messages
            counts["detached"] += done.detached
        return counts

    c = target.run(run, create=True)
    click.echo(f"Imported {c['imported']} sessions ({c['messages']} messages).")
    if c["exists"]:
        click.echo(f"Skipped {c['exists']} already in the database.")
    if c["live_conflict"]:
        click.echo(f"Skipped {c['live_conflict']} live sessions whose key has a live session.")
    if c["detached"]:
        click.echo(f"{c['detached']} had a parent session not in the database (link dropped).")


@sessions.command()
@click.argument("session_id")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@store_options
def delete(target: Target, session_id: str, yes: bool) -> None:
    """Delete a session: its messages, memory and search index rows."""

    async def find(store: SqlStore) -> SessionInfo:
        return await target.resolve(store, session_id)

    info = target.run(find)
    if not yes:
        click.confirm(
            f"Delete session {info.id} (key {info.key!r}, {info.message_count} messages)?",
            abort=True,
        )

    async def run(store: SqlStore) -> bool:
        return await delete_session(store, info)

    if not target.run(run):
        raise UserError(f"Session {info.id} was already gone.")
    click.echo(f"Deleted session {info.id}.")


@sessions.command()
@click.option("--older-than", "days", default=90, show_default=True, type=click.IntRange(0))
@click.option("--source", help="Only sessions from this source.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@store_options
def prune(target: Target, days: int, source: str | None, yes: bool) -> None:
    """Delete ended sessions that ended more than DAYS ago; live ones are never touched."""
    cutoff = time.time() - days * 86400

    async def count(store: SqlStore) -> tuple[int, int]:
        return await store.count_prunable(target.tenant, cutoff, source)

    found, messages = target.run(count)
    what = f"ended {source + ' ' if source else ''}sessions older than {days} days"
    if not found:
        click.echo(f"Nothing to prune: no {what}.")
        return
    if not yes:
        click.confirm(f"Delete {found} {what} ({messages} messages)?", abort=True)

    async def run(store: SqlStore) -> tuple[int, str]:
        deleted = await store.prune(target.tenant, cutoff, source)
        try:
            how = await store.reclaim_space()
        except StorageError as exc:
            how = exc.message
        return deleted, how

    deleted, how = target.run(run)
    click.echo(f"Pruned {deleted} session{'s' if deleted != 1 else ''}; space: {how}.")


@sessions.command()
@store_options
def stats(target: Target) -> None:
    """Totals, sessions per source, database size and tokens saved by compaction."""
    click.echo("\n".join(stats_lines(target.run(lambda store: store.stats(target.tenant)))))


@sessions.command()
@click.argument("query")
@click.option("--limit", default=3, show_default=True, type=click.IntRange(1, 50))
@click.option("--source", help="Only sessions from this source.")
@store_options
def search(target: Target, query: str, limit: int, source: str | None) -> None:
    """Full-text search: words, "exact phrase", OR, NOT, prefix*; grouped by session."""
    color = sys.stdout.isatty()
    marks = ("\x1b[1m", "\x1b[0m") if color else ("**", "**")

    async def run(store: SqlStore) -> Any:
        return await store.search_sessions(
            target.tenant, query, limit=limit, source=source, marks=marks
        )

    click.echo("\n".join(search_lines(target.run(run), query, color)))


@sessions.command()
@click.argument("session_id")
@click.argument("title")
@store_options
def rename(target: Target, session_id: str, title: str) -> None:
    """Give a session a title ("" removes it)."""

    async def run(store: SqlStore) -> SessionInfo:
        info = await target.resolve(store, session_id)
        await store.rename(info.id, title.strip() or None)
        return info

    info = target.run(run)
    click.echo(f"Session {info.id} is now titled {title.strip()!r}." if title.strip() else "")


@sessions.command()
@click.argument("session_id")
@store_options
def reset(target: Target, session_id: str) -> None:
    """End the session and start a new one under its key that keeps its facts.

    The session's recent turns are first folded into its memory with the
    configured summarizer (--summarizer in the config or HERMES_SUMMARIZER;
    the extractive one if the model cannot be reached)."""
    old, new, facts, reversals = target.run(lambda store: _reset(store, target, session_id))
    click.echo(
        f"Session {old.id} ended. New session {new.id} under key {new.key!r} carries "
        f"{facts} fact{'s' if facts != 1 else ''} and "
        f"{reversals} reversal{'s' if reversals != 1 else ''}."
    )


async def _reset(
    store: SqlStore, target: Target, ident: str
) -> tuple[SessionInfo, SessionInfo, int, int]:
    from compaction import Extractive, ExtractiveSummarizer, MemoryRenderer, TiktokenCounter
    from proxy.app import budget_of, summarizer_for
    from proxy.resets import Resetter
    from proxy.upstream import Upstream

    info = await target.resolve(store, ident)
    if not info.live:
        raise Conflict(
            f"Session {info.id} has already ended; reset the live session under key "
            f"{info.key!r} instead."
        )
    settings = target.settings
    renderer = MemoryRenderer(TiktokenCounter())
    extractive = ExtractiveSummarizer(renderer)
    upstream = Upstream(
        settings.upstream, api_key=settings.upstream_api_key, timeout=settings.upstream_timeout
    )
    await upstream.open()
    try:
        summarizer = (
            summarizer_for(settings, upstream, renderer, extractive)
            if settings.summarizer == "llm"
            else Extractive(extractive)
        )
        new = await Resetter(store, summarizer, budget_of(settings)).reset(target.tenant, info.key)
    finally:
        await upstream.close()
    _, memory = await store.load_memory(new.id)
    return info, new, len(memory.facts), len(memory.reversals)
