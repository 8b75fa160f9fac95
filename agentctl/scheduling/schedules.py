"""Schedules as records: add, read, pause, resume, remove (``agentctl schedule``).

A schedule names a workflow as the user wrote it (a registry name or a path) and keeps the
file it resolved to and the project directory it was resolved from, so the daemon resolves
and compiles it again at every slot, from anywhere.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentctl.digest import canonical_json
from agentctl.errors import AgentctlError, NotFoundError, UsageError
from agentctl.scheduling.slots import Timing, jitter_offset, parse_instant
from agentctl.store import locks, schedules_repo
from agentctl.store.schedules_repo import Firing, Schedule
from agentctl.store.timestamps import to_iso

if TYPE_CHECKING:
    from agentctl.store.engine import Store

__all__ = [
    "CATCH_UP",
    "OVERLAP",
    "Schedule",
    "add_schedule",
    "describe",
    "firing_json",
    "get_schedule",
    "list_schedules",
    "new_schedule",
    "remove_schedule",
    "require_kind",
    "set_paused",
    "timing_of",
    "unknown_schedule",
]

CATCH_UP = ("skip", "latest", "all")
OVERLAP = ("skip", "queue", "allow")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def timing_of(row: Schedule) -> Timing:
    return Timing(row.cron, row.interval_seconds, row.timezone, row.anchor_at)


def _check(new: Schedule) -> Timing:
    if not _NAME.match(new.name):
        raise UsageError(
            f"schedule name {new.name!r} is not valid",
            hint="use letters, digits, '.', '_' and '-' (at most 128, starting with a letter "
            "or digit)",
        )
    catch_up = "skip" if new.catch_up == "none" else new.catch_up
    if catch_up not in CATCH_UP:
        raise UsageError(f"--catch-up {new.catch_up!r} is not one of skip, latest, all")
    if new.overlap not in OVERLAP:
        raise UsageError(f"--overlap {new.overlap!r} is not one of skip, queue, allow")
    if new.max_catch_up < 1:
        raise UsageError("--max-catch-up must be at least 1")
    timing = timing_of(new)
    if timing.next_slot(new.anchor_at) is None:
        raise UsageError(
            f"--cron {new.cron!r} matches no time in the next five years",
            hint="check the day-of-month and month fields",
        )
    return timing


def new_schedule(
    *,
    name: str,
    workflow: str,
    workflow_file: str,
    workspace: str | None,
    inputs: dict[str, Any],
    start: str | None,
    now: datetime,
    **rule: Any,
) -> Schedule:
    """The schedule ``schedule add`` and ``monitor add`` record: the workflow as given and
    as resolved, this directory, the runs' workspace and ``inputs``, and the first instant
    (``start``, else now); ``rule`` is the rest (cron or interval, catch-up, overlap …)."""
    first = parse_instant(start, "--start") if start else now
    return Schedule(
        name=name,
        workflow=workflow,
        workflow_file=workflow_file,
        project_dir=str(Path.cwd().resolve()),
        workspace=str(Path(workspace).resolve()) if workspace else None,
        inputs_json=canonical_json(inputs),
        anchor_at=first,
        cursor_at=first,
        created_at=now,
        updated_at=now,
        **rule,
    )


def add_schedule(store: Store, schedule: Schedule, *, now: datetime) -> dict[str, Any]:
    """Record a schedule (a monitor when it has ``monitor_json``) whose first slot comes
    after its ``anchor_at``; exit 2 when the name is taken or an option is invalid."""
    _check(schedule)
    if schedule.catch_up == "none":
        schedule = replace(schedule, catch_up="skip")
    with store.write() as conn:
        if not schedules_repo.insert_schedule(conn, schedule):
            raise UsageError(
                f"a schedule or monitor named {schedule.name!r} already exists",
                code="schedule.exists",
                hint="pick another name, or remove the existing one first",
            )
    return describe(schedule, [], now=now)


def unknown_schedule(name: str, *, monitor: bool = False) -> NotFoundError:
    kind = "monitor" if monitor else "schedule"
    return NotFoundError(
        f"no {kind} named {name!r}",
        code=f"{kind}.not_found",
        hint=f"`agentctl {kind} list` shows the {kind}s of this database",
    )


def require_kind(row: Schedule | None, name: str, *, monitor: bool) -> Schedule:
    """The row, when it is of the kind the command works on (a schedule or a monitor)."""
    if row is None:
        raise unknown_schedule(name, monitor=monitor)
    if (row.monitor_json is not None) != monitor:
        this, other = ("monitor", "schedule") if monitor else ("schedule", "monitor")
        raise UsageError(
            f"{name!r} is a {other}, not a {this}", hint=f"use `agentctl {other} ...` for it"
        )
    return row


def get_schedule(store: Store, name: str, *, now: datetime, firings: int = 20) -> dict[str, Any]:
    with store.read() as conn:
        row = require_kind(schedules_repo.schedule(conn, name), name, monitor=False)
        recent = schedules_repo.firings(conn, name, firings)
    return describe(row, recent, now=now)


def list_schedules(store: Store, *, now: datetime) -> list[dict[str, Any]]:
    with store.read() as conn:
        rows = [r for r in schedules_repo.list_schedules(conn) if r.monitor_json is None]
        return [describe(row, schedules_repo.firings(conn, row.name, 1), now=now) for row in rows]


def set_paused(store: Store, name: str, paused: bool, *, now: datetime, monitor: bool) -> None:
    """Pause or resume. Resuming does not bring back the slots that passed while paused:
    the cursor moves to now and they are added to the missed count."""
    with store.write(locks.schedule(name)) as conn:
        row = require_kind(schedules_repo.schedule(conn, name), name, monitor=monitor)
        schedules_repo.set_paused(conn, name, paused, now)
        if not paused and row.paused:
            skipped = sum(1 for _ in timing_of(row).slots(row.cursor_at, now))
            schedules_repo.advance_cursor(conn, name, now, skipped, now)


def remove_schedule(store: Store, name: str, *, monitor: bool) -> dict[str, Any]:
    with store.write() as conn:
        require_kind(schedules_repo.schedule(conn, name), name, monitor=monitor)
        schedules_repo.delete_schedule(conn, name)
    return {"name": name, "removed": True}


def firing_json(firing: Firing) -> dict[str, Any]:
    return {
        "schedule": firing.schedule_name,
        "slot": to_iso(firing.slot_at),
        "trigger": firing.trigger,
        "state": firing.status,
        "runId": firing.run_id,
        "missedBefore": firing.missed,
        "reason": firing.reason,
        "recordedAt": to_iso(firing.created_at),
    }


def describe(row: Schedule, firings: list[Firing], *, now: datetime) -> dict[str, Any]:
    problem = None
    try:
        upcoming = timing_of(row).next_slot(max(row.cursor_at, now))
    except AgentctlError as exc:  # e.g. a time zone this machine no longer knows
        upcoming, problem = None, exc.message
    due = upcoming + jitter_offset(row.name, upcoming, row.jitter_seconds) if upcoming else None
    return {
        "name": row.name,
        "workflow": row.workflow,
        "workflowFile": row.workflow_file,
        "projectDir": row.project_dir,
        "workspace": row.workspace,
        "cron": row.cron,
        "everySeconds": row.interval_seconds,
        "timezone": row.timezone,
        "inputs": json.loads(row.inputs_json),
        "catchUp": row.catch_up,
        "maxCatchUp": row.max_catch_up,
        "overlap": row.overlap,
        "jitterSeconds": row.jitter_seconds,
        "graceSeconds": row.grace_seconds,
        "paused": row.paused,
        "cursor": to_iso(row.cursor_at),
        "missed": row.missed,
        "nextSlot": None if row.paused else to_iso(upcoming),
        "nextDue": None if row.paused else to_iso(due),
        "createdAt": to_iso(row.created_at),
        "firings": [firing_json(f) for f in firings],
        "projectExists": Path(row.project_dir).is_dir(),
        "problem": problem,
    }
