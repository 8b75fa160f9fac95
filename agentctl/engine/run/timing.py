"""Execution time and waiting time, told apart from a run's audit events.

A task's wall-clock span (first start to last finish) includes time nobody spent working on
it: the run parked for an approval, an answer, a pause step or an effect in doubt (from its
``run.paused`` event to the next ``run.resumed``), and the backoff between attempts
(``task.retry_scheduled`` events carry ``waitMs``). ``inspect`` reports both parts, and the
dashboard's timeline draws them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["Interval", "parked_intervals", "split_time"]

Interval = tuple[datetime, datetime | None]


def _utc(moment: datetime) -> datetime:
    """Naive UTC: stored rows and audit events may differ in whether they carry a zone."""
    return moment if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)


def parked_intervals(events: Iterable[Any]) -> list[Interval]:
    """Each time the run parked, until it was resumed (``None``: it is still parked)."""
    parked: list[Interval] = []
    since: datetime | None = None
    for event in events:
        if event.kind == "run.paused" and since is None:
            since = _utc(event.created_at)
        elif event.kind == "run.resumed" and since is not None:
            parked.append((since, _utc(event.created_at)))
            since = None
    if since is not None:
        parked.append((since, None))
    return parked


def _overlap(start: datetime, end: datetime, intervals: Sequence[Interval]) -> float:
    total = 0.0
    for left, right in intervals:
        low = max(start, left)
        high = min(end, right or end)
        if high > low:
            total += (high - low).total_seconds()
    return total


def split_time(
    start: datetime | None,
    end: datetime | None,
    parked: Sequence[Interval],
    backoffs: Iterable[tuple[datetime, float]] = (),
) -> dict[str, float | None]:
    """``{executionSeconds, waitingSeconds}`` of the span ``start``-``end``: waiting is the
    time the run was parked within it plus the backoff waits (``(scheduled at, ms)``) that
    fall in it; execution is the rest. Both None when the span is not known."""
    if start is None or end is None:
        return {"executionSeconds": None, "waitingSeconds": None}
    start, end = _utc(start), _utc(end)
    if end < start:
        return {"executionSeconds": None, "waitingSeconds": None}
    waits = list(parked)
    for at, millis in backoffs:
        waits.append((_utc(at), _utc(at) + timedelta(milliseconds=max(0.0, millis))))
    waiting = min(_overlap(start, end, _merged(waits)), (end - start).total_seconds())
    took = (end - start).total_seconds()
    return {"executionSeconds": round(took - waiting, 3), "waitingSeconds": round(waiting, 3)}


def _merged(intervals: list[Interval]) -> list[Interval]:
    """Overlapping intervals joined, so no second is counted twice."""
    out: list[Interval] = []
    for left, right in sorted(intervals, key=lambda i: i[0]):
        if out:
            last_left, last_right = out[-1]
            if last_right is None:
                continue
            if left <= last_right:
                out[-1] = (last_left, None if right is None else max(last_right, right))
                continue
        out.append((left, right))
    return out
