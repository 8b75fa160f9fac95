"""Schedule rows and their firings (one row per decided slot).

Every function runs in the caller's transaction. A firing is inserted with
``ON CONFLICT DO NOTHING`` on its unique (schedule, slot): the database, not the daemon,
decides which of two daemons records a slot, and the loser learns it from the row count.
The firing's move to ``started`` goes through :func:`guarded_update` inside the run's
creating transaction, so a slot is linked to exactly one run.

Inputs and observed values are payloads (docs/encryption.md): a schedule's
``inputs_json``, ``observed_json`` and ``pending_json``, a firing's ``inputs_json`` and an
observation's ``value_json`` go through :func:`~agentctl.store.sealing.seal` on the way in
and :func:`~agentctl.store.sealing.unseal` on the way out; a firing and an observation are
named by (schedule, slot), which is known before their row exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.records import check_format_version
from agentctl.store.rows import columns_sql
from agentctl.store.sealing import seal, unseal
from agentctl.store.timestamps import from_db, to_db
from agentctl.store.transitions import guarded_update

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = [
    "FiringRow",
    "ObservationRow",
    "ScheduleRow",
    "advance_cursor",
    "delete_schedule",
    "fail_firing",
    "firing",
    "firing_of_run",
    "firings",
    "insert_schedule",
    "link_run",
    "list_schedules",
    "live_run",
    "observations",
    "record_firing",
    "record_observation",
    "recorded_firings",
    "schedule",
    "set_observed",
    "set_outcome",
    "set_paused",
]

_SCHEDULE_COLUMNS = (
    "name",
    "format_version",
    "workflow",
    "workflow_file",
    "project_dir",
    "workspace",
    "cron",
    "interval_seconds",
    "timezone",
    "inputs_json",
    "catch_up",
    "max_catch_up",
    "overlap",
    "jitter_seconds",
    "grace_seconds",
    "paused",
    "anchor_at",
    "cursor_at",
    "missed",
    "created_at",
    "updated_at",
    "monitor_json",
    "observed_json",
    "pending_json",
)
_FIRING_COLUMNS = (
    "id",
    "format_version",
    "schedule_name",
    "slot_at",
    "trigger",
    "status",
    "run_id",
    "missed",
    "reason",
    "inputs_json",
    "created_at",
    "updated_at",
)


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    name: str
    workflow: str
    workflow_file: str
    project_dir: str
    workspace: str | None
    cron: str | None
    interval_seconds: int | None
    timezone: str
    inputs_json: str
    catch_up: str
    max_catch_up: int
    overlap: str
    jitter_seconds: int
    grace_seconds: int
    paused: bool
    anchor_at: datetime
    cursor_at: datetime
    missed: int
    created_at: datetime
    updated_at: datetime
    monitor_json: str | None = None
    observed_json: str | None = None
    pending_json: str | None = None


@dataclass(frozen=True, slots=True)
class FiringRow:
    id: int
    schedule_name: str
    slot_at: datetime
    trigger: str
    status: str
    run_id: str | None
    missed: int
    reason: str | None
    inputs_json: str | None
    created_at: datetime
    updated_at: datetime


_SCHEDULE_SEALED = ("inputs_json", "observed_json", "pending_json")


def _schedule(conn: SqlRunner, row: Any) -> ScheduleRow:
    values = dict(zip(_SCHEDULE_COLUMNS, row, strict=True))
    check_format_version("schedule", values["name"], int(values.pop("format_version")))
    for column in _SCHEDULE_SEALED:
        values[column] = unseal(conn, "schedules", column, (values["name"],), values[column])
    for column in ("anchor_at", "cursor_at", "created_at", "updated_at"):
        values[column] = from_db(values[column])
    values["paused"] = bool(values["paused"])
    return ScheduleRow(**values)


def _firing(conn: SqlRunner, row: Any) -> FiringRow:
    values = dict(zip(_FIRING_COLUMNS, row, strict=True))
    check_format_version("schedule firing", values["id"], int(values.pop("format_version")))
    record = (values["schedule_name"], values["slot_at"])
    values["inputs_json"] = unseal(
        conn, "schedule_firings", "inputs_json", record, values["inputs_json"]
    )
    for column in ("slot_at", "created_at", "updated_at"):
        values[column] = from_db(values[column])
    return FiringRow(**values)


def insert_schedule(conn: SqlRunner, row: ScheduleRow) -> bool:
    """Insert a new schedule; False (nothing written) when the name is taken."""
    values = [
        seal(conn, "schedules", c, (row.name,), getattr(row, c))
        if c in _SCHEDULE_SEALED
        else getattr(row, c)
        if c != "format_version"
        else FORMAT_VERSION
        for c in _SCHEDULE_COLUMNS
    ]
    # ``paused`` stays a bool: the column is BOOLEAN on PostgreSQL (an integer there is
    # refused), and SQLite stores a bool as 0/1.
    params = tuple(to_db(v) if isinstance(v, datetime) else v for v in values)
    result = conn.exec_driver_sql(
        f"INSERT INTO schedules ({columns_sql(_SCHEDULE_COLUMNS)}) "  # noqa: S608
        f"VALUES ({', '.join('?' for _ in _SCHEDULE_COLUMNS)}) ON CONFLICT (name) DO NOTHING",
        params,
    )
    return int(result.rowcount) == 1


def schedule(conn: SqlRunner, name: str) -> ScheduleRow | None:
    row = conn.exec_driver_sql(
        f"SELECT {columns_sql(_SCHEDULE_COLUMNS)} FROM schedules WHERE name = ?",  # noqa: S608
        (name,),
    ).first()
    return None if row is None else _schedule(conn, row)


def list_schedules(conn: SqlRunner) -> list[ScheduleRow]:
    rows = conn.exec_driver_sql(
        f"SELECT {columns_sql(_SCHEDULE_COLUMNS)} FROM schedules ORDER BY name"  # noqa: S608
    )
    return [_schedule(conn, row) for row in rows]


def set_paused(conn: SqlRunner, name: str, paused: bool, now: datetime) -> bool:
    result = conn.exec_driver_sql(
        "UPDATE schedules SET paused = ?, updated_at = ? WHERE name = ?",
        (bool(paused), to_db(now), name),
    )
    return int(result.rowcount) == 1


def delete_schedule(conn: SqlRunner, name: str) -> bool:
    """Remove a schedule or monitor, its firings and observations (its runs stay)."""
    conn.exec_driver_sql("DELETE FROM schedule_firings WHERE schedule_name = ?", (name,))
    conn.exec_driver_sql("DELETE FROM monitor_observations WHERE monitor_name = ?", (name,))
    result = conn.exec_driver_sql("DELETE FROM schedules WHERE name = ?", (name,))
    return int(result.rowcount) == 1


def advance_cursor(
    conn: SqlRunner, name: str, cursor: datetime, missed: int, now: datetime
) -> bool:
    """Move the schedule's cursor forward and add to its missed count; False (nothing
    written) when the cursor is already there or beyond (another daemon moved it)."""
    result = conn.exec_driver_sql(
        "UPDATE schedules SET cursor_at = ?, missed = missed + ?, updated_at = ? "
        "WHERE name = ? AND cursor_at < ?",
        (to_db(cursor), missed, to_db(now), name, to_db(cursor)),
    )
    return int(result.rowcount) == 1


def record_firing(
    conn: SqlRunner,
    name: str,
    slot: datetime,
    *,
    trigger: str,
    status: str,
    missed: int,
    reason: str | None,
    now: datetime,
    inputs_json: str | None = None,
) -> int | None:
    """Insert the firing of ``slot``; its id, or None when that slot already has one."""
    result = conn.exec_driver_sql(
        "INSERT INTO schedule_firings (format_version, schedule_name, slot_at, trigger, status, "
        "missed, reason, inputs_json, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (schedule_name, slot_at) DO NOTHING",
        (
            FORMAT_VERSION,
            name,
            to_db(slot),
            trigger,
            status,
            missed,
            reason,
            seal(conn, "schedule_firings", "inputs_json", (name, to_db(slot)), inputs_json),
            to_db(now),
            to_db(now),
        ),
    )
    if int(result.rowcount) != 1:
        return None
    row = conn.exec_driver_sql(
        "SELECT id FROM schedule_firings WHERE schedule_name = ? AND slot_at = ?",
        (name, to_db(slot)),
    ).first()
    return int(row[0])


def firing(conn: SqlRunner, firing_id: int) -> FiringRow | None:
    row = conn.exec_driver_sql(
        f"SELECT {columns_sql(_FIRING_COLUMNS)} FROM schedule_firings WHERE id = ?",  # noqa: S608
        (firing_id,),
    ).first()
    return None if row is None else _firing(conn, row)


def firings(conn: SqlRunner, name: str, limit: int) -> list[FiringRow]:
    """The schedule's firings, newest slot first."""
    rows = conn.exec_driver_sql(
        f"SELECT {columns_sql(_FIRING_COLUMNS)} FROM schedule_firings "  # noqa: S608
        "WHERE schedule_name = ? ORDER BY slot_at DESC, id DESC LIMIT ?",
        (name, limit),
    )
    return [_firing(conn, row) for row in rows]


