"""Approval and question rows. Every function runs in the caller's transaction; a
decision is written through :func:`agentctl.store.transitions.guarded_update`."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.rows import row_dict, row_dicts
from agentctl.store.sealing import seal, unseal_record, unseal_records
from agentctl.store.statements import Statement, columns, statement
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

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


def approval(conn: SqlRunner, approval_id: str) -> dict[str, Any] | None:
    """The approval's row as ``{column: value}`` (timestamps naive UTC), or None."""
    row = _approval.run(conn, approval_id=approval_id).first()
    return unseal_record(conn, "approvals", row_dict(row, APPROVAL_COLUMNS, _TIMES))


@statement
def _approval(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.journal_tables import approvals

    return select(*columns(approvals, APPROVAL_COLUMNS)).where(
        approvals.c.id == bindparam("approval_id")
    )


def approvals(
    conn: SqlRunner, run_id: str | None = None, *, status: str | None = None
) -> list[dict[str, Any]]:
    """Approvals of one run (or all) in one status (or any), oldest first."""
    listing = _approvals(run_id is not None, status is not None)
    rows = listing.run(conn, run_id=run_id, status=status)
    return unseal_records(conn, "approvals", row_dicts(rows, APPROVAL_COLUMNS, _TIMES))


@lru_cache(maxsize=4)
def _approvals(of_run: bool, in_status: bool) -> Statement:
    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, select

        from agentctl.store.journal_tables import approvals

        c = approvals.c
        query = select(*columns(approvals, APPROVAL_COLUMNS))
        if of_run:
            query = query.where(c.run_id == bindparam("run_id"))
        if in_status:
            query = query.where(c.status == bindparam("status"))
        return query.order_by(c.created_at, c.id)

    return Statement(build, f"approvals({of_run}, {in_status})")


def count(conn: SqlRunner, run_id: str, *, status: str) -> int:
    """How many approvals of a run are in ``status``: metadata, readable without the
    encryption key (docs/encryption.md), unlike the approvals themselves."""
    row = _count.run(conn, run_id=run_id, status=status).first()
    return 0 if row is None else int(row[0])


@statement
def _count(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, func, select

    from agentctl.store.journal_tables import approvals

    c = approvals.c
    return select(func.count()).where(
        c.run_id == bindparam("run_id"), c.status == bindparam("status")
    )


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
    _insert_approval.run(
        conn,
        id=approval_id,
        run_id=run_id,
        task_id=task_id,
        effect_id=effect_id,
        kind=kind,
        prompt=seal(conn, "approvals", "prompt", (approval_id,), prompt),
        choices_json=choices_json,
        answer_schema_json=answer_schema_json,
        input_json=seal(conn, "approvals", "input_json", (approval_id,), input_json),
        risk=risk,
        created_at=to_db(now),
    )


@statement
def _insert_approval(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, insert

    from agentctl.store.journal_tables import approvals

    given: tuple[str, ...] = ("id", "run_id", "task_id", "effect_id", "kind", "prompt")
    given += ("choices_json", "answer_schema_json", "input_json", "risk", "created_at")
    return insert(approvals).values(
        format_version=FORMAT_VERSION,
        status="pending",
        **{name: bindparam(name) for name in given},
    )
