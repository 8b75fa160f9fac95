"""Approval and question rows. Every function runs in the caller's transaction; a
decision is written through :func:`agentctl.store.transitions.guarded_update`."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.rows import columns_sql, row_dict, row_dicts
from agentctl.store.sealing import seal, unseal_record, unseal_records
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = ["APPROVAL_COLUMNS", "approval", "approvals", "count", "insert_approval"]

APPROVAL_COLUMNS = (
    "id",
    "format_version",
    "run_id",
    "task_id",
    "effect_id",
    "kind",
    "prompt",
    "choices_json",
    "answer_schema_json",
    "input_json",
    "risk",
    "status",
    "resolver",
    "answer_json",
    "reason",
    "created_at",
    "resolved_at",
)
_TIMES = frozenset({"created_at", "resolved_at"})
_COLUMNS = columns_sql(APPROVAL_COLUMNS)


def approval(conn: SqlRunner, approval_id: str) -> dict[str, Any] | None:
    """The approval's row as ``{column: value}`` (timestamps naive UTC), or None."""
    row = conn.exec_driver_sql(
        f"SELECT {_COLUMNS} FROM approvals WHERE id = ?",  # noqa: S608 - fixed columns
        (approval_id,),
    ).first()
    return unseal_record(conn, "approvals", row_dict(row, APPROVAL_COLUMNS, _TIMES))


def approvals(
    conn: SqlRunner, run_id: str | None = None, *, status: str | None = None
) -> list[dict[str, Any]]:
    """Approvals of one run (or all) in one status (or any), oldest first."""
    where: list[str] = []
    params: list[Any] = []
    if run_id is not None:
        where.append("run_id = ?")
        params.append(run_id)
    if status is not None:
        where.append("status = ?")
        params.append(status)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    rows = conn.exec_driver_sql(
        f"SELECT {_COLUMNS} FROM approvals{clause} ORDER BY created_at, id",  # noqa: S608
        tuple(params),
    )
    return unseal_records(conn, "approvals", row_dicts(rows, APPROVAL_COLUMNS, _TIMES))


def count(conn: SqlRunner, run_id: str, *, status: str) -> int:
    """How many approvals of a run are in ``status``: metadata, readable without the
    encryption key (docs/encryption.md), unlike the approvals themselves."""
    row = conn.exec_driver_sql(
        "SELECT COUNT(*) FROM approvals WHERE run_id = ? AND status = ?", (run_id, status)
    ).first()
    return 0 if row is None else int(row[0])


def insert_approval(
    conn: SqlRunner,
    *,
    approval_id: str,
    run_id: str,
    task_id: str,
    effect_id: str | None,
    kind: str,
    prompt: str,
    choices_json: str | None,
    answer_schema_json: str | None,
    input_json: str | None,
    risk: str | None,
    now: datetime,
) -> None:
    """A new ``pending`` approval or question."""
    conn.exec_driver_sql(
        "INSERT INTO approvals (id, format_version, run_id, task_id, effect_id, kind, prompt, "
        "choices_json, answer_schema_json, input_json, risk, status, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?)",
        (
            approval_id,
            FORMAT_VERSION,
            run_id,
            task_id,
            effect_id,
            kind,
            seal(conn, "approvals", "prompt", (approval_id,), prompt),
            choices_json,
            answer_schema_json,
            seal(conn, "approvals", "input_json", (approval_id,), input_json),
            risk,
            to_db(now),
        ),
    )
