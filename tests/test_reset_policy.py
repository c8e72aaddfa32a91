"""Reset policies: parsing, and when idle and daily policies fall due (pure, any clock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from proxy.config import Settings, SettingsError
from proxy.reset_policy import ResetPolicy, last_boundary, parse_policies, parse_policy

BERLIN = ZoneInfo("Europe/Berlin")
UTC = UTC


def at(text: str, tz: object = BERLIN) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=tz).timestamp()  # type: ignore[arg-type]


def test_parse_every_mode() -> None:
    assert parse_policy("none") == ResetPolicy("none")
    assert parse_policy("idle:90") == ResetPolicy("idle", 90, None)
    assert parse_policy("daily:4") == ResetPolicy("daily", None, 4)
    assert parse_policy("both:30:23") == ResetPolicy("both", 30, 23)
    policies = parse_policies(["telegram=idle:60", "*=daily:4", "cli=none"])
    assert policies.for_source("telegram").mode == "idle"
    assert policies.for_source("discord").mode == "daily"
    assert policies.for_source("cli").mode == "none"
    assert parse_policies([]).for_source("telegram").mode == "none"
    assert not parse_policies(["cli=none"]) and parse_policies(["cli=idle:1"])


@pytest.mark.parametrize(
    ("entry", "complaint"),
    [
        ("telegram", "SOURCE=POLICY"),
        ("telegram=weekly:1", "mode must be one of"),
        ("telegram=idle", "idle:MINUTES"),
        ("telegram=daily:25", "0-23"),
        ("telegram=idle:0", "at least 1"),
        ("telegram=both:5", "both:MINUTES:HOUR"),
        ("telegram=idle:soon", "integers"),
    ],
)
def test_bad_policies_fail_at_startup_naming_the_entry(entry: str, complaint: str) -> None:
    with pytest.raises(SettingsError, match=complaint) as error:
        Settings.load(environ={"HERMES_RESET_POLICY": entry})
    assert repr(entry) in str(error.value)


def test_settings_read_policies_from_env_and_config(tmp_path: Path) -> None:
    settings = Settings.load(environ={"HERMES_RESET_POLICY": "telegram=idle:60,discord=daily:4"})
    assert settings.reset_policies.for_source("discord") == ResetPolicy("daily", None, 4)
    config = tmp_path / "hermes.toml"
    config.write_text('reset_policy = ["cli=idle:5", "*=both:60:3"]\n')
    settings = Settings.load(environ={}, config_file=config)
    assert settings.reset_policies.for_source("cli") == ResetPolicy("idle", 5, None)
    assert settings.reset_policies.for_source("slack") == ResetPolicy("both", 60, 3)


def test_idle_is_due_after_n_minutes_without_a_message() -> None:
    policy = parse_policy("idle:30")
    assert policy.due(last_active=0.0, now=29 * 60 + 59) is None
    assert policy.due(last_active=0.0, now=30 * 60) == "idle"


def test_daily_is_due_once_the_hour_passed_since_the_last_message() -> None:
    policy = parse_policy("daily:4")
    last = at("2025-06-10T03:59:00")
    assert policy.due(last_active=last, now=at("2025-06-10T03:59:59"), tz=BERLIN) is None
    assert policy.due(last_active=last, now=at("2025-06-10T04:00:00"), tz=BERLIN) == "daily"
    # Active after today's 04:00: not due again until tomorrow's.
    fresh = at("2025-06-10T04:05:00")
    assert policy.due(last_active=fresh, now=at("2025-06-11T03:59:00"), tz=BERLIN) is None
    assert policy.due(last_active=fresh, now=at("2025-06-11T04:00:00"), tz=BERLIN) == "daily"
    # The hour is local to the zone: 04:00 in Berlin is 02:00 UTC in summer.
    assert policy.due(last_active=last, now=at("2025-06-10T02:30:00", UTC), tz=UTC) is None


def test_daily_boundary_is_the_wall_clock_hour_across_dst_changes() -> None:
    # Berlin springs forward on 2025-03-30 (02:00 -> 03:00) and falls back on 2025-10-26.
    assert last_boundary(at("2025-03-30T10:00:00"), 4, BERLIN) == at("2025-03-30T04:00:00")
    assert last_boundary(at("2025-03-30T03:30:00"), 4, BERLIN) == at("2025-03-29T04:00:00")
    spring = at("2025-03-30T04:00:00") - at("2025-03-29T04:00:00")
    autumn = at("2025-10-26T04:00:00") - at("2025-10-25T04:00:00")
    assert spring == 23 * 3600 and autumn == 25 * 3600
    assert last_boundary(at("2025-10-26T12:00:00"), 4, BERLIN) == at("2025-10-26T04:00:00")


def test_both_resets_on_whichever_comes_first() -> None:
    policy = parse_policy("both:60:4")
    last = at("2025-06-10T03:30:00")
    assert policy.due(last_active=last, now=last + 60 * 60, tz=BERLIN) == "idle"
    assert policy.due(last_active=last, now=at("2025-06-10T04:01:00"), tz=BERLIN) == "daily"
    assert policy.due(last_active=last, now=last + 60, tz=BERLIN) is None


def test_local_time_is_the_default_zone() -> None:
    now = datetime(2025, 6, 10, 12, 0).timestamp()  # naive: local time of this process
    expected = datetime(2025, 6, 10, 4, 0).timestamp()
    assert last_boundary(now, 4) == expected
    assert last_boundary(now - timedelta(hours=9).total_seconds(), 4) == expected - 86400
