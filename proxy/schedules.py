"""When a job runs: cron expressions, intervals and one-shot times, in a timezone.

Three kinds of schedule, all answering one question — the first occurrence
strictly after an instant (epoch seconds), or ``None`` once there is none::

    >>> s = parse_schedule("0 9 * * 1", zone("Europe/Paris"), anchor=0)
    >>> s.next_after(1_741_000_000)  # Mon 3 March 2025, 12:06 in Paris → Mon 10 March, 09:00
    1741161600.0

- **cron**, five fields (or ``@daily`` and friends), read in the job's
  timezone: ``0 9 * * 1`` is 09:00 local every Monday, whatever the UTC
  offset that day. Across a DST change a wall-clock time that does not exist
  (02:30 on a spring-forward night) runs as late as the clocks jumped (03:30);
  one that exists twice (01:30 on a fall-back night) runs once, the first time.
- **interval**, ``every 30m`` / ``every 2h`` / ``every 1d`` (units s, m, h, d,
  w; at least one minute), counted from an anchor (the job's creation or its
  last schedule change). Minutes and hours are elapsed time; days and weeks
  are calendar days in the job's timezone, so ``every 1d`` keeps its local
  time of day across DST changes (a 23- or 25-hour day).
- **once**, an ISO 8601 timestamp; without an offset it is read in the job's
  timezone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, CroniterError, croniter

__all__ = [
    "CronSchedule",
    "IntervalSchedule",
    "OnceSchedule",
    "Schedule",
    "ScheduleError",
    "UnknownTimezone",
    "parse_schedule",
    "zone",
]

# DST shifts are at most a couple of hours; a gap this wide covers every zone.
MAX_SHIFT = timedelta(hours=3)
MIN_INTERVAL = 60
UNITS = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "h": 3600,
    "hr": 3600,
    "hour": 3600,
    "d": 86400,
    "day": 86400,
    "w": 604800,
    "wk": 604800,
    "week": 604800,
}
INTERVAL = re.compile(r"every\s+(\d+)?\s*([a-z]+?)s?", re.IGNORECASE)
ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
MACROS = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)


class ScheduleError(ValueError):
    """A schedule or timezone that cannot be used; the message says why."""


class UnknownTimezone(ScheduleError):
    pass


class Schedule(Protocol):
    @property
    def kind(self) -> str:
        """``cron``, ``interval`` or ``once``."""
        ...

    def next_after(self, after: float) -> float | None:
        """The first occurrence strictly after ``after`` (epoch seconds)."""
        ...


def zone(name: str) -> ZoneInfo:
    """The IANA timezone ``name`` (``UTC``, ``Europe/Paris``, ``America/New_York``)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise UnknownTimezone(
            f"Unknown timezone {name!r}: use an IANA name such as 'UTC' or 'Europe/Paris'."
        ) from exc


def _wall(at: float, tz: ZoneInfo) -> datetime:
    """The naive local wall-clock time of instant ``at``."""
    return datetime.fromtimestamp(at, tz).replace(tzinfo=None)


def _instant(wall: datetime, tz: ZoneInfo) -> float:
    # fold=0: an ambiguous time is its first occurrence; a time inside a gap
    # is read with the offset before the jump, so it lands that much later.
    return wall.replace(tzinfo=tz, fold=0).timestamp()


def _gap_before(after: float, tz: ZoneInfo) -> timedelta:
    """How far clocks jumped forward in the hours before ``after`` (usually zero)."""
    now = datetime.fromtimestamp(after, tz).utcoffset() or timedelta()
    before = datetime.fromtimestamp(after - MAX_SHIFT.total_seconds(), tz).utcoffset()
    return max(timedelta(), now - (before or timedelta()))


