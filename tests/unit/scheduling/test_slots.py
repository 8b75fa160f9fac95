"""Slot arithmetic: cron in a time zone across DST changes, intervals, jitter, durations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentctl.errors import UsageError
from agentctl.scheduling.slots import (
    MAX_COUNTED,
    Timing,
    jitter_offset,
    parse_duration,
    parse_instant,
)

START = datetime(2026, 1, 1, tzinfo=UTC)


def _utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def _cron(expression: str, zone: str) -> Timing:
    return Timing(expression, None, zone, START)


def test_spring_forward_slot_in_the_gap_fires_once_after_the_gap() -> None:
    # New York, 2026-03-08: 02:00 EST jumps to 03:00 EDT; 02:30 does not exist that day.
    daily = _cron("30 2 * * *", "America/New_York")
    slots = list(daily.slots(_utc(2026, 3, 7), _utc(2026, 3, 10)))
    assert slots == [_utc(2026, 3, 7, 7, 30), _utc(2026, 3, 8, 7, 30), _utc(2026, 3, 9, 6, 30)]
    # 2026-03-08 07:30Z is 03:30 EDT: moved forward by the hour the clocks skipped.
    # Hourly: the gap's 02:30 lands on 03:30, which the schedule names too: one slot.
    hourly = _cron("30 * * * *", "America/New_York")
    times = [s.strftime("%H:%M") for s in hourly.slots(_utc(2026, 3, 8, 4), _utc(2026, 3, 8, 9))]
    assert times == ["04:30", "05:30", "06:30", "07:30", "08:30"]


def test_spring_forward_in_paris_matches_the_documented_example() -> None:
    # Europe/Paris, 2026-03-29: 02:30 does not exist; the slot is 03:30 CEST = 01:30Z.
    daily = _cron("30 2 * * *", "Europe/Paris")
    assert daily.next_slot(_utc(2026, 3, 28, 2)) == _utc(2026, 3, 29, 1, 30)
    assert daily.next_slot(_utc(2026, 3, 29, 1, 30)) == _utc(2026, 3, 30, 0, 30)


def test_fall_back_repeated_time_fires_once_at_its_first_occurrence() -> None:
    # New York, 2026-11-01: 02:00 EDT falls back to 01:00 EST; 01:30 happens twice.
    daily = _cron("30 1 * * *", "America/New_York")
    slots = list(daily.slots(_utc(2026, 10, 31), _utc(2026, 11, 3)))
    # 05:30Z is 01:30 EDT (the first 01:30); 06:30Z (01:30 EST) is not a slot.
    assert slots == [_utc(2026, 10, 31, 5, 30), _utc(2026, 11, 1, 5, 30), _utc(2026, 11, 2, 6, 30)]
    hourly = _cron("30 * * * *", "America/New_York")
    times = [s.strftime("%H:%M") for s in hourly.slots(_utc(2026, 11, 1, 3), _utc(2026, 11, 1, 9))]
    # No extra run in the repeated hour: 06:30Z is missing, the hour is two real hours long.
    assert times == ["03:30", "04:30", "05:30", "07:30", "08:30"]


def test_intervals_count_real_time_through_dst() -> None:
    anchor = _utc(2026, 3, 8, 6, 0)
    every = Timing(None, 3600, "America/New_York", anchor)
    slots = list(every.slots(anchor, anchor + timedelta(hours=3)))
    assert slots == [anchor + timedelta(hours=h) for h in (1, 2, 3)]
    assert every.next_slot(anchor + timedelta(minutes=90)) == anchor + timedelta(hours=2)


def test_newest_keeps_the_newest_and_counts_all() -> None:
    minutely = _cron("* * * * *", "UTC")
    kept, total = minutely.newest(_utc(2026, 2, 28), _utc(2026, 3, 1), 3)
    assert total == 1440
    assert kept == [_utc(2026, 2, 28, 23, 58), _utc(2026, 2, 28, 23, 59), _utc(2026, 3, 1)]
    # A very long outage: counting stops at MAX_COUNTED, the newest are still exact.
    kept, total = minutely.newest(_utc(2025, 1, 1), _utc(2026, 3, 1), 2)
    assert total == MAX_COUNTED
    assert kept == [_utc(2026, 2, 28, 23, 59), _utc(2026, 3, 1)]


def test_impossible_date_has_no_next_slot() -> None:
    assert _cron("0 0 30 2 *", "UTC").next_slot(START) is None


def test_bad_timing_is_refused_naming_the_option() -> None:
    with pytest.raises(UsageError, match="--cron"):
        _cron("61 * * * *", "UTC")
    with pytest.raises(UsageError, match="--timezone 'Mars/Base'"):
        _cron("0 * * * *", "Mars/Base")
    with pytest.raises(UsageError, match="exactly one"):
        Timing("0 * * * *", 60, "UTC", START)


def test_durations_and_instants() -> None:
    assert parse_duration("90", "--every") == 90
    assert parse_duration("10m", "--every") == 600
    assert parse_duration("1h30m", "--every") == 5400
    assert parse_duration("2d", "--every") == 172800
    with pytest.raises(UsageError, match="--jitter 'soon'"):
        parse_duration("soon", "--jitter")
    assert parse_instant("2026-03-29T01:30:00Z", "--now") == _utc(2026, 3, 29, 1, 30)
    assert parse_instant("2026-03-29T03:30:00+02:00", "--now") == _utc(2026, 3, 29, 1, 30)
    with pytest.raises(UsageError, match="no time zone"):
        parse_instant("2026-03-29T01:30:00", "--now")


def test_jitter_is_bounded_and_the_same_for_every_daemon() -> None:
    slot = _utc(2026, 3, 29, 1, 30)
    offsets = {jitter_offset("nightly", slot + timedelta(days=d), 60) for d in range(200)}
    assert all(timedelta(0) <= o <= timedelta(seconds=60) for o in offsets)
    assert len(offsets) > 10
    assert jitter_offset("nightly", slot, 60) == jitter_offset("nightly", slot, 60)
    assert jitter_offset("nightly", slot, 0) == timedelta(0)
