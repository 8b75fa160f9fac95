"""Run rows: creating a run, reading it whole or in part, listing runs.

Every function runs in the caller's transaction. Status changes of a run go through
:func:`agentctl.store.transitions.guarded_update`; ownership columns through
:mod:`agentctl.store.ownership`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.records import check_format_version, unknown_run
from agentctl.store.rows import columns_sql, naive, row_dict
from agentctl.store.sealing import seal, unseal, unseal_record
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = [
    "RUN_COLUMNS",
    "NewRun",
    "RunListRow",
    "cancel_flag",
    "insert_run",
    "list_runs",
    "run",
    "run_state",
    "trace_ids",
]

RUN_COLUMNS = (
    "id",
    "format_version",
    "workflow_name",
    "workflow_digest",
    "plan_digest",
    "plan_json",
    "workflow_json",
    "workflow_file",
    "inputs_json",
    "mode",
    "status",
    "workspace",
    "source_run_id",
    "relation",
    "reason",
    "output_json",
    "error_json",
    "created_at",
    "updated_at",
    "deadline_at",
    "cancel_requested",
    "cancel_reason",
    "owner_id",
    "owner_lease_expires_at",
    "owner_token",
)
_TIMES = frozenset({"created_at", "updated_at", "deadline_at", "owner_lease_expires_at"})
_COLUMNS = columns_sql(RUN_COLUMNS)


@dataclass(frozen=True, slots=True)
class NewRun:
    """What a new run is created with (it starts ``running``)."""

    id: str
    workflow_name: str
    workflow_digest: str
    plan_digest: str
    plan_json: str
    workflow_json: str
    workflow_file: str | None
    inputs_json: str
    mode: str
    workspace: str | None
    source_run_id: str | None
    relation: str | None
    reason: str | None
    created_at: datetime
    deadline_at: datetime | None


@dataclass(frozen=True, slots=True)
class RunListRow:
    id: str
    workflow_name: str
    status: str
    mode: str
    source_run_id: str | None
    created_at: datetime
    updated_at: datetime


def insert_run(conn: SqlRunner, new: NewRun) -> None:
    conn.exec_driver_sql(
        "INSERT INTO runs (id, format_version, workflow_name, workflow_digest, plan_digest, "
        "plan_json, workflow_json, workflow_file, inputs_json, mode, status, workspace, "
        "source_run_id, relation, reason, created_at, updated_at, deadline_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?)",
        (
            new.id,
            FORMAT_VERSION,
            new.workflow_name,
            new.workflow_digest,
            new.plan_digest,
            new.plan_json,
            new.workflow_json,
            new.workflow_file,
            seal(conn, "runs", "inputs_json", (new.id,), new.inputs_json),
            new.mode,
            new.workspace,
            new.source_run_id,
            new.relation,
            new.reason,
            to_db(new.created_at),
            to_db(new.created_at),
            to_db(new.deadline_at),
        ),
    )


def run(conn: SqlRunner, run_id: str) -> dict[str, Any]:
    """The run's row as ``{column: value}`` (timestamps naive UTC), or exit 5 naming it."""
    row = row_dict(
        conn.exec_driver_sql(
            f"SELECT {_COLUMNS} FROM runs WHERE id = ?",  # noqa: S608 - fixed columns
            (run_id,),
        ).first(),
        RUN_COLUMNS,
        _TIMES,
    )
    if row is None:
        raise unknown_run(run_id)
    check_format_version("run", run_id, int(row["format_version"]))
    opened = unseal_record(conn, "runs", row)
    assert opened is not None
    return opened


def run_state(conn: SqlRunner, run_id: str) -> tuple[str, str | None, str | None]:
    """``(status, output_json, error_json)`` without reading the plan; exit 5 when unknown."""
    row = conn.exec_driver_sql(
        "SELECT status, output_json, error_json, format_version FROM runs WHERE id = ?",
        (run_id,),
    ).first()
    if row is None:
        raise unknown_run(run_id)
    check_format_version("run", run_id, int(row[3]))
    key = (run_id,)
    return (
        str(row[0]),
        unseal(conn, "runs", "output_json", key, row[1]),
        unseal(conn, "runs", "error_json", key, row[2]),
    )


def trace_ids(conn: SqlRunner, run_id: str) -> tuple[str, str] | None:
    """``(trace id, span id)`` of the run's latest execution root span, None when unknown
    or never traced."""
    row = conn.exec_driver_sql("SELECT trace_id, span_id FROM runs WHERE id = ?", (run_id,)).first()
    if row is None or not row[0] or not row[1]:
        return None
    return str(row[0]), str(row[1])


def cancel_flag(conn: SqlRunner, run_id: str) -> tuple[bool, str | None] | None:
    """``(cancel requested, reason)`` of a run (a one-column read), None when unknown."""
    row = conn.exec_driver_sql(
        "SELECT cancel_requested, cancel_reason FROM runs WHERE id = ?", (run_id,)
    ).first()
    return None if row is None else (bool(row[0]), row[1])


def list_runs(
    conn: SqlRunner,
    *,
    status: str | None,
    workflow: str | None,
    limit: int,
    schedule: str | None = None,
    since: datetime | None = None,
) -> list[RunListRow]:
    """Newest first, optionally of one status, one workflow and one schedule, created at
    or after ``since``."""
    where: list[str] = []
    params: list[Any] = []
    if schedule:
        where.append("id IN (SELECT run_id FROM schedule_firings WHERE schedule_name = ?)")
        params.append(schedule)
    if since is not None:
        where.append("created_at >= ?")
        params.append(to_db(since))
    if status:
        where.append("status = ?")
        params.append(status)
    if workflow:
        where.append("workflow_name = ?")
        params.append(workflow)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    params.append(limit)
    rows = conn.exec_driver_sql(
        "SELECT id, workflow_name, status, mode, source_run_id, created_at, updated_at "
        f"FROM runs{clause} ORDER BY created_at DESC, id DESC LIMIT ?",  # noqa: S608
        tuple(params),
    )
    out: list[RunListRow] = []
    for row in rows:
        created, updated = naive(row[5]), naive(row[6])
        assert created is not None and updated is not None
        out.append(RunListRow(row[0], row[1], row[2], row[3], row[4], created, updated))
    return out
