"""Runtime's scheduling half from Python: schedules, monitors and the daemon return typed
records whose ``to_json()`` is what the commands print, on a real SQLite file with real
child processes."""

from __future__ import annotations

import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

import agentctl
from agentctl import (
    DaemonEvent,
    DaemonStop,
    DaemonTick,
    ExitedRun,
    MonitorReport,
    Runtime,
    ScheduleFiring,
    ScheduleRemoval,
    ScheduleReport,
)

TICK = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: tick}
spec:
  inputs: {ok: true}
  actions:
    check: {kind: builtin.assert}
  tasks:
    - id: check
      uses: action:check
      with: {that: "${{ inputs.ok }}"}
"""


@pytest.fixture
def runtime(tmp_path: Path) -> Runtime:
    Path("workflows").mkdir(exist_ok=True)
    Path("workflows/tick.yaml").write_text(textwrap.dedent(TICK))
    return Runtime(tmp_path / "runs.db")


def _printed(cli: Any, *args: str) -> Any:
    result = cli("--output", "json", *args)
    assert result.exit_code == 0, result.stderr
    return result.json()["data"]


def test_a_schedule_is_a_typed_record_printed_as_the_command_prints_it(
    runtime: Runtime, cli: Any
) -> None:
    added = runtime.add_schedule(
        "nightly",
        "tick",
        cron="0 2 * * *",
        timezone="Europe/Paris",
        input_pairs=["ok=true"],
        jitter=60,
        start="2026-03-28T12:00:00Z",
    )
    assert isinstance(added, ScheduleReport)
    assert added.workflow_file == str(Path("workflows/tick.yaml").resolve())
    assert added.inputs == {"ok": True} and added.jitter_seconds == 60
    assert added.cron == "0 2 * * *" and added.every_seconds is None and added.firings == ()
    shown = _printed(cli, "schedule", "show", "nightly", "--db", runtime.db)
    assert runtime.schedule("nightly").to_json() == shown
    listed = _printed(cli, "schedule", "list", "--db", runtime.db)["schedules"]
    assert [s.to_json() for s in runtime.schedules()] == listed
    paused = runtime.set_schedule_paused("nightly", True)
    assert paused.paused and paused.next_slot is None
    assert runtime.set_schedule_paused("nightly", False).next_slot is not None
    assert runtime.remove_schedule("nightly") == ScheduleRemoval("nightly", True)
    with pytest.raises(agentctl.NotFoundError) as missing:
        runtime.schedule("nightly")
    assert missing.value.code == "schedule.not_found"


def test_bad_options_raise_usage_errors_naming_the_option(runtime: Runtime) -> None:
    with pytest.raises(agentctl.UsageError, match="exactly one of --cron and --every"):
        runtime.add_schedule("both", "tick", cron="0 2 * * *", every="1h")
    with pytest.raises(agentctl.UsageError, match="--every"):
        runtime.add_schedule("bad", "tick", every="soon")
    with pytest.raises(agentctl.UsageError, match="exactly one of --watch-files"):
        runtime.add_monitor("m", "tick", watch_files=["*.md"], http="http://127.0.0.1:1/")
    with pytest.raises(agentctl.UsageError, match="--now needs --once"):
        runtime.daemon(now="2026-05-01T00:00:00Z")


def test_daemon_once_reports_each_step_with_its_line_and_waits_for_the_runs(
    runtime: Runtime, cli: Any
) -> None:
    runtime.add_schedule("hourly", "tick", every="1h", start="2026-05-01T00:00:00Z")
    heard: list[DaemonEvent] = []
    tick = runtime.daemon(once=True, now="2026-05-01T01:00:30Z", events=heard.append)
    assert isinstance(tick, DaemonTick)
    ((fired,),) = [tick.fired]
    run_id = fired["runId"]
    assert tick.started == (run_id,)
    (exited,) = tick.runs
    assert exited == ExitedRun(run_id, 0, exited.log, "succeeded")
    kinds = [event.kind for event in heard]
    assert kinds == ["SlotFired", "RunExited"]
    assert heard[0].summary == f"hourly 2026-05-01T01:00:00Z: started {run_id}"
    assert heard[1].to_json() == exited.to_json()
    assert tick.summary == "fired 1, skipped 0, failed 0, resumed 0"
    (firing,) = runtime.schedule("hourly").firings
    assert isinstance(firing, ScheduleFiring) and firing.run_id == run_id
    # The same instant again fires nothing: the slot is committed once.
    assert runtime.daemon(once=True, now="2026-05-01T01:00:30Z").fired == ()
    printed = _printed(cli, "daemon", "--once", "--now", "2026-05-01T01:00:30Z", "--db", runtime.db)
    assert printed == DaemonTick((), (), (), (), (), ()).to_json()


def test_a_daemon_loop_stops_when_asked_and_hears_through_on_event(tmp_path: Path) -> None:
    heard: list[tuple[str, dict[str, Any]]] = []
    runtime = Runtime(tmp_path / "runs.db", on_event=lambda kind, data: heard.append((kind, data)))
    stop = threading.Event()
    stop.set()  # already asked: the loop announces itself and returns at once
    stopped = runtime.daemon(poll="1s", stop=stop)
    assert stopped == DaemonStop(())
    assert stopped.to_json() == {"runsStillRunning": []}
    ((kind, data),) = heard
    assert (kind, data["pollSeconds"]) == ("DaemonStarted", 1)


def test_trigger_creates_a_run_that_resume_executes(runtime: Runtime) -> None:
    runtime.add_schedule("nightly", "tick", cron="0 2 * * *")
    run_id = runtime.trigger_schedule("nightly")
    assert runtime.resume(run_id).state == "succeeded"
    (firing,) = runtime.schedule("nightly", firings=5).firings
    assert (firing.trigger, firing.run_id) == ("manual", run_id)


def test_a_monitor_is_a_typed_record_printed_as_the_command_prints_it(
    runtime: Runtime, cli: Any
) -> None:
    added = runtime.add_monitor(
        "docs", "tick", watch_files=["docs/*.md"], every="1m", debounce="30s"
    )
    assert isinstance(added, MonitorReport)
    assert (added.kind, added.target) == ("files", {"patterns": ["docs/*.md"]})
    assert (added.every_seconds, added.debounce_seconds) == (60, 30)
    shown = _printed(cli, "monitor", "show", "docs", "--db", runtime.db)
    assert runtime.monitor("docs").to_json() == shown
    listed = _printed(cli, "monitor", "list", "--db", runtime.db)["monitors"]
    assert [m.to_json() for m in runtime.monitors()] == listed
    assert runtime.set_monitor_paused("docs", True).paused
    with pytest.raises(agentctl.UsageError, match="is a monitor, not a schedule"):
        runtime.remove_schedule("docs")
    assert runtime.remove_monitor("docs").to_json() == {"name": "docs", "removed": True}
