"""When a schedule fires: cron expressions in a time zone, fixed intervals, jitter.

A slot is an instant (aware UTC). Cron fields are matched against the *wall clock* of
the schedule's time zone (croniter iterates naive wall-clock times), and each matching
wall-clock time becomes one instant through zoneinfo with ``fold=0``:

- a wall-clock time that does not exist (spring forward: 02:30 on the night clocks jump
  from 02:00 to 03:00) fires once, moved forward by the length of the gap (03:30 local);
  when that lands on an instant another wall-clock time of the schedule also names (an
  hourly ``30 * * * *`` has 03:30 too), the instant fires once;
- a wall-clock time that happens twice (fall back: 01:30 on the night clocks go from 02:00
  back to 01:00) fires once, at its first occurrence (daylight time): a daily job does not
  run twice, and an hourly job has no extra run in the repeated hour.

Intervals (``--every 10m``) are counted in real elapsed time from the schedule's start, so
daylight saving time never moves them.
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agentctl.errors import UsageError

__all__ = ["MAX_COUNTED", "Timing", "jitter_offset", "parse_duration", "parse_instant"]

#: Missed slots are counted up to this many; beyond it the newest are still found.
MAX_COUNTED = 10_000
# No time zone moves its offset by more than this at once: enough margin to map the
# wall-clock window of an instant window without missing a slot on a transition day.
_MARGIN = timedelta(hours=3)
_DURATION = re.compile(r"(\d+)\s*(d|h|m|s)")
_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(text: str, option: str) -> int:
    """``90``, ``90s``, ``10m``, ``1h30m``, ``2d`` as whole seconds; exit 2 naming the option."""
    raw = text.strip().lower()
    if raw.isdigit():
        return int(raw)
    pieces = _DURATION.findall(raw)
    if not pieces or _DURATION.sub("", raw).strip():
        raise UsageError(
            f"{option} {text!r} is not a duration",
            hint=f"write for example {option} 90s, {option} 10m or {option} 1h30m",
        )
    return sum(int(amount) * _UNITS[unit] for amount, unit in pieces)


def parse_instant(text: str, option: str) -> datetime:
    """An ISO 8601 instant with a zone (``2026-03-29T01:30:00Z``) as aware UTC."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise UsageError(
            f"{option} {text!r} is not an ISO 8601 time",
            hint=f"write for example {option} 2026-03-29T01:30:00Z",
        ) from exc
    if value.tzinfo is None:
        raise UsageError(
            f"{option} {text!r} has no time zone",
            hint="add Z (UTC) or an offset such as +02:00",
        )
    return value.astimezone(UTC)


def jitter_offset(schedule: str, slot: datetime, jitter_seconds: int) -> timedelta:
    """A delay in ``[0, jitter]`` that depends only on the schedule and the slot, so every
    daemon computes the same due time and a test can predict it."""
    if jitter_seconds <= 0:
        return timedelta(0)
    seed = hashlib.sha256(f"{schedule}|{slot.isoformat()}".encode()).digest()
    return timedelta(seconds=int.from_bytes(seed[:8], "big") % (jitter_seconds + 1))


def load_zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise UsageError(
            f"--timezone {name!r} is not a known time zone",
            hint="use an IANA name such as Europe/Paris, America/New_York or UTC",
        ) from exc


def check_cron(expression: str) -> None:
    from croniter import croniter

    if len(expression.split()) != 5 or not croniter.is_valid(expression):
        raise UsageError(
            f"--cron {expression!r} is not a five-field cron expression",
            hint='write minute hour day-of-month month day-of-week, e.g. --cron "0 2 * * *"',
        )


