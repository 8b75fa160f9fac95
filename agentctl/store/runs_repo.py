"""Run rows: creating a run, reading it whole or in part, listing runs.

Every function runs in the caller's transaction. Status changes of a run go through
:func:`agentctl.store.transitions.guarded_update`; ownership columns through
:mod:`agentctl.store.ownership`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.records import check_format_version, unknown_run
from agentctl.store.rows import naive, row_dict
from agentctl.store.sealing import seal, unseal, unseal_record
from agentctl.store.statements import Statement, columns, statement
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

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
    _insert_run.run(
        conn,
        id=new.id,
        workflow_name=new.workflow_name,
        workflow_digest=new.workflow_digest,
        plan_digest=new.plan_digest,
        plan_json=new.plan_json,
        workflow_json=new.workflow_json,
        workflow_file=new.workflow_file,
        inputs_json=seal(conn, "runs", "inputs_json", (new.id,), new.inputs_json),
        mode=new.mode,
        workspace=new.workspace,
        source_run_id=new.source_run_id,
        relation=new.relation,
        reason=new.reason,
        created_at=to_db(new.created_at),
        deadline_at=to_db(new.deadline_at),
    )


_GIVEN_AT_INSERT = (
    "id",
    "workflow_name",
    "workflow_digest",
    "plan_digest",
    "plan_json",
    "workflow_json",
    "workflow_file",
    "inputs_json",
    "mode",
    "workspace",
    "source_run_id",
    "relation",
    "reason",
    "created_at",
    "deadline_at",
)


@statement
def _insert_run(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, insert

    from agentctl.store.run_tables import runs

    return insert(runs).values(
        format_version=FORMAT_VERSION,
        status="running",
        updated_at=bindparam("created_at"),
        **{name: bindparam(name) for name in _GIVEN_AT_INSERT},
    )


def _of_run(*names: str) -> Statement:
    """``SELECT names FROM runs WHERE id = :run_id``."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, select

        from agentctl.store.run_tables import runs

        return select(*columns(runs, names)).where(runs.c.id == bindparam("run_id"))

    return Statement(build, f"of_run{names}")


_RUN = _of_run(*RUN_COLUMNS)
_RUN_STATE = _of_run("status", "output_json", "error_json", "format_version")
_TRACE_IDS = _of_run("trace_id", "span_id")
_CANCEL_FLAG = _of_run("cancel_requested", "cancel_reason")


def run(conn: SqlRunner, run_id: str) -> dict[str, Any]:
    """The run's row as ``{column: value}`` (timestamps naive UTC), or exit 5 naming it."""
    row = row_dict(_RUN.run(conn, run_id=run_id).first(), RUN_COLUMNS, _TIMES)
    if row is None:
        raise unknown_run(run_id)
    check_format_version("run", run_id, int(row["format_version"]))
    opened = unseal_record(conn, "runs", row)
    assert opened is not None
    return opened


def run_state(conn: SqlRunner, run_id: str) -> tuple[str, str | None, str | None]:
    """``(status, output_json, error_json)`` without reading the plan; exit 5 when unknown."""
    row = _RUN_STATE.run(conn, run_id=run_id).first()
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
    row = _TRACE_IDS.run(conn, run_id=run_id).first()
    if row is None or not row[0] or not row[1]:
        return None
    return str(row[0]), str(row[1])


def cancel_flag(conn: SqlRunner, run_id: str) -> tuple[bool, str | None] | None:
    """``(cancel requested, reason)`` of a run (a one-column read), None when unknown."""
    row = _CANCEL_FLAG.run(conn, run_id=run_id).first()
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
    listing = _list_runs(bool(schedule), since is not None, bool(status), bool(workflow))
    rows = listing.run(
        conn,
        schedule=schedule,
        since=to_db(since),
        status=status,
        workflow=workflow,
        limit=limit,
    )
    out: list[RunListRow] = []
    for row in rows:
        created, updated = naive(row[5]), naive(row[6])
        assert created is not None and updated is not None
        out.append(RunListRow(row[0], row[1], row[2], row[3], row[4], created, updated))
    return out


@lru_cache(maxsize=16)
def _list_runs(schedule: bool, since: bool, status: bool, workflow: bool) -> Statement:
    """The statement of :func:`list_runs` with the filters it was given."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, select

        from agentctl.store.run_tables import runs
        from agentctl.store.schedule_tables import schedule_firings

        c = runs.c
        query = select(
            c.id, c.workflow_name, c.status, c.mode, c.source_run_id, c.created_at, c.updated_at
        )
        if schedule:
            fired = select(schedule_firings.c.run_id).where(
                schedule_firings.c.schedule_name == bindparam("schedule")
            )
            query = query.where(c.id.in_(fired))
        if since:
            query = query.where(c.created_at >= bindparam("since"))
        if status:
            query = query.where(c.status == bindparam("status"))
        if workflow:
            query = query.where(c.workflow_name == bindparam("workflow"))
        return query.order_by(c.created_at.desc(), c.id.desc()).limit(bindparam("limit"))

    return Statement(build, f"list_runs{(schedule, since, status, workflow)}")
