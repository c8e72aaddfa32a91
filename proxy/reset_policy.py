"""When a session is due for an automatic reset: policies per source, pure logic.

A policy is written ``SOURCE=MODE`` in the configuration (``--reset-policy``,
repeatable; ``HERMES_RESET_POLICY`` comma-separated; a list in the config file)::

    telegram=idle:1440        reset after 1,440 minutes without a message
    discord=daily:4           reset at 04:00 local time every day
    whatsapp=both:720:4       whichever comes first
    cli=none                  never (the default for every source)
    *=idle:10080              any source not named otherwise

"Daily at 4" means that a session last active before today's 04:00 starts
afresh at its next message after it; the check is made lazily, at the start
of a turn, so nothing runs on a timer.

    >>> policies = parse_policies(["telegram=idle:60"])
    >>> policies.for_source("telegram").due(last_active=0.0, now=3600.0)
    True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo

__all__ = ["NEVER", "ResetPolicies", "ResetPolicy", "parse_policies", "parse_policy"]

MODES = ("none", "idle", "daily", "both")


@dataclass(frozen=True, slots=True)
class ResetPolicy:
    """One source's policy: idle minutes and/or a daily hour (local time)."""

    mode: str = "none"
    idle_minutes: int | None = None
    daily_hour: int | None = None

    def due(self, *, last_active: float, now: float, tz: tzinfo | None = None) -> str | None:
        """Why a session last active at ``last_active`` is due at ``now`` (``"idle"``,
        ``"daily"``), or ``None``. ``tz`` is the timezone of the daily hour; by
        default the process's local time."""
        if self.idle_minutes is not None and now - last_active >= self.idle_minutes * 60:
            return "idle"
        if self.daily_hour is not None and last_active < last_boundary(now, self.daily_hour, tz):
            return "daily"
        return None

    def __str__(self) -> str:
        if self.mode == "idle":
            return f"idle:{self.idle_minutes}"
        if self.mode == "daily":
            return f"daily:{self.daily_hour}"
        if self.mode == "both":
            return f"both:{self.idle_minutes}:{self.daily_hour}"
        return "none"


NEVER = ResetPolicy()


def last_boundary(now: float, hour: int, tz: tzinfo | None = None) -> float:
    """The latest instant ≤ ``now`` at which the wall clock in ``tz`` read ``hour``:00."""
    # Wall-clock arithmetic (naive local time, or aware in ``tz``): the day
    # before is the same hour on the clock even across a DST change, and
    # .timestamp() converts with the offset in force at that moment.
    local = datetime.fromtimestamp(now, tz)
    boundary = local.replace(hour=hour, minute=0, second=0, microsecond=0)
    if boundary > local:
        boundary -= timedelta(days=1)
    return boundary.timestamp()


@dataclass(frozen=True)
class ResetPolicies:
    """Policies by source; ``*`` is the fallback; unnamed sources never reset."""

    by_source: Mapping[str, ResetPolicy] = field(default_factory=dict)

    def for_source(self, source: str) -> ResetPolicy:
        return self.by_source.get(source) or self.by_source.get("*") or NEVER

    def __bool__(self) -> bool:
        return any(p.mode != "none" for p in self.by_source.values())


def parse_policy(text: str, label: str | None = None) -> ResetPolicy:
    """``idle:N``, ``daily:H``, ``both:N:H`` or ``none``; ValueError naming the problem."""
    label = label or text
    mode, *args = [part.strip() for part in text.strip().split(":")]
    if mode not in MODES:
        raise ValueError(f"reset policy {label!r}: mode must be one of {', '.join(MODES)}")
    expected = {"none": 0, "idle": 1, "daily": 1, "both": 2}[mode]
    if len(args) != expected:
        shape = {"none": "none", "idle": "idle:MINUTES", "daily": "daily:HOUR"}
        raise ValueError(
            f"reset policy {label!r}: write it as {shape.get(mode, 'both:MINUTES:HOUR')}"
        )
    try:
        numbers = [int(a) for a in args]
    except ValueError:
        raise ValueError(f"reset policy {label!r}: minutes and hour must be integers") from None
    minutes = numbers[0] if mode in ("idle", "both") else None
    hour = numbers[-1] if mode in ("daily", "both") else None
    if minutes is not None and minutes < 1:
        raise ValueError(f"reset policy {label!r}: idle minutes must be at least 1")
    if hour is not None and not 0 <= hour <= 23:
        raise ValueError(f"reset policy {label!r}: the hour must be 0-23")
    return ResetPolicy(mode, minutes, hour)


def parse_policies(entries: Iterable[str]) -> ResetPolicies:
    """``SOURCE=POLICY`` entries (later entries for a source win)."""
    out: dict[str, ResetPolicy] = {}
    for entry in entries:
        source, sep, policy = entry.partition("=")
        if not sep or not source.strip():
            raise ValueError(f"reset policy {entry!r}: write it as SOURCE=POLICY, e.g. cli=idle:60")
        out[source.strip()] = parse_policy(policy, entry)
    return ResetPolicies(out)