@dataclass(frozen=True, slots=True)
class Timing:
    """A schedule's firing rule: exactly one of ``cron`` and ``interval_seconds``."""

    cron: str | None
    interval_seconds: int | None
    timezone: str
    anchor: datetime

    def __post_init__(self) -> None:
        if (self.cron is None) == (self.interval_seconds is None):
            raise UsageError("give exactly one of --cron and --every")
        load_zone(self.timezone)
        if self.cron is not None:
            check_cron(self.cron)
        elif self.interval_seconds is not None and self.interval_seconds < 1:
            raise UsageError("--every must be at least 1s")

    # -- instants -------------------------------------------------------------------

    def _local(self, instant: datetime) -> datetime:
        return instant.astimezone(load_zone(self.timezone)).replace(tzinfo=None)

    def _instant(self, wall: datetime) -> datetime:
        return wall.replace(tzinfo=load_zone(self.timezone), fold=0).astimezone(UTC)

    def _walls(self, start: datetime, *, forward: bool) -> Iterator[datetime]:
        from croniter import CroniterError, croniter

        assert self.cron is not None
        walker = croniter(self.cron, start)
        while True:
            try:
                wall = walker.get_next(datetime) if forward else walker.get_prev(datetime)
            except CroniterError:  # the expression matches no further date (``0 0 30 2 *``)
                return
            yield wall

    def slots(self, after: datetime, until: datetime) -> Iterator[datetime]:
        """Every slot in ``(after, until]``, oldest first (stops at :data:`MAX_COUNTED`)."""
        if self.interval_seconds is not None:
            step = timedelta(seconds=self.interval_seconds)
            k = max(0, (after - self.anchor) // step + 1)
            slot = self.anchor + k * step
            count = 0
            while slot <= until and count < MAX_COUNTED:
                if slot > after:
                    yield slot
                    count += 1
                slot += step
            return
        window: list[datetime] = []
        stop = self._local(until) + _MARGIN
        for wall in self._walls(self._local(after) - _MARGIN, forward=True):
            if wall > stop or len(window) >= MAX_COUNTED:
                break
            instant = self._instant(wall)
            if after < instant <= until:
                window.append(instant)
        yield from sorted(set(window))

    def newest(self, after: datetime, until: datetime, keep: int) -> tuple[list[datetime], int]:
        """The newest ``keep`` slots in ``(after, until]`` (oldest first) and how many
        slots that window holds (counted up to :data:`MAX_COUNTED`)."""
        kept: deque[datetime] = deque(maxlen=keep)
        total = 0
        for slot in self.slots(after, until):
            kept.append(slot)
            total += 1
        if total >= MAX_COUNTED and self.interval_seconds is None:
            kept = deque(self._newest_backwards(after, until, keep), maxlen=keep)
        elif total >= MAX_COUNTED and self.interval_seconds is not None:
            step = timedelta(seconds=self.interval_seconds)
            last = self.anchor + ((until - self.anchor) // step) * step
            kept = deque(
                (s for s in (last - i * step for i in reversed(range(keep))) if s > after),
                maxlen=keep,
            )
        return list(kept), total

    def _newest_backwards(self, after: datetime, until: datetime, keep: int) -> list[datetime]:
        found: set[datetime] = set()
        floor = self._local(after) - _MARGIN
        for wall in self._walls(self._local(until) + _MARGIN, forward=False):
            if wall < floor:
                break
            if len(found) >= keep and wall < self._local(sorted(found)[-keep]) - _MARGIN:
                break
            instant = self._instant(wall)
            if after < instant <= until:
                found.add(instant)
        return sorted(found)[-keep:]

    def next_slot(self, after: datetime) -> datetime | None:
        """The first slot after ``after`` (None when the cron matches no date in 5 years)."""
        horizon = after + timedelta(days=366 * 5)
        if self.interval_seconds is not None:
            return next(self.slots(after, horizon), None)
        stop = self._local(horizon)
        found: list[datetime] = []
        for wall in self._walls(self._local(after) - _MARGIN, forward=True):
            if wall > stop or (found and wall > self._local(min(found)) + _MARGIN):
                break
            instant = self._instant(wall)
            if instant > after:
                found.append(instant)
        return min(found) if found else None
