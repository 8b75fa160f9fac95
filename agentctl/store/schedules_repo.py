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

A schedule is one record, :class:`Schedule`, from the command that adds it to the daemon
that reads it back; firings and observations come back as :class:`Firing` and
:class:`Observation`. Every statement is SQLAlchemy Core, compiled once per dialect.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.records import check_format_version
from agentctl.store.sealing import seal, unseal
from agentctl.store.statements import columns, statement
from agentctl.store.timestamps import from_db, to_db
from agentctl.store.transitions import guarded_update

if TYPE_CHECKING:
    from sqlalchemy import Select
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

__all__ = [
    "Firing",
    "Observation",
    "Schedule",
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


@dataclass(frozen=True, slots=True)
class Schedule:
    """A schedule (a monitor when ``monitor_json`` is set) as added and as stored: its
    workflow as the user wrote it and as resolved, its timing rule, the runs' inputs, and
    where the daemon stands (``cursor_at``: every slot up to it is decided)."""

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
    anchor_at: datetime
    cursor_at: datetime
    created_at: datetime
    updated_at: datetime
    paused: bool = False
    missed: int = 0
    monitor_json: str | None = None
    observed_json: str | None = None
    pending_json: str | None = None


@dataclass(frozen=True, slots=True)
class Firing:
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


@dataclass(frozen=True, slots=True)
class Observation:
    slot_at: datetime
    digest: str
    value_json: str
    outcome: str


_SCHEDULE_FIELDS = Schedule.__dataclass_fields__.keys()
_SCHEDULE_COLUMNS = ("format_version", *_SCHEDULE_FIELDS)
_SCHEDULE_TIMES = ("anchor_at", "cursor_at", "created_at", "updated_at")
_SCHEDULE_SEALED = ("inputs_json", "observed_json", "pending_json")
_FIRING_COLUMNS = ("format_version", *Firing.__dataclass_fields__.keys())
_FIRING_TIMES = ("slot_at", "created_at", "updated_at")


def _schedule(conn: SqlRunner, row: Any) -> Schedule:
    values = dict(zip(_SCHEDULE_COLUMNS, row, strict=True))
    check_format_version("schedule", values["name"], int(values.pop("format_version")))
    for column in _SCHEDULE_SEALED:
        values[column] = unseal(conn, "schedules", column, (values["name"],), values[column])
    for column in _SCHEDULE_TIMES:
        values[column] = from_db(values[column])
    values["paused"] = bool(values["paused"])
    return Schedule(**values)


def _firing(conn: SqlRunner, row: Any) -> Firing:
    values = dict(zip(_FIRING_COLUMNS, row, strict=True))
    check_format_version("schedule firing", values["id"], int(values.pop("format_version")))
    record = (values["schedule_name"], values["slot_at"])
    values["inputs_json"] = unseal(
        conn, "schedule_firings", "inputs_json", record, values["inputs_json"]
    )
    for column in _FIRING_TIMES:
        values[column] = from_db(values[column])
    return Firing(**values)


# -- schedules ----------------------------------------------------------------------------


def insert_schedule(conn: SqlRunner, schedule: Schedule) -> bool:
    """Insert a new schedule; False (nothing written) when the name is taken."""
    values = {name: getattr(schedule, name) for name in _SCHEDULE_FIELDS}
    for column in _SCHEDULE_SEALED:
        values[column] = seal(conn, "schedules", column, (schedule.name,), values[column])
    for column in _SCHEDULE_TIMES:
        values[column] = to_db(values[column])
    # ``paused`` stays a bool: the column is BOOLEAN on PostgreSQL (an integer there is
    # refused), and SQLite stores a bool as 0/1.
    return int(_insert_schedule.run(conn, **values).rowcount) == 1


@statement
def _insert_schedule(sql: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.schedule_tables import schedules

    query: Executable = (
        sql.insert(schedules)
        .values(
            format_version=FORMAT_VERSION,
            **{name: bindparam(name) for name in _SCHEDULE_FIELDS},
        )
        .on_conflict_do_nothing(index_elements=["name"])
    )
    return query


def schedule(conn: SqlRunner, name: str) -> Schedule | None:
    row = _schedule_named.run(conn, name=name).first()
    return None if row is None else _schedule(conn, row)


@statement
def _schedule_named(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.schedule_tables import schedules

    return select(*columns(schedules, _SCHEDULE_COLUMNS)).where(
        schedules.c.name == bindparam("name")
    )


def list_schedules(conn: SqlRunner) -> list[Schedule]:
    return [_schedule(conn, row) for row in _all_schedules.run(conn)]


@statement
def _all_schedules(_: SqlDialect) -> Executable:
    from sqlalchemy import select

    from agentctl.store.schedule_tables import schedules

    return select(*columns(schedules, _SCHEDULE_COLUMNS)).order_by(schedules.c.name)


def set_paused(conn: SqlRunner, name: str, paused: bool, now: datetime) -> bool:
    result = _set_paused.run(conn, paused=bool(paused), now=to_db(now), name=name)
    return int(result.rowcount) == 1


@statement
def _set_paused(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.schedule_tables import schedules

    return (
        update(schedules)
        .where(schedules.c.name == bindparam("name"))
        .values(paused=bindparam("paused"), updated_at=bindparam("now"))
    )


def delete_schedule(conn: SqlRunner, name: str) -> bool:
    """Remove a schedule or monitor, its firings and observations (its runs stay)."""
    _delete_firings.run(conn, name=name)
    _delete_observations.run(conn, name=name)
    return int(_delete_schedule.run(conn, name=name).rowcount) == 1


@statement
def _delete_firings(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, delete

    from agentctl.store.schedule_tables import schedule_firings

    return delete(schedule_firings).where(schedule_firings.c.schedule_name == bindparam("name"))


@statement
def _delete_observations(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, delete

    from agentctl.store.schedule_tables import monitor_observations

    return delete(monitor_observations).where(
        monitor_observations.c.monitor_name == bindparam("name")
    )


@statement
def _delete_schedule(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, delete

    from agentctl.store.schedule_tables import schedules

    return delete(schedules).where(schedules.c.name == bindparam("name"))


def advance_cursor(
    conn: SqlRunner, name: str, cursor: datetime, missed: int, now: datetime
) -> bool:
    """Move the schedule's cursor forward and add to its missed count; False (nothing
    written) when the cursor is already there or beyond (another daemon moved it)."""
    result = _advance_cursor.run(
        conn, cursor=to_db(cursor), missed=missed, now=to_db(now), name=name
    )
    return int(result.rowcount) == 1


@statement
def _advance_cursor(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.schedule_tables import schedules

    c = schedules.c
    cursor: Any = bindparam("cursor")
    return (
        update(schedules)
        .where(c.name == bindparam("name"), c.cursor_at < cursor)
        .values(
            cursor_at=cursor, missed=c.missed + bindparam("missed"), updated_at=bindparam("now")
        )
    )


# -- firings ------------------------------------------------------------------------------


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
    slot_at, stamp = to_db(slot), to_db(now)
    result = _insert_firing.run(
        conn,
        name=name,
        slot_at=slot_at,
        trigger=trigger,
        status=status,
        missed=missed,
        reason=reason,
        inputs_json=seal(conn, "schedule_firings", "inputs_json", (name, slot_at), inputs_json),
        now=stamp,
    )
    if int(result.rowcount) != 1:
        return None
    row = _firing_id.run(conn, name=name, slot_at=slot_at).first()
    return int(row[0])


@statement
def _insert_firing(sql: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.schedule_tables import schedule_firings

    given = ("slot_at", "trigger", "status", "missed", "reason", "inputs_json")
    now: Any = bindparam("now")
    query: Executable = (
        sql.insert(schedule_firings)
        .values(
            format_version=FORMAT_VERSION,
            schedule_name=bindparam("name"),
            created_at=now,
            updated_at=now,
            **{column: bindparam(column) for column in given},
        )
        .on_conflict_do_nothing(index_elements=["schedule_name", "slot_at"])
        .inline()  # no implicit RETURNING on PostgreSQL: the id is read back below
    )
    return query


@statement
def _firing_id(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.schedule_tables import schedule_firings

    c = schedule_firings.c
    return select(c.id).where(
        c.schedule_name == bindparam("name"), c.slot_at == bindparam("slot_at")
    )


def _firings_query() -> Select[Any]:
    from sqlalchemy import select

    from agentctl.store.schedule_tables import schedule_firings

    return select(*columns(schedule_firings, _FIRING_COLUMNS))


def firing(conn: SqlRunner, firing_id: int) -> Firing | None:
    row = _firing_by_id.run(conn, firing_id=firing_id).first()
    return None if row is None else _firing(conn, row)


@statement
def _firing_by_id(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.schedule_tables import schedule_firings

    return _firings_query().where(schedule_firings.c.id == bindparam("firing_id"))


def firings(conn: SqlRunner, name: str, limit: int) -> list[Firing]:
    """The schedule's firings, newest slot first."""
    return [_firing(conn, row) for row in _firings_of.run(conn, name=name, limit=limit)]


@statement
def _firings_of(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.schedule_tables import schedule_firings

    c = schedule_firings.c
    return (
        _firings_query()
        .where(c.schedule_name == bindparam("name"))
        .order_by(c.slot_at.desc(), c.id.desc())
        .limit(bindparam("limit"))
    )


def recorded_firings(conn: SqlRunner) -> list[Firing]:
    """Firings committed without a run yet (a daemon stopped between the two), oldest first."""
    return [_firing(conn, row) for row in _recorded_firings.run(conn)]


@statement
def _recorded_firings(_: SqlDialect) -> Executable:
    from agentctl.store.schedule_tables import schedule_firings

    c = schedule_firings.c
    return _firings_query().where(c.status == "recorded").order_by(c.slot_at, c.id)


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
    row = _live_run.run(conn, name=name).first()
    return None if row is None else (str(row[0]), str(row[1]))


@statement
def _live_run(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import runs
    from agentctl.store.schedule_tables import schedule_firings
    from agentctl.store.statements import one_of

    f = schedule_firings.c
    return (
        select(runs.c.id, runs.c.status)
        .select_from(schedule_firings.join(runs, runs.c.id == f.run_id))
        .where(f.schedule_name == bindparam("name"), one_of(runs.c.status, ("running", "paused")))
        .order_by(f.slot_at.desc())
        .limit(1)
    )


def firing_of_run(conn: SqlRunner, run_id: str) -> Firing | None:
    """The firing that started ``run_id`` (None for a run started by hand)."""
    row = _firing_of_run.run(conn, run_id=run_id).first()
    return None if row is None else _firing(conn, row)


@statement
def _firing_of_run(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.schedule_tables import schedule_firings

    return _firings_query().where(schedule_firings.c.run_id == bindparam("run_id")).limit(1)


# -- monitor observations -----------------------------------------------------------------


def record_observation(
    conn: SqlRunner, name: str, slot: datetime, digest: str, value_json: str, now: datetime
) -> bool:
    """Insert a monitor's observation of ``slot`` (outcome decided by :func:`set_outcome`);
    False when that slot was already observed (another daemon)."""
    slot_at = to_db(slot)
    result = _insert_observation.run(
        conn,
        name=name,
        slot_at=slot_at,
        digest=digest,
        value_json=seal(conn, "monitor_observations", "value_json", (name, slot_at), value_json),
        now=to_db(now),
    )
    return int(result.rowcount) == 1


@statement
def _insert_observation(sql: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.schedule_tables import monitor_observations

    query: Executable = (
        sql.insert(monitor_observations)
        .values(
            monitor_name=bindparam("name"),
            slot_at=bindparam("slot_at"),
            digest=bindparam("digest"),
            value_json=bindparam("value_json"),
            outcome="pending",
            created_at=bindparam("now"),
        )
        .on_conflict_do_nothing(index_elements=["monitor_name", "slot_at"])
        .inline()
    )
    return query


def set_outcome(conn: SqlRunner, name: str, slot: datetime, outcome: str) -> None:
    _set_outcome.run(conn, outcome=outcome, name=name, slot_at=to_db(slot))


@statement
def _set_outcome(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.schedule_tables import monitor_observations

    c = monitor_observations.c
    return (
        update(monitor_observations)
        .where(c.monitor_name == bindparam("name"), c.slot_at == bindparam("slot_at"))
        .values(outcome=bindparam("outcome"))
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
    _set_observed.run(
        conn,
        observed_json=seal(conn, "schedules", "observed_json", (name,), observed_json),
        pending_json=seal(conn, "schedules", "pending_json", (name,), pending_json),
        cursor=to_db(cursor),
        now=to_db(now),
        name=name,
    )


@statement
def _set_observed(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, case, update

    from agentctl.store.schedule_tables import schedules

    c = schedules.c
    cursor: Any = bindparam("cursor")
    return (
        update(schedules)
        .where(c.name == bindparam("name"))
        .values(
            observed_json=bindparam("observed_json"),
            pending_json=bindparam("pending_json"),
            cursor_at=case((c.cursor_at < cursor, cursor), else_=c.cursor_at),
            updated_at=bindparam("now"),
        )
    )


def observations(conn: SqlRunner, name: str, limit: int) -> list[Observation]:
    """A monitor's observations, newest first."""
    rows = _observations.run(conn, name=name, limit=limit)
    return [
        Observation(
            from_db(r[0]),
            str(r[1]),
            str(unseal(conn, "monitor_observations", "value_json", (name, r[0]), r[2])),
            str(r[3]),
        )
        for r in rows
    ]


@statement
def _observations(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.schedule_tables import monitor_observations

    c = monitor_observations.c
    return (
        select(c.slot_at, c.digest, c.value_json, c.outcome)
        .where(c.monitor_name == bindparam("name"))
        .order_by(c.slot_at.desc())
        .limit(bindparam("limit"))
    )
