"""The daemon: fire due schedule slots, finish interrupted firings, resume answered runs.

One :func:`tick` does everything that is due at ``now``:

1. finish every firing that was recorded but has no run yet (a daemon stopped between the
   two): its run is created now, never a second one;
2. decide each active schedule's slots in ``(cursor, now]`` by its catch-up and overlap
   policies; each slot to fire is committed as a firing (unique per schedule and slot)
   *before* its run is created, and the run's creating transaction links it;
3. start scheduled runs that nothing executes (created, then the daemon stopped);
4. resume parked runs whose approvals or questions were all answered, when their workflow
   file still exists and their previous owner is gone.

The engine is not imported here: a :class:`Launcher` creates and starts runs. Which daemon
executes a run is decided by the run's ownership claim, so two daemons never execute one.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic.dataclasses import dataclass as record

from agentctl.errors import AgentctlError, StateConflictError
from agentctl.scheduling.monitors import record_observation
from agentctl.scheduling.observers import observe
from agentctl.scheduling.registry import resolve_workflow
from agentctl.scheduling.schedules import require_kind, timing_of
from agentctl.scheduling.slots import jitter_offset
from agentctl.store import daemon_repo, locks, schedules_repo
from agentctl.store.adoption import adoptable_parked_runs
from agentctl.store.errors import TRANSIENT_CODES
from agentctl.store.ownership import owner_alive
from agentctl.store.schedules_repo import FiringRow, ScheduleRow
from agentctl.store.timestamps import to_iso
from agentctl.typed_records import CAMEL, CamelRecord

if TYPE_CHECKING:
    from agentctl.store.engine import Store

__all__ = [
    "FAULT_POINTS",
    "Launcher",
    "LaunchRequest",
    "TickReport",
    "fire_now",
    "run_loop",
    "tick",
]

#: Where the crash suite kills a daemon (``AGENTCTL_FAULT``): after a firing committed and
#: before its run exists; after the run exists and before anything executes it.
FAULT_POINTS = ("schedule.slot_recorded", "schedule.run_created")

Events = Callable[[str, dict[str, Any], str], None]


@dataclass(frozen=True, slots=True)
class LaunchRequest:
    """What a firing's run is created from: the workflow resolved at the slot."""

    firing_id: int
    schedule: str
    slot: datetime
    workflow_file: str
    inputs: dict[str, Any]
    workspace: str | None


class Launcher(Protocol):
    def create(self, request: LaunchRequest) -> str:
        """Create the run and link the firing in one transaction; the run id.

        Raises :class:`StateConflictError` when the firing was linked by another process
        (nothing created), or an :class:`AgentctlError` when the workflow cannot run."""
        ...

    def start(self, run_id: str) -> None:
        """Begin executing (or resuming) ``run_id`` without waiting for it."""
        ...

    def busy(self, run_id: str) -> bool:
        """Whether this launcher already executes ``run_id``."""
        ...

    def observe_command(self, workflow_file: str, argv: list[str], project: Path) -> dict[str, Any]:
        """Run a monitor's command once under the workflow's ``builtin.shell.exec`` rules
        (allow-list, container isolation); its observation value. Raises an
        :class:`AgentctlError` when the command may not or cannot run."""
        ...


@record(config=CAMEL)
class TickReport(CamelRecord):
    fired: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)


def _request(schedule: ScheduleRow, firing: FiringRow) -> LaunchRequest:
    """Resolve the schedule's workflow again for this slot (a name may now point at another
    file; a path was made absolute when the schedule was added)."""
    inputs = json.loads(schedule.inputs_json)
    if firing.inputs_json:
        inputs.update(json.loads(firing.inputs_json))
    return LaunchRequest(
        firing.id,
        schedule.name,
        firing.slot_at,
        _request_file(schedule),
        inputs,
        schedule.workspace,
    )


def _request_file(schedule: ScheduleRow) -> str:
    workflow = resolve_workflow(schedule.workflow, project=Path(schedule.project_dir))
    return workflow if Path(workflow).is_absolute() else schedule.workflow_file


def _quiet(kind: str, data: dict[str, Any], human: str) -> None:
    return None


