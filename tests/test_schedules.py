"""Schedules: occurrences in the job's timezone, right across DST changes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from proxy.schedules import ScheduleError, parse_schedule, zone

NEW_YORK = zone("America/New_York")  # DST 2025: 9 March 02:00 → 03:00, 2 November 02:00 → 01:00
PARIS = zone("Europe/Paris")  # DST 2025: 30 March 02:00 → 03:00


def at(text: str) -> float:
    """An instant from an ISO timestamp with an offset."""
    return datetime.fromisoformat(text).timestamp()


def occurrences(schedule: str, tz: str, start: str, count: int, anchor: str = "") -> list[str]:
    """The next ``count`` occurrences after ``start``, as local ISO times with offsets."""
    parsed = parse_schedule(schedule, zone(tz), at(anchor or start))
    out, now = [], at(start)
    for _ in range(count):
        nxt = parsed.next_after(now)
        assert nxt is not None
        out.append(datetime.fromtimestamp(nxt, zone(tz)).isoformat())
        now = nxt
    return out


def test_cron_runs_at_local_wall_clock_time_across_spring_forward() -> None:
    assert occurrences("0 9 * * *", "America/New_York", "2025-03-07T12:00:00-05:00", 3) == [
        "2025-03-08T09:00:00-05:00",  # 14:00 UTC
        "2025-03-09T09:00:00-04:00",  # 13:00 UTC: a 23-hour day
        "2025-03-10T09:00:00-04:00",
    ]


def test_cron_weekly_in_another_timezone_and_its_own_dst_date() -> None:
    assert occurrences("0 9 * * 1", "Europe/Paris", "2025-03-20T00:00:00+01:00", 3) == [
        "2025-03-24T09:00:00+01:00",
        "2025-03-31T09:00:00+02:00",
        "2025-04-07T09:00:00+02:00",
    ]
    # The same expression in UTC fires at 09:00 UTC, an hour or two off Paris time.
    parsed = parse_schedule("0 9 * * 1", zone("UTC"), 0)
    assert parsed.next_after(at("2025-03-20T00:00:00+00:00")) == at("2025-03-24T09:00:00+00:00")


def test_a_time_skipped_by_spring_forward_runs_as_late_as_the_clocks_jumped() -> None:
    assert occurrences("30 2 * * *", "America/New_York", "2025-03-08T00:00:00-05:00", 3) == [
        "2025-03-08T02:30:00-05:00",
        "2025-03-09T03:30:00-04:00",  # 02:30 does not exist that night
        "2025-03-10T02:30:00-04:00",
    ]


def test_every_half_hour_through_the_gap_never_repeats_or_goes_back() -> None:
    assert occurrences("*/30 * * * *", "America/New_York", "2025-03-09T01:00:00-05:00", 4) == [
        "2025-03-09T01:30:00-05:00",
        "2025-03-09T03:00:00-04:00",  # 02:00 and 02:30 fall into the gap: 03:00, 03:30
        "2025-03-09T03:30:00-04:00",
        "2025-03-09T04:00:00-04:00",
    ]


def test_a_gap_time_is_found_from_just_after_the_jump() -> None:
    parsed = parse_schedule("30 2 * * *", NEW_YORK, 0)
    assert parsed.next_after(at("2025-03-09T03:10:00-04:00")) == at("2025-03-09T03:30:00-04:00")


def test_a_time_repeated_by_fall_back_runs_once() -> None:
    assert occurrences("30 1 * * *", "America/New_York", "2025-11-01T12:00:00-04:00", 3) == [
        "2025-11-02T01:30:00-04:00",  # first 01:30 only; 01:30-05:00 an hour later is skipped
        "2025-11-03T01:30:00-05:00",
        "2025-11-04T01:30:00-05:00",
    ]
    hourly = occurrences("0 * * * *", "America/New_York", "2025-11-02T00:30:00-04:00", 3)
    assert hourly == [
        "2025-11-02T01:00:00-04:00",
        "2025-11-02T02:00:00-05:00",
        "2025-11-02T03:00:00-05:00",
    ]
    # From inside the repeated hour, the first pass's times are already past.
    parsed = parse_schedule("45 1 * * *", NEW_YORK, 0)
    nxt = parsed.next_after(at("2025-11-02T01:20:00-05:00"))
    assert nxt == at("2025-11-03T01:45:00-05:00")


def test_cron_macros() -> None:
    parsed = parse_schedule("@daily", PARIS, 0)
    assert parsed.next_after(at("2025-03-29T12:00:00+01:00")) == at("2025-03-30T00:00:00+01:00")


def test_hours_and_minutes_are_elapsed_time_across_dst() -> None:
    assert occurrences("every 2h", "America/New_York", "2025-03-09T00:00:00-05:00", 3) == [
        "2025-03-09T03:00:00-04:00",  # two real hours after midnight EST
        "2025-03-09T05:00:00-04:00",
        "2025-03-09T07:00:00-04:00",
    ]
    parsed = parse_schedule("every 30m", zone("UTC"), 1000.0)
    assert parsed.next_after(1000.0) == 2800.0
    assert parsed.next_after(2800.0) == 4600.0
    assert parsed.next_after(4599.0) == 4600.0


def test_days_keep_the_local_time_of_day_across_dst() -> None:
    got = occurrences("every 1d", "Europe/Paris", "2025-03-28T09:00:00+01:00", 3)
    assert got == [
        "2025-03-29T09:00:00+01:00",
        "2025-03-30T09:00:00+02:00",  # 23 hours later
        "2025-03-31T09:00:00+02:00",
    ]
    weekly = occurrences("every 1w", "America/New_York", "2025-10-28T18:00:00-04:00", 2)
    assert weekly == ["2025-11-04T18:00:00-05:00", "2025-11-11T18:00:00-05:00"]


def test_intervals_skip_to_the_first_occurrence_after_a_long_gap() -> None:
    parsed = parse_schedule("every 1h", zone("UTC"), 0.0)
    assert parsed.next_after(10 * 3600 + 5) == 11 * 3600
    daily = parse_schedule("every 2d", PARIS, at("2025-03-01T08:00:00+01:00"))
    assert daily.next_after(at("2025-04-10T12:00:00+02:00")) == at("2025-04-12T08:00:00+02:00")


def test_one_shot_timestamps() -> None:
    naive = parse_schedule("2025-03-10T09:00:00", NEW_YORK, 0)
    assert naive.next_after(0) == at("2025-03-10T09:00:00-04:00")
    assert naive.next_after(at("2025-03-10T09:00:00-04:00")) is None
    offset = parse_schedule("2025-03-10T09:00:00+01:00", NEW_YORK, 0)
    assert offset.next_after(0) == at("2025-03-10T08:00:00+00:00")
    zulu = parse_schedule("2025-03-10 09:00Z", NEW_YORK, 0)
    assert zulu.next_after(0) == datetime(2025, 3, 10, 9, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "empty"),
        ("0 9 * *", "5 fields"),
        ("0 9 * * 1 2025", "5 fields"),
        ("61 * * * *", "Invalid cron expression"),
        ("0 25 * * *", "Invalid cron expression"),
        ("every", "Invalid interval"),
        ("every 5 fortnights", "Invalid interval"),
        ("every 30s", "shortest interval is one minute"),
        ("every 0m", "shortest interval is one minute"),
        ("2025-13-40T09:00", "Invalid timestamp"),
        ("tomorrow at nine", "5 fields"),
    ],
)
def test_invalid_schedules_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ScheduleError, match=says):
        parse_schedule(text, zone("UTC"), 0)


@pytest.mark.parametrize("name", ["Mars/Olympus_Mons", "", "../../etc/passwd", "EST5EDT "])
def test_unknown_timezones(name: str) -> None:
    with pytest.raises(ScheduleError, match="Unknown timezone"):
        zone(name)