def recorded_firings(conn: SqlRunner) -> list[FiringRow]:
    """Firings committed without a run yet (a daemon stopped between the two), oldest first."""
    rows = conn.exec_driver_sql(
        f"SELECT {columns_sql(_FIRING_COLUMNS)} FROM schedule_firings "  # noqa: S608
        "WHERE status = 'recorded' ORDER BY slot_at, id"
    )
    return [_firing(conn, row) for row in rows]


def link_run(conn: SqlRunner, firing_id: int, run_id: str, now: datetime) -> None:
    """``recorded`` -> ``started`` with the run; a firing already linked raises
    :class:`StateConflictError` and the caller's transaction (the run's) rolls back."""
    guarded_update(
        conn, "firing", (firing_id,), {"status": "started", "run_id": run_id, "updated_at": now}
    )


def fail_firing(conn: SqlRunner, firing_id: int, reason: str, now: datetime) -> None:
    guarded_update(
        conn, "firing", (firing_id,), {"status": "failed", "reason": reason, "updated_at": now}
    )


def live_run(conn: SqlRunner, name: str) -> tuple[str, str] | None:
    """``(run id, status)`` of the schedule's newest run that is still running or parked."""
    row = conn.exec_driver_sql(
        "SELECT r.id, r.status FROM schedule_firings f JOIN runs r ON r.id = f.run_id "
        "WHERE f.schedule_name = ? AND r.status IN ('running', 'paused') "
        "ORDER BY f.slot_at DESC LIMIT 1",
        (name,),
    ).first()
    return None if row is None else (str(row[0]), str(row[1]))