@dataclass
class _Tick:
    store: Store
    now: datetime
    launcher: Launcher
    events: Events
    fault: Callable[[str], None]
    report: TickReport = field(default_factory=TickReport)

    def launch(self, firing: FiringRow, schedule: ScheduleRow) -> str | None:
        slot = to_iso(firing.slot_at)
        try:
            run_id = self.launcher.create(_request(schedule, firing))
        except StateConflictError:
            return None  # another daemon linked this slot to its run first
        except AgentctlError as exc:
            reason = f"{exc.code}: {exc.message}"
            with self.store.write(locks.schedule(schedule.name)) as conn:
                current = schedules_repo.firing(conn, firing.id)
                if current is None or current.status != "recorded":
                    return None
                schedules_repo.fail_firing(conn, firing.id, reason, self.now)
            item = {"schedule": schedule.name, "slot": slot, "reason": reason}
            self.report.failed.append(item)
            self.events("SlotFailed", item, f"{schedule.name} {slot}: not started ({reason})")
            return None
        item = {"schedule": schedule.name, "slot": slot, "runId": run_id}
        self.report.fired.append(item)
        self.events("SlotFired", item, f"{schedule.name} {slot}: started {run_id}")
        self.fault("schedule.run_created")
        self.launcher.start(run_id)
        self.report.started.append(run_id)
        return run_id

    def finish_recorded(self) -> None:
        with self.store.read() as conn:
            pending = schedules_repo.recorded_firings(conn)
            schedules = {
                f.schedule_name: schedules_repo.schedule(conn, f.schedule_name) for f in pending
            }
        for firing in pending:
            schedule = schedules[firing.schedule_name]
            if schedule is not None:
                self.launch(firing, schedule)

    def due_slots(self, schedule: ScheduleRow) -> tuple[list[datetime], int]:
        keep = schedule.max_catch_up if schedule.catch_up == "all" else 1
        # One more than kept: the newest slot may still wait for its jitter.
        slots, total = timing_of(schedule).newest(schedule.cursor_at, self.now, keep + 1)
        due = [
            s
            for s in slots
            if s + jitter_offset(schedule.name, s, schedule.jitter_seconds) <= self.now
        ]
        # Only a chronological prefix is due; a later slot never overtakes an earlier one.
        prefix: list[datetime] = []
        for slot in slots:
            if slot not in due:
                break
            prefix.append(slot)
        total -= len(slots) - len(prefix)
        return prefix[-keep:], total

    def decide(self, schedule: ScheduleRow) -> None:
        due, total = self.due_slots(schedule)
        if not due:
            return
        fire = due
        if schedule.catch_up == "skip":
            newest = due[-1]
            on_time = self.now - (
                newest + jitter_offset(schedule.name, newest, schedule.jitter_seconds)
            ) <= timedelta(seconds=schedule.grace_seconds)
            fire = [newest] if total == 1 and on_time else []
        missed = total - len(fire)
        if not fire:
            with self.store.write(locks.schedule(schedule.name)) as conn:
                moved = schedules_repo.advance_cursor(
                    conn, schedule.name, due[-1], missed, self.now
                )
            if moved:
                item = {"schedule": schedule.name, "missed": missed, "through": to_iso(due[-1])}
                self.report.skipped.append(item)
                self.events(
                    "SlotsMissed", item, f"{schedule.name}: {missed} missed slot(s) not fired"
                )
            return
        trigger = "cron" if schedule.cron else "interval"
        for index, slot in enumerate(fire):
            if not self.fire_slot(schedule, slot, trigger, missed if index == 0 else 0):
                return

    def fire_slot(self, schedule: ScheduleRow, slot: datetime, trigger: str, missed: int) -> bool:
        """Record ``slot`` (or its overlap skip) and launch it; False to stop this schedule
        for this tick (the slot waits in the queue)."""
        with self.store.write(locks.schedule(schedule.name)) as conn:
            live = schedules_repo.live_run(conn, schedule.name)
            if live is not None and schedule.overlap == "queue":
                return False
            skip = live is not None and schedule.overlap == "skip"
            reason = f"run {live[0]} of this schedule is still {live[1]}" if skip and live else None
            firing_id = schedules_repo.record_firing(
                conn,
                schedule.name,
                slot,
                trigger=trigger,
                status="skipped" if skip else "recorded",
                missed=missed,
                reason=reason,
                now=self.now,
            )
            if firing_id is not None:
                schedules_repo.advance_cursor(conn, schedule.name, slot, missed, self.now)
                firing = schedules_repo.firing(conn, firing_id)
        if firing_id is None:
            return True  # another daemon recorded this slot
        if skip:
            item = {"schedule": schedule.name, "slot": to_iso(slot), "reason": reason}
            self.report.skipped.append(item)
            self.events("SlotSkipped", item, f"{schedule.name} {to_iso(slot)}: skipped ({reason})")
            return True
        self.fault("schedule.slot_recorded")
        assert firing is not None
        self.launch(firing, schedule)
        return True

    def observe(self, row: ScheduleRow) -> None:
        """A monitor: observe at its newest due slot (older ones are not observed late)."""
        slots, _ = timing_of(row).newest(row.cursor_at, self.now, 1)
        if not slots:
            return
        slot = slots[-1]
        monitor = json.loads(row.monitor_json or "{}")
        project = Path(row.project_dir)
        try:
            if monitor.get("kind") == "command":
                argv = [str(part) for part in (monitor.get("target") or {})["argv"]]
                value = self.launcher.observe_command(_request_file(row), argv, project)
            else:
                value = observe(monitor, project)
        except AgentctlError as exc:  # not allowed or found any more, or no container runtime
            value = {"error": exc.code, "message": exc.message}
        result = record_observation(self.store, row, slot, value, self.now)
        if result is None:
            return  # another daemon observed this slot
        outcome, firing = result
        item = {"monitor": row.name, "slot": to_iso(slot), "outcome": outcome, "value": value}
        self.events("Observed", item, f"{row.name} {to_iso(slot)}: {outcome}")
        if firing is None:
            return
        if firing.status == "skipped":
            skipped = {"schedule": row.name, "slot": to_iso(slot), "reason": firing.reason}
            self.report.skipped.append(skipped)
            self.events("SlotSkipped", skipped, f"{row.name}: change skipped ({firing.reason})")
            return
        self.fault("schedule.slot_recorded")
        self.launch(firing, row)

    def start_orphans(self) -> None:
        with self.store.read() as conn:
            unstarted = daemon_repo.unstarted_scheduled_runs(conn)
            parked = adoptable_parked_runs(conn, self.now)
        for run_id, owner in unstarted:
            if self.launcher.busy(run_id) or (owner and owner_alive(owner)):
                continue
            self.launcher.start(run_id)
            self.report.started.append(run_id)
            self.events("RunStarted", {"runId": run_id}, f"{run_id}: started (left unstarted)")
        for candidate in parked:
            run_id, workflow_file = candidate.run_id, candidate.workflow_file
            if self.launcher.busy(run_id):
                continue
            if not workflow_file or not Path(workflow_file).is_file():
                continue  # its definition is gone: an operator decides
            self.launcher.start(run_id)
            self.report.resumed.append(run_id)
            self.events("RunResumed", {"runId": run_id}, f"{run_id}: resumed (answered)")


