"""Effect journal rows: effects, their reconciliations and the tool calls they carry.

Every function runs inside the caller's transaction (``Store.write()`` / ``Store.read()``
or the executor's driver session): the engine decides what commits together. A tool call's
terminal status is written by :func:`finish_tool_call` in the same transaction as its
effect's (the gate calls both inside one ``write()``). Status changes of an effect go
through :func:`agentctl.store.transitions.guarded_update`, not through this module.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.rows import row_dict, row_dicts
from agentctl.store.sealing import seal, unseal, unseal_record, unseal_records
from agentctl.store.statements import Statement, columns, one_of, statement
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from sqlalchemy import Select
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.engine import SqlRunner

__all__ = [
    "EFFECT_COLUMNS",
    "RECONCILIATION_COLUMNS",
    "append_compensated",
    "effect",
    "effect_at",
    "effect_ids_with_prefix",
    "effects",
    "finish_tool_call",
    "insert_effect",
    "insert_reconciliation",
    "insert_tool_call",
    "latest_reconciliation",
    "reconciliations",
    "tool_calls",
    "unsettled_effect_ids",
]

EFFECT_COLUMNS = (
    "id",
    "format_version",
    "run_id",
    "task_id",
    "attempt",
    "ordinal",
    "operation",
    "input_digest",
    "effect_class",
    "idempotency",
    "risk",
    "idempotency_key",
    "status",
    "request_json",
    "result_json",
    "error_json",
    "confirmed",
    "trace_id",
    "requested_at",
    "started_at",
    "finished_at",
)
_EFFECT_TIMES = frozenset({"requested_at", "started_at", "finished_at"})

RECONCILIATION_COLUMNS = (
    "id",
    "format_version",
    "effect_id",
    "status",
    "reason",
    "actor",
    "evidence",
    "result_json",
    "result_validated",
    "compensation_effect_id",
    "supersedes_id",
    "created_at",
)
_RECONCILIATION_TIMES = frozenset({"created_at"})


# -- effects ----------------------------------------------------------------------------


def effect(conn: SqlRunner, effect_id: str) -> dict[str, Any] | None:
    """The effect's row as ``{column: value}`` (timestamps naive UTC), or None."""
    row = _effect.run(conn, effect_id=effect_id).first()
    return unseal_record(conn, "effects", row_dict(row, EFFECT_COLUMNS, _EFFECT_TIMES))


