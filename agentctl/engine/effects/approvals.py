"""Approvals and questions: durable requests a person resolves between two processes.

An approval gates one effect (id ``approval-`` + the first 16 hex of the effect id); a
question belongs to a ``builtin.ask`` task. Both park the run (exit 3) until resolved with
``agentctl approvals approve|reject|answer``; the next ``resume`` reads the decision.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any

from pydantic import Field
from pydantic.dataclasses import dataclass as record

from agentctl.digest import canonical_json
from agentctl.error_codes import ErrorCode
from agentctl.errors import NotFoundError, UsageError
from agentctl.store import approvals_repo
from agentctl.store.engine import SqlRunner
from agentctl.store.records import check_format_version
from agentctl.store.states import ApprovalState
from agentctl.store.transitions import guarded_update
from agentctl.typed_records import CAMEL, CamelRecord, IsoDateTime

__all__ = [
    "Approval",
    "create_approval",
    "get_approval",
    "list_approvals",
    "require_approval",
    "resolve_approval",
]


@record(frozen=True, slots=True, config=CAMEL)
class Approval(CamelRecord):
    id: Annotated[str, Field(alias="approvalId")]
    run_id: str
    task_id: str
    effect_id: str | None
    kind: str
    prompt: str
    choices: list[Any] | None
    answer_schema: dict[str, Any] | None
    input: Any
    risk: str | None
    status: ApprovalState
    resolver: str | None
    answer: Any
    reason: str | None
    created_at: IsoDateTime
    resolved_at: IsoDateTime | None


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _approval(row: Mapping[str, Any]) -> Approval:
    check_format_version("approval", row["id"], int(row["format_version"]))
    return Approval(
        id=row["id"],
        run_id=row["run_id"],
        task_id=row["task_id"],
        effect_id=row["effect_id"],
        kind=row["kind"],
        prompt=row["prompt"],
        choices=_loads(row["choices_json"]),
        answer_schema=_loads(row["answer_schema_json"]),
        input=_loads(row["input_json"]),
        risk=row["risk"],
        status=row["status"],
        resolver=row["resolver"],
        answer=_loads(row["answer_json"]),
        reason=row["reason"],
        created_at=row["created_at"],
        resolved_at=row["resolved_at"],
    )


def create_approval(
    conn: SqlRunner,
    *,
    approval_id: str,
    run_id: str,
    task_id: str,
    kind: str,
    prompt: str,
    now: datetime,
    effect_id: str | None = None,
    risk: str | None = None,
    input: Any = None,
    choices: list[Any] | None = None,
    answer_schema: dict[str, Any] | None = None,
) -> Approval:
    existing = get_approval(conn, approval_id)
    if existing is not None:
        return existing
    approvals_repo.insert_approval(
        conn,
        approval_id=approval_id,
        run_id=run_id,
        task_id=task_id,
        effect_id=effect_id,
        kind=kind,
        prompt=prompt,
        choices_json=None if choices is None else canonical_json(choices),
        answer_schema_json=None if answer_schema is None else canonical_json(answer_schema),
        input_json=None if input is None else canonical_json(input),
        risk=risk,
        now=now,
    )
    found = get_approval(conn, approval_id)
    assert found is not None
    return found


def get_approval(conn: SqlRunner, approval_id: str) -> Approval | None:
    row = approvals_repo.approval(conn, approval_id)
    return None if row is None else _approval(row)


def require_approval(conn: SqlRunner, approval_id: str) -> Approval:
    found = get_approval(conn, approval_id)
    if found is None:
        raise NotFoundError(
            f"unknown approval {approval_id!r}",
            hint="list pending approvals with `agentctl approvals list`",
        )
    return found


def list_approvals(
    conn: SqlRunner, run_id: str | None = None, *, status: str | None = None
) -> list[Approval]:
    rows = approvals_repo.approvals(conn, run_id, status=status)
    return [_approval(row) for row in rows]


def resolve_approval(
    conn: SqlRunner,
    approval_id: str,
    *,
    status: ApprovalState,
    actor: str,
    reason: str | None,
    now: datetime,
    answer: Any = None,
) -> Approval:
    """Record a decision once; a second, different decision is refused (exit 2)."""
    current = require_approval(conn, approval_id)
    if current.status != ApprovalState.PENDING:
        if current.status == status and current.answer == answer:
            return current
        raise UsageError(
            f"approval {approval_id} is already {current.status} by {current.resolver}",
            code=ErrorCode.APPROVAL_RESOLVED,
            hint=f"decisions are final; inspect the run with `agentctl inspect {current.run_id}`",
        )
    guarded_update(
        conn,
        "approval",
        (approval_id,),
        {
            "status": status,
            "resolver": actor,
            "reason": reason,
            "answer_json": None if answer is None else canonical_json(answer),
            "resolved_at": now,
        },
    )
    return require_approval(conn, approval_id)