def tick(
    store: Store,
    now: datetime,
    launcher: Launcher,
    *,
    events: Events = _quiet,
    fault: Callable[[str], None] = lambda point: None,
) -> TickReport:
    """Do everything due at ``now`` once (``agentctl daemon --once``)."""
    work = _Tick(store, now, launcher, events, fault)
    work.finish_recorded()
    with store.read() as conn:
        active = [s for s in schedules_repo.list_schedules(conn) if not s.paused]
    for schedule in active:
        try:
            if schedule.monitor_json is not None:
                work.observe(schedule)
            else:
                work.decide(schedule)
        except AgentctlError as exc:
            if exc.code in TRANSIENT_CODES:
                raise
            # One schedule that cannot be decided (a time zone this machine no longer
            # knows, a record written by a newer agentctl) must not stop the others.
            item = {"schedule": schedule.name, "code": exc.code, "message": exc.message}
            work.report.failed.append(item)
            work.events("ScheduleError", item, f"{schedule.name}: {exc.message}")
    work.start_orphans()
    return work.report


def fire_now(store: Store, name: str, now: datetime, launcher: Launcher) -> str:
    """``agentctl schedule trigger``: a manual firing at ``now`` (overlap not applied); the
    run id, created and linked but not started (the caller executes it)."""
    with store.write(locks.schedule(name)) as conn:
        schedule = require_kind(schedules_repo.schedule(conn, name), name, monitor=False)
        firing_id = schedules_repo.record_firing(
            conn, name, now, trigger="manual", status="recorded", missed=0, reason=None, now=now
        )
        firing = schedules_repo.firing(conn, firing_id) if firing_id is not None else None
    if firing is None:
        raise StateConflictError(f"schedule {name} already fired at {to_iso(now)}")
    try:
        return launcher.create(_request(schedule, firing))
    except AgentctlError as exc:
        with store.write(locks.schedule(name)) as conn:
            schedules_repo.fail_firing(conn, firing.id, f"{exc.code}: {exc.message}", now)
        raise


def next_wake(store: Store, now: datetime, poll_seconds: float) -> float:
    """Seconds until the next due slot of any active schedule, at most ``poll_seconds``."""
    best = poll_seconds
    with store.read() as conn:
        schedules = [s for s in schedules_repo.list_schedules(conn) if not s.paused]
    for schedule in schedules:
        try:
            upcoming = timing_of(schedule).next_slot(max(schedule.cursor_at, now))
        except AgentctlError:
            continue  # reported by every tick as a ScheduleError
        if upcoming is not None:
            due = upcoming + jitter_offset(schedule.name, upcoming, schedule.jitter_seconds)
            best = min(best, max(0.0, (due - now).total_seconds()))
    return best


def run_loop(
    store: Store,
    clock: Callable[[], datetime],
    launcher: Launcher,
    stop: threading.Event,
    *,
    poll_seconds: float,
    events: Events = _quiet,
    fault: Callable[[str], None] = lambda point: None,
    reap: Callable[[], None] = lambda: None,
) -> None:
    """Tick until ``stop`` is set (SIGTERM), waking at the next due slot or every
    ``poll_seconds`` (answers to parked runs arrive without a slot)."""
    while not stop.is_set():
        wake = poll_seconds
        try:
            tick(store, clock(), launcher, events=events, fault=fault)
            wake = next_wake(store, clock(), poll_seconds)
        except AgentctlError as exc:
            if exc.code not in TRANSIENT_CODES:
                raise
            # The database is locked or the disk full for a moment: try again later.
            events("DaemonRetry", {"code": exc.code, "message": exc.message}, exc.message)
        reap()
        stop.wait(wake)