@statement
def _effect(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.tables import effects

    return select(*columns(effects, EFFECT_COLUMNS)).where(effects.c.id == bindparam("effect_id"))


def effect_at(
    conn: SqlRunner, run_id: str, task_id: str, attempt: int, ordinal: int
) -> dict[str, Any] | None:
    """The effect journaled at one position of one attempt (the first, should a database
    written before positions were checked hold two), or None."""
    row = _effect_at.run(
        conn, run_id=run_id, task_id=task_id, attempt=attempt, ordinal=ordinal
    ).first()
    return unseal_record(conn, "effects", row_dict(row, EFFECT_COLUMNS, _EFFECT_TIMES))


@statement
def _effect_at(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.tables import effects

    c = effects.c
    return (
        select(*columns(effects, EFFECT_COLUMNS))
        .where(
            c.run_id == bindparam("run_id"),
            c.task_id == bindparam("task_id"),
            c.attempt == bindparam("attempt"),
            c.ordinal == bindparam("ordinal"),
        )
        .order_by(c.requested_at, c.id)
        .limit(1)
    )


def effect_ids_with_prefix(conn: SqlRunner, prefix: str, limit: int = 2) -> list[str]:
    rows = _effect_ids_like.run(conn, pattern=prefix + "%", limit=limit)
    return [str(row[0]) for row in rows]


@statement
def _effect_ids_like(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.tables import effects

    return (
        select(effects.c.id)
        .where(effects.c.id.like(bindparam("pattern")))
        .limit(bindparam("limit"))
    )


def effects(
    conn: SqlRunner,
    run_id: str,
    *,
    task_id: str | None = None,
    statuses: tuple[str, ...] = (),
) -> list[dict[str, Any]]:
    """A run's effects in journal order (requested, then task, attempt and ordinal)."""
    values = {f"status_{n}": status for n, status in enumerate(statuses)}
    rows = _effects_of(task_id is not None, len(statuses)).run(
        conn, run_id=run_id, task_id=task_id, **values
    )
    return unseal_records(conn, "effects", row_dicts(rows, EFFECT_COLUMNS, _EFFECT_TIMES))


@lru_cache(maxsize=32)
def _effects_of(of_task: bool, statuses: int) -> Statement:
    """The statement of :func:`effects`, per shape: one task or all, how many statuses."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, select

        from agentctl.store.tables import effects

        c = effects.c
        query = select(*columns(effects, EFFECT_COLUMNS)).where(c.run_id == bindparam("run_id"))
        if of_task:
            query = query.where(c.task_id == bindparam("task_id"))
        if statuses:
            query = query.where(c.status.in_([bindparam(f"status_{n}") for n in range(statuses)]))
        return query.order_by(c.requested_at, c.task_id, c.attempt, c.ordinal)

    return Statement(build, f"effects_of({of_task}, {statuses})")


def unsettled_effect_ids(conn: SqlRunner, run_id: str | None = None) -> list[str]:
    """Ids of started or uncertain effects (of one run, or of all), oldest request first."""
    if run_id is None:
        rows = _unsettled.run(conn)
    else:
        rows = _unsettled_of_run.run(conn, run_id=run_id)
    return [str(row[0]) for row in rows]


def _unsettled_query() -> Select[tuple[str]]:
    from sqlalchemy import select

    from agentctl.store.tables import effects

    return (
        select(effects.c.id)
        .where(one_of(effects.c.status, ("started", "uncertain")))
        .order_by(effects.c.requested_at)
    )


@statement
def _unsettled(_: SqlDialect) -> Executable:
    return _unsettled_query()


@statement
def _unsettled_of_run(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.tables import effects

    return _unsettled_query().where(effects.c.run_id == bindparam("run_id"))


def insert_effect(
    conn: SqlRunner,
    *,
    effect_id: str,
    run_id: str,
    task_id: str,
    attempt: int,
    ordinal: int,
    operation: str,
    input_digest: str,
    effect_class: str,
    idempotency: str,
    risk: str,
    request_json: str | None,
    now: datetime,
    trace_ids: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """Journal an effect as ``requested`` (its idempotency key is its id); ``trace_ids``
    are those of its span when telemetry is on. Returns the row as :func:`effect` would
    read it back (without the round trip of reading it)."""
    stamp = to_db(now)
    trace_id = None if trace_ids is None else trace_ids[0]
    _insert_effect.run(
        conn,
        id=effect_id,
        run_id=run_id,
        task_id=task_id,
        attempt=attempt,
        ordinal=ordinal,
        operation=operation,
        input_digest=input_digest,
        effect_class=effect_class,
        idempotency=idempotency,
        risk=risk,
        request_json=seal(conn, "effects", "request_json", (effect_id,), request_json),
        requested_at=stamp,
        trace_id=trace_id,
        span_id=None if trace_ids is None else trace_ids[1],
    )
    inserted = {
        "id": effect_id,
        "format_version": FORMAT_VERSION,
        "run_id": run_id,
        "task_id": task_id,
        "attempt": attempt,
        "ordinal": ordinal,
        "operation": operation,
        "input_digest": input_digest,
        "effect_class": effect_class,
        "idempotency": idempotency,
        "risk": risk,
        "idempotency_key": effect_id,
        "status": "requested",
        "request_json": request_json,
        "result_json": None,
        "error_json": None,
        "confirmed": 0,
        "trace_id": trace_id,
        "requested_at": stamp,
        "started_at": None,
        "finished_at": None,
    }
    found = row_dict(tuple(inserted[c] for c in EFFECT_COLUMNS), EFFECT_COLUMNS, _EFFECT_TIMES)
    assert found is not None
    return found


@statement
def _insert_effect(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, insert

    from agentctl.store.tables import effects

    given = (
        "id",
        "run_id",
        "task_id",
        "attempt",
        "ordinal",
        "operation",
        "input_digest",
        "effect_class",
        "idempotency",
        "risk",
        "request_json",
        "requested_at",
        "trace_id",
        "span_id",
    )
    return insert(effects).values(
        format_version=FORMAT_VERSION,
        idempotency_key=bindparam("id"),  # an effect's idempotency key is its id
        status="requested",
        confirmed=0,
        **{name: bindparam(name) for name in given},
    )


# -- reconciliations --------------------------------------------------------------------


def latest_reconciliation(conn: SqlRunner, effect_id: str) -> dict[str, Any] | None:
    row = _latest_reconciliation.run(conn, effect_id=effect_id).first()
    return unseal_record(
        conn, "reconciliations", row_dict(row, RECONCILIATION_COLUMNS, _RECONCILIATION_TIMES)
    )


@statement
def _latest_reconciliation(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.tables import reconciliations

    c = reconciliations.c
    return (
        select(*columns(reconciliations, RECONCILIATION_COLUMNS))
        .where(c.effect_id == bindparam("effect_id"))
        .order_by(c.id.desc())
        .limit(1)
    )


def reconciliations(conn: SqlRunner, effect_id: str) -> list[dict[str, Any]]:
    rows = _reconciliations.run(conn, effect_id=effect_id)
    return unseal_records(
        conn, "reconciliations", row_dicts(rows, RECONCILIATION_COLUMNS, _RECONCILIATION_TIMES)
    )


@statement
def _reconciliations(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.tables import reconciliations

    c = reconciliations.c
    return (
        select(*columns(reconciliations, RECONCILIATION_COLUMNS))
        .where(c.effect_id == bindparam("effect_id"))
        .order_by(c.id)
    )


def insert_reconciliation(
    conn: SqlRunner,
    effect_id: str,
    *,
    status: str,
    reason: str,
    actor: str,
    evidence: str | None,
    result_json: str | None,
    result_validated: bool,
    compensation_effect_id: str | None,
    supersedes_id: int | None,
    now: datetime,
) -> dict[str, Any]:
    """Append one conclusion (append-only; the latest wins) and return its row."""
    # RETURNING (SQLite 3.35+, PostgreSQL) names the new row on both dialects. The payload
    # is sealed under the new row's id, so it is written once that id is known (same
    # transaction: nothing is ever stored in clear).
    inserted = _insert_reconciliation.run(
        conn,
        effect_id=effect_id,
        status=status,
        reason=reason,
        actor=actor,
        result_validated=int(result_validated),
        compensation_effect_id=compensation_effect_id,
        supersedes_id=supersedes_id,
        created_at=to_db(now),
    )
    new_id = inserted.first()[0]
    if evidence is not None or result_json is not None:
        record = (new_id,)
        _seal_reconciliation.run(
            conn,
            evidence=seal(conn, "reconciliations", "evidence", record, evidence),
            result_json=seal(conn, "reconciliations", "result_json", record, result_json),
            id=new_id,
        )
    row = _reconciliation.run(conn, id=new_id).first()
    found = unseal_record(
        conn, "reconciliations", row_dict(row, RECONCILIATION_COLUMNS, _RECONCILIATION_TIMES)
    )
    assert found is not None
    return found


@statement
def _insert_reconciliation(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, insert

    from agentctl.store.tables import reconciliations

    given = (
        "effect_id",
        "status",
        "reason",
        "actor",
        "result_validated",
        "compensation_effect_id",
        "supersedes_id",
        "created_at",
    )
    return (
        insert(reconciliations)
        .values(format_version=FORMAT_VERSION, **{name: bindparam(name) for name in given})
        .returning(reconciliations.c.id)
    )


@statement
def _seal_reconciliation(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.tables import reconciliations

    return (
        update(reconciliations)
        .where(reconciliations.c.id == bindparam("id"))
        .values(evidence=bindparam("evidence"), result_json=bindparam("result_json"))
    )


@statement
def _reconciliation(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.tables import reconciliations

    return select(*columns(reconciliations, RECONCILIATION_COLUMNS)).where(
        reconciliations.c.id == bindparam("id")
    )


def append_compensated(
    conn: SqlRunner,
    effect_id: str,
    *,
    reason: str,
    actor: str,
    compensation_effect_id: str | None,
    now: datetime,
) -> None:
    """Append ``compensated`` to an effect, superseding its latest conclusion."""
    previous = _latest_reconciliation.run(conn, effect_id=effect_id).first()
    _insert_reconciliation.run(
        conn,
        effect_id=effect_id,
        status="compensated",
        reason=reason,
        actor=actor,
        result_validated=0,
        compensation_effect_id=compensation_effect_id,
        supersedes_id=None if previous is None else previous[0],
        created_at=to_db(now),
    )


# -- tool calls -------------------------------------------------------------------------


def insert_tool_call(
    conn: SqlRunner,
    *,
    effect_id: str,
    run_id: str,
    task_id: str,
    tool: str,
    arguments_json: str,
    now: datetime,
) -> None:
    """Record a model's tool call as ``requested`` (once: its id is its effect's)."""
    _insert_tool_call.run(
        conn,
        effect_id=effect_id,
        run_id=run_id,
        task_id=task_id,
        tool=tool,
        arguments_json=seal(conn, "tool_calls", "arguments_json", (effect_id,), arguments_json),
        created_at=to_db(now),
    )


@statement
def _insert_tool_call(sql: SqlDialect) -> Executable:
    from sqlalchemy import bindparam

    from agentctl.store.tables import tool_calls

    given = ("run_id", "task_id", "effect_id", "tool", "arguments_json", "created_at")
    return sql.insert_ignoring(tool_calls).values(
        id=bindparam("effect_id"),  # a tool call's id is its effect's
        format_version=1,
        status="requested",
        **{name: bindparam(name) for name in given},
    )


def finish_tool_call(
    conn: SqlRunner,
    effect_id: str,
    *,
    status: str,
    result_json: str | None,
    error_json: str | None,
    now: datetime,
) -> None:
    """The tool call's terminal status: call it in the transaction of its effect's."""
    _finish_tool_call.run(
        conn,
        status=status,
        result_json=seal(conn, "tool_calls", "result_json", (effect_id,), result_json),
        error_json=seal(conn, "tool_calls", "error_json", (effect_id,), error_json),
        finished_at=to_db(now),
        effect_id=effect_id,
    )


@statement
def _finish_tool_call(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.tables import tool_calls

    given = ("status", "result_json", "error_json", "finished_at")
    return (
        update(tool_calls)
        .where(tool_calls.c.effect_id == bindparam("effect_id"))
        .values(**{name: bindparam(name) for name in given})
    )


def tool_calls(conn: SqlRunner, run_id: str) -> list[tuple[str, str, str, str, str]]:
    """``(effect_id, task_id, tool, status, arguments_json)`` of a run's tool calls."""
    rows = _tool_calls.run(conn, run_id=run_id)
    # A tool call's id is its effect's id.
    return [
        (row[0], row[1], row[2], row[3], unseal(conn, "tool_calls", "arguments_json", key, row[4]))
        for row in rows
        for key in [(row[0],)]
    ]


@statement
def _tool_calls(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.tables import tool_calls

    c = tool_calls.c
    return (
        select(c.effect_id, c.task_id, c.tool, c.status, c.arguments_json)
        .where(c.run_id == bindparam("run_id"))
        .order_by(c.created_at, c.id)
    )