def firing_of_run(conn: SqlRunner, run_id: str) -> FiringRow | None:
    """The firing that started ``run_id`` (None for a run started by hand)."""
    row = conn.exec_driver_sql(
        f"SELECT {columns_sql(_FIRING_COLUMNS)} FROM schedule_firings "  # noqa: S608
        "WHERE run_id = ? LIMIT 1",
        (run_id,),
    ).first()
    return None if row is None else _firing(conn, row)


@dataclass(frozen=True, slots=True)
class ObservationRow:
    slot_at: datetime
    digest: str
    value_json: str
    outcome: str


def record_observation(
    conn: SqlRunner, name: str, slot: datetime, digest: str, value_json: str, now: datetime
) -> bool:
    """Insert a monitor's observation of ``slot`` (outcome decided by :func:`set_outcome`);
    False when that slot was already observed (another daemon)."""
    result = conn.exec_driver_sql(
        "INSERT INTO monitor_observations (monitor_name, slot_at, digest, value_json, outcome, "
        "created_at) VALUES (?, ?, ?, ?, 'pending', ?) "
        "ON CONFLICT (monitor_name, slot_at) DO NOTHING",
        (
            name,
            to_db(slot),
            digest,
            seal(conn, "monitor_observations", "value_json", (name, to_db(slot)), value_json),
            to_db(now),
        ),
    )
    return int(result.rowcount) == 1


def set_outcome(conn: SqlRunner, name: str, slot: datetime, outcome: str) -> None:
    conn.exec_driver_sql(
        "UPDATE monitor_observations SET outcome = ? WHERE monitor_name = ? AND slot_at = ?",
        (outcome, name, to_db(slot)),
    )


def set_observed(
    conn: SqlRunner,
    name: str,
    *,
    observed_json: str | None,
    pending_json: str | None,
    cursor: datetime,
    now: datetime,
) -> None:
    """A monitor's last confirmed value, the change waiting for its debounce, its cursor."""
    conn.exec_driver_sql(
        "UPDATE schedules SET observed_json = ?, pending_json = ?, "
        "cursor_at = CASE WHEN cursor_at < ? THEN ? ELSE cursor_at END, updated_at = ? "
        "WHERE name = ?",
        (
            seal(conn, "schedules", "observed_json", (name,), observed_json),
            seal(conn, "schedules", "pending_json", (name,), pending_json),
            to_db(cursor),
            to_db(cursor),
            to_db(now),
            name,
        ),
    )


def observations(conn: SqlRunner, name: str, limit: int) -> list[ObservationRow]:
    """A monitor's observations, newest first."""
    rows = conn.exec_driver_sql(
        "SELECT slot_at, digest, value_json, outcome FROM monitor_observations "
        "WHERE monitor_name = ? ORDER BY slot_at DESC LIMIT ?",
        (name, limit),
    )
    return [
        ObservationRow(
            from_db(r[0]),
            str(r[1]),
            str(unseal(conn, "monitor_observations", "value_json", (name, r[0]), r[2])),
            str(r[3]),
        )
        for r in rows
    ]
