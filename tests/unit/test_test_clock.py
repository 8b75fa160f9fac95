"""The test-only clock seam: AGENTCTL_TEST_NOW pins SystemClock and makes a process's ids
repeat exactly, so snapshot tests of the human views can compare whole screens. Without it
the clock is the wall clock and ids carry random bits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from agentctl.errors import UsageError
from agentctl.ids import TEST_NOW_ENV, IdGenerator, SystemClock

PROBE = (
    "import json\n"
    "from agentctl.ids import IdGenerator, SystemClock\n"
    "ids = IdGenerator(SystemClock())\n"
    "other = IdGenerator(SystemClock())\n"
    "print(json.dumps([SystemClock().now().isoformat(), ids.run_id(), ids.run_id(),"
    " other.run_id(), ids.new('approval')]))\n"
)


def _probe(now: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != TEST_NOW_ENV}
    if now is not None:
        env[TEST_NOW_ENV] = now
    result = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    return list(json.loads(result.stdout))


def test_a_pinned_process_repeats_its_times_and_ids() -> None:
    first = _probe("2026-03-02T09:00:00Z")
    assert first == _probe("2026-03-02T09:00:00Z")
    assert first[0] == "2026-03-02T09:00:00+00:00"
    assert len(set(first[1:])) == 4  # distinct within the process, across generators too
    assert all(i.startswith("run-019cadc6-9a80-7") for i in first[1:4])
    assert _probe("2026-03-02T09:00:01Z")[1] != first[1]


def test_without_the_variable_ids_are_random_and_time_moves() -> None:
    first, second = _probe(None), _probe(None)
    assert first[1] != second[1]
    assert datetime.fromisoformat(first[0]) <= datetime.now(UTC)


def test_the_pinned_clock_stands_still_and_naive_means_utc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TEST_NOW_ENV, "2026-03-02T09:00:00")
    clock = SystemClock()
    assert clock.now() == clock.now() == datetime(2026, 3, 2, 9, tzinfo=UTC)
    monkeypatch.delenv(TEST_NOW_ENV)
    assert IdGenerator(clock).run_id() != IdGenerator(clock).run_id()  # random bits again


def test_a_bad_value_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TEST_NOW_ENV, "yesterday")
    with pytest.raises(UsageError) as raised:
        SystemClock()
    assert "AGENTCTL_TEST_NOW='yesterday' is not an ISO 8601 time" in raised.value.message
