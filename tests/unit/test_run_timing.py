"""Execution time and waiting time (agentctl/engine/run/timing.py): a task's span minus the
time its run was parked and the backoff between its attempts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from agentctl.engine.run.timing import parked_intervals, split_time

T0 = datetime(2026, 3, 2, 9, 0, 0)


@dataclass
class Event:
    kind: str
    created_at: datetime


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_parked_time_inside_a_task_is_waiting_not_execution() -> None:
    events = [
        Event("run.created", at(0)),
        Event("run.paused", at(5)),
        Event("approval.resolved", at(60)),
        Event("run.resumed", at(125)),
        Event("run.succeeded", at(130)),
    ]
    parked = parked_intervals(events)
    assert parked == [(at(5), at(125))]
    assert split_time(at(2), at(130), parked) == {
        "executionSeconds": 8.0,
        "waitingSeconds": 120.0,
    }
    # A task that ran before the park did not wait.
    assert split_time(at(0), at(4), parked)["waitingSeconds"] == 0.0


def test_backoffs_count_as_waiting_once_even_when_the_run_was_parked_meanwhile() -> None:
    parked = [(at(10), at(20))]
    split = split_time(at(0), at(40), parked, [(at(5), 10_000.0), (at(30), 2_000.0)])
    # waits 5-20 (backoff 5-15 joined with the park 10-20) and 30-32: 17 s of 40
    assert split == {"executionSeconds": 23.0, "waitingSeconds": 17.0}


def test_a_run_still_parked_waits_until_now_and_zones_do_not_matter() -> None:
    events = [Event("run.paused", at(10).replace(tzinfo=UTC))]
    parked = parked_intervals(events)
    assert parked == [(at(10), None)]
    assert split_time(at(0), at(70), parked)["waitingSeconds"] == 60.0
    assert split_time(None, at(5), parked) == {"executionSeconds": None, "waitingSeconds": None}
