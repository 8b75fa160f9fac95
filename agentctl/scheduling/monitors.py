"""Monitors: observe on an interval, start a run when the observed value changes.

A monitor is stored as a schedule row with ``monitor_json`` set, so it shares the firing
record (unique per slot, committed before the run) and the daemon's recovery. At each
interval slot the daemon observes (:mod:`agentctl.scheduling.observers`) and records the
observation, unique per (monitor, slot); the first observation is the baseline. A value
whose digest differs from the last confirmed one is a change once it has stayed the same
for the debounce; the change fires a run with the inputs ``previous``, ``current`` and
``observedAt`` on top of the monitor's own ``--input`` values.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic.dataclasses import dataclass as record

from agentctl.digest import canonical_json
from agentctl.errors import UsageError
from agentctl.scheduling.observers import digest_of
from agentctl.scheduling.schedules import add_schedule, require_kind
from agentctl.store import locks, schedules_repo
from agentctl.store.schedules_repo import Firing, Observation, Schedule
from agentctl.store.timestamps import to_iso
from agentctl.typed_records import CAMEL, CamelRecord

if TYPE_CHECKING:
    from agentctl.store.engine import Store

__all__ = [
    "MonitorTarget",
    "add_monitor",
    "describe_monitor",
    "get_monitor",
    "list_monitors",
    "monitor_target",
    "record_observation",
]


@record(frozen=True, slots=True, config=CAMEL)
class MonitorTarget(CamelRecord):
    kind: str
    target: dict[str, Any]
    debounce_seconds: int


def monitor_target(
    files: list[str], http: str | None, expect_status: int | None, command: str | None
) -> tuple[str, dict[str, Any]]:
    """What a monitor observes, from exactly one of its three options."""
    chosen = [bool(files), http is not None, command is not None]
    if sum(chosen) != 1:
        raise UsageError("give exactly one of --watch-files, --http and --command")
    if files:
        return "files", {"patterns": files}
    if http is not None:
        if not http.startswith(("http://", "https://")):
            raise UsageError(f"--http {http!r} is not an http:// or https:// URL")
        return "http", {"url": http, "expectStatus": expect_status}
    assert command is not None
    argv = shlex.split(command)
    if not argv:
        raise UsageError("--command is empty", hint='write for example --command "git describe"')
    return "command", {"argv": argv}


def add_monitor(
    store: Store, base: Schedule, target: MonitorTarget, *, now: datetime
) -> dict[str, Any]:
    add_schedule(store, replace(base, monitor_json=canonical_json(target.to_json())), now=now)
    return get_monitor(store, base.name, now=now)


def get_monitor(
    store: Store, name: str, *, now: datetime, observations: int = 10
) -> dict[str, Any]:
    with store.read() as conn:
        row = require_kind(schedules_repo.schedule(conn, name), name, monitor=True)
        recent = schedules_repo.observations(conn, name, observations)
        firings = schedules_repo.firings(conn, name, observations)
    return describe_monitor(row, recent, firings, now=now)


def list_monitors(store: Store, *, now: datetime) -> list[dict[str, Any]]:
    with store.read() as conn:
        rows = [r for r in schedules_repo.list_schedules(conn) if r.monitor_json is not None]
        return [
            describe_monitor(
                row,
                schedules_repo.observations(conn, row.name, 1),
                schedules_repo.firings(conn, row.name, 1),
                now=now,
            )
            for row in rows
        ]


def describe_monitor(
    row: Schedule,
    observations: list[Observation],
    firings: list[Firing],
    *,
    now: datetime,
) -> dict[str, Any]:
    from agentctl.scheduling.schedules import firing_json

    monitor = json.loads(row.monitor_json or "{}")
    observed = json.loads(row.observed_json) if row.observed_json else None
    return {
        "name": row.name,
        "workflow": row.workflow,
        "workflowFile": row.workflow_file,
        "kind": monitor.get("kind"),
        "target": monitor.get("target"),
        "debounceSeconds": monitor.get("debounceSeconds", 0),
        "everySeconds": row.interval_seconds,
        "inputs": json.loads(row.inputs_json),
        "overlap": row.overlap,
        "paused": row.paused,
        "cursor": to_iso(row.cursor_at),
        "current": observed["value"] if observed else None,
        "pendingChange": json.loads(row.pending_json) if row.pending_json else None,
        "observations": [
            {
                "slot": to_iso(o.slot_at),
                "outcome": o.outcome,
                "digest": o.digest,
                "value": json.loads(o.value_json),
            }
            for o in observations
        ],
        "firings": [firing_json(f) for f in firings],
        "createdAt": to_iso(row.created_at),
    }


def record_observation(
    store: Store, row: Schedule, slot: datetime, value: dict[str, Any], now: datetime
) -> tuple[str, Firing | None] | None:
    """Commit the observation of ``slot`` and what it means, in one transaction:
    ``(outcome, firing)`` where the firing is the run to start (a change, recorded
    ``recorded``, or ``skipped`` under ``--overlap skip``); None when another daemon
    observed this slot first."""
    digest = digest_of(value)
    monitor = json.loads(row.monitor_json or "{}")
    debounce = timedelta(seconds=int(monitor.get("debounceSeconds") or 0))
    with store.write(locks.schedule(row.name)) as conn:
        if not schedules_repo.record_observation(
            conn, row.name, slot, digest, canonical_json(value), now
        ):
            return None
        fresh = schedules_repo.schedule(conn, row.name)
        assert fresh is not None
        observed = json.loads(fresh.observed_json) if fresh.observed_json else None
        pending = json.loads(fresh.pending_json) if fresh.pending_json else None
        current = {"digest": digest, "value": value}
        firing: Firing | None = None
        if observed is None:
            outcome, observed, pending = "baseline", current, None
        elif observed["digest"] == digest:
            outcome, pending = "unchanged", None
        else:
            if pending is None or pending["digest"] != digest:
                pending = {"digest": digest, "since": to_iso(slot)}
            since = datetime.fromisoformat(pending["since"].replace("Z", "+00:00"))
            if slot - since < debounce:
                outcome = "pending"
            else:
                outcome = "changed"
                firing = _record_change(conn, fresh, slot, observed["value"], value, now)
                observed, pending = current, None
        schedules_repo.set_outcome(conn, row.name, slot, outcome)
        schedules_repo.set_observed(
            conn,
            row.name,
            observed_json=canonical_json(observed),
            pending_json=canonical_json(pending) if pending else None,
            cursor=slot,
            now=now,
        )
    return outcome, firing


def _record_change(
    conn: Any,
    row: Schedule,
    slot: datetime,
    previous: Any,
    current: Any,
    now: datetime,
) -> Firing | None:
    live = schedules_repo.live_run(conn, row.name)
    skip = live is not None and row.overlap != "allow"
    reason = f"run {live[0]} of this monitor is still {live[1]}" if skip and live else None
    inputs = {"previous": previous, "current": current, "observedAt": to_iso(slot)}
    firing_id = schedules_repo.record_firing(
        conn,
        row.name,
        slot,
        trigger="monitor",
        status="skipped" if skip else "recorded",
        missed=0,
        reason=reason,
        now=now,
        inputs_json=canonical_json(inputs),
    )
    return schedules_repo.firing(conn, firing_id) if firing_id is not None else None