@dataclass(frozen=True)
class CronSchedule:
    expression: str
    tz: ZoneInfo
    kind: str = "cron"

    def next_after(self, after: float) -> float | None:
        # Walk wall-clock times (croniter on naive datetimes knows nothing of
        # DST) and map each to an instant. Times in a spring-forward gap map
        # later than their neighbours, so start as far back as the gap and keep
        # the earliest instant found within that distance of the first hit.
        shift = _gap_before(after, self.tz)
        walk = croniter(self.expression, _wall(after, self.tz) - shift)
        best: float | None = None
        limit: datetime | None = None
        while True:
            try:
                wall = walk.get_next(datetime)
            except CroniterBadDateError:
                return best
            if limit is not None and wall > limit:
                return best
            at = _instant(wall, self.tz)
            if at > after:
                best = at if best is None else min(best, at)
                if limit is None:
                    limit = wall + shift
                    if not shift:
                        return best


@dataclass(frozen=True)
class IntervalSchedule:
    seconds: int
    anchor: float
    tz: ZoneInfo
    kind: str = "interval"

    def next_after(self, after: float) -> float | None:
        after = max(after, self.anchor)
        if self.seconds % 86400:
            steps = int((after - self.anchor) // self.seconds) + 1
            return self.anchor + steps * self.seconds
        # Whole days: the same local time of day, however long each day is.
        days = self.seconds // 86400
        start = _wall(self.anchor, self.tz)
        steps = int((after - self.anchor) // self.seconds)
        while True:
            at = _instant(start + timedelta(days=steps * days), self.tz)
            if at > after:
                return at
            steps += 1


@dataclass(frozen=True)
class OnceSchedule:
    at: float
    kind: str = "once"

    def next_after(self, after: float) -> float | None:
        return self.at if self.at > after else None


def parse_schedule(text: str, tz: ZoneInfo, anchor: float) -> Schedule:
    """Read a schedule; :class:`ScheduleError` says what is wrong with a bad one."""
    text = text.strip()
    if not text:
        raise ScheduleError("The schedule is empty.")
    if text.lower().startswith("every"):
        return _interval(text, tz, anchor)
    if ISO_DATE.match(text):
        return _once(text, tz)
    return _cron(text, tz)


def _interval(text: str, tz: ZoneInfo, anchor: float) -> IntervalSchedule:
    match = INTERVAL.fullmatch(text)
    unit = UNITS.get(match.group(2).lower()) if match else None
    if match is None or unit is None:
        raise ScheduleError(
            f"Invalid interval {text!r}: write 'every N' and a unit, s, m, h, d or w "
            "(e.g. 'every 30m', 'every 2h', 'every 1d')."
        )
    seconds = int(match.group(1) or 1) * unit
    if seconds < MIN_INTERVAL:
        raise ScheduleError(f"Invalid interval {text!r}: the shortest interval is one minute.")
    return IntervalSchedule(seconds, anchor, tz)


def _once(text: str, tz: ZoneInfo) -> OnceSchedule:
    try:
        when = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ScheduleError(
            f"Invalid timestamp {text!r}: use ISO 8601, e.g. '2025-03-10T09:00:00' "
            "(in the job's timezone) or '2025-03-10T09:00:00+01:00'."
        ) from exc
    if when.tzinfo is None:
        return OnceSchedule(_instant(when, tz))
    return OnceSchedule(when.astimezone(UTC).timestamp())


def _cron(text: str, tz: ZoneInfo) -> CronSchedule:
    fields = text.split()
    if len(fields) == 1 and fields[0].lower() in MACROS:
        expression = fields[0].lower()
    elif len(fields) == 5:
        expression = " ".join(fields)
    else:
        raise ScheduleError(
            f"Invalid schedule {text!r}: expected a cron expression with 5 fields "
            "(minute hour day-of-month month day-of-week, e.g. '0 9 * * 1'), "
            "an interval ('every 2h') or an ISO timestamp."
        )
    try:
        croniter(expression)
    except CroniterError as exc:
        raise ScheduleError(f"Invalid cron expression {text!r}: {exc}.") from exc
    return CronSchedule(expression, tz)
