"""How the ``sessions`` commands print things: tables, a session, search results."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import click

from proxy.store.search import SearchResult
from proxy.store.session_info import SessionInfo, SessionStats

__all__ = [
    "format_bytes",
    "local_time",
    "search_lines",
    "session_table",
    "show_lines",
    "stats_lines",
]

RULE = "─"
COLUMNS = (("ID", 30), ("Source", 12), ("Model", 30), ("Messages", 8), ("Started", 24))


def local_time(at: float | None, seconds: bool = False) -> str:
    if at is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M" + (":%S" if seconds else ""), time.localtime(at))


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def format_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB"):
        if value < 1000:
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


def _name(info: SessionInfo) -> str:
    """What a person calls the session, beside its id: its title and its key."""
    key = info.key if info.key != info.id else ""
    return "  ".join(part for part in (info.title, key) if part)


def session_table(sessions: Iterable[SessionInfo]) -> list[str]:
    """``sessions list``: aligned columns, newest first, ended sessions marked."""
    header = " ".join(
        name.rjust(width) if name == "Messages" else name.ljust(width) for name, width in COLUMNS
    )
    lines = [header + " Key / Title", RULE * (len(header) + 12)]
    for info in sessions:
        started = local_time(info.started_at) + ("" if info.live else " (ended)")
        cells = (
            _fit(info.id, 30).ljust(30),
            _fit(info.source, 12).ljust(12),
            _fit(info.model or "-", 30).ljust(30),
            str(info.message_count).rjust(8),
            started.ljust(24),
            _name(info),
        )
        lines.append(" ".join(cells).rstrip())
    return lines


def show_lines(detail: dict[str, Any]) -> list[str]:
    """``sessions show``: metadata, counters and what the session remembers."""
    d = detail
    tokens = d["tokens"]
    ended = "live" if d["live"] else f"ended {local_time(d['ended_at'], True)}"
    if d["end_reason"]:
        ended += f" ({d['end_reason']})"
    lines = [
        f"Session    {d['id']}",
        f"Key        {d['key']}",
        f"Source     {d['source']}" + (f"   user {d['user_id']}" if d["user_id"] else ""),
    ]
    if d["title"]:
        lines.append(f"Title      {d['title']}")
    lines += [
        f"Model      {d['model'] or '-'}",
        f"Started    {local_time(d['started_at'], True)}   "
        f"last active {local_time(d['updated_at'], True)}   {ended}",
    ]
    if d["parent_id"]:
        lines.append(f"Parent     {d['parent_id']}")
    pending = f", {d['pending_turns']} in flight" if d["pending_turns"] else ""
    lines += [
        f"Messages   {d['message_count']} in {d['turns']} turns{pending}",
        f"Tokens     input {tokens['input']:,} · output {tokens['output']:,} · "
        f"compaction {tokens['compaction']:,}",
        f"           sent upstream {tokens['sent']:,} of {tokens['full_history']:,} a "
        f"full-history client would have sent (saved {tokens['saved']:,})",
    ]
    for m in d["system_prompt"]:
        lines.append(f"System     {_fit(' '.join(str(m['content']).split()), 100)}")
    memory = d["memory"]
    lines.append(
        f"Memory     version {memory['version']}, {memory['tokens']:,} tokens, "
        f"folded through message {memory['through_seq']} (turn {memory['through_turn']})"
    )
    lines.append(f"  Facts ({len(memory['facts'])})")
    lines += [f"    - {f['text']} (turn {f['turn']})" for f in memory["facts"]]
    lines.append(f"  Reversals ({len(memory['reversals'])})")
    for r in memory["reversals"]:
        because = f"; because {r['reason']}" if r["reason"] else ""
        lines.append(
            f'    - {r["subject"]}: "{r["before"]}" (turn {r["before_turn"]}) -> '
            f'"{r["after"]}" (turn {r["turn"]}){because}'
        )
    lines.append(f"  Summary ({len(memory['summary'])} lines)")
    lines += [f"    - {line}" for line in memory["summary"]]
    window = d["window"]
    lines.append(f"Window     {window['messages']} messages, {window['tokens']:,} tokens")
    return lines


def stats_lines(stats: SessionStats) -> list[str]:
    lines = [f"Total sessions: {stats.sessions}", f"Total messages: {stats.messages}"]
    lines += [
        f"{s.source}: {s.sessions} sessions" + (f" ({s.live} live)" if s.live else "")
        for s in stats.sources
    ]
    lines.append(f"Database size: {format_bytes(stats.database_bytes)}")
    lines.append(
        f"Tokens saved by compaction: {stats.saved_tokens:,} "
        f"(sent {stats.sent_tokens:,} prompt tokens where replaying the full history "
        f"would have sent {stats.full_tokens:,}; compaction itself used "
        f"{stats.compaction_tokens:,})"
    )
    lines.append(
        f"Upstream usage: {stats.input_tokens:,} input, {stats.output_tokens:,} output tokens"
    )
    return lines


def search_lines(result: SearchResult, original: str, color: bool) -> list[str]:
    count = len(result.sessions)
    verb = "matches" if count == 1 else "match"
    lines = [f"{count} session{'s' if count != 1 else ''} {verb} {original!r}"]
    if result.rewritten:
        lines[0] += f" (not valid query syntax; searched as plain words: {result.query})"
    for hit in result.sessions:
        info = hit.session
        name = f"  {_name(info)}" if _name(info) else ""
        state = "" if info.live else " (ended)"
        plural = "s" if hit.hits != 1 else ""
        lines.append("")
        lines.append(
            click.style(info.id, bold=color)
            + f"  {info.source}  {local_time(info.started_at)}{state}{name}"
            + f"  — {hit.hits} matching message{plural}"
        )
        for e in hit.excerpts:
            text = " ".join(e.text.split())
            lines.append(f"    turn {e.turn} {e.role}: {text}")
    return lines
