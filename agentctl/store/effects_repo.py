"""Effect journal rows: effects, their reconciliations and the tool calls they carry.

Every function runs inside the caller's transaction (``Store.write()`` / ``Store.read()``
or the executor's driver session): the engine decides what commits together. A tool call's
terminal status is written by :func:`finish_tool_call` in the same transaction as its
effect's (the gate calls both inside one ``write()``). Status changes of an effect go
through :func:`agentctl.store.transitions.guarded_update`, not through this module.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.rows import columns_sql, row_dict, row_dicts
from agentctl.store.sealing import seal, unseal, unseal_record, unseal_records
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
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
_EFFECTS = columns_sql(EFFECT_COLUMNS)

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
_RECONCILIATIONS = columns_sql(RECONCILIATION_COLUMNS)


# -- effects ----------------------------------------------------------------------------


def effect(conn: SqlRunner, effect_id: str) -> dict[str, Any] | None:
    """The effect's row as ``{column: value}`` (timestamps naive UTC), or None."""
    row = conn.exec_driver_sql(
        f"SELECT {_EFFECTS} FROM effects WHERE id = ?",  # noqa: S608 - fixed columns
        (effect_id,),
    ).first()
    return unseal_record(conn, "effects", row_dict(row, EFFECT_COLUMNS, _EFFECT_TIMES))


def effect_at(
    conn: SqlRunner, run_id: str, task_id: str, attempt: int, ordinal: int
) -> dict[str, Any] | None:
    """The effect journaled at one position of one attempt (the first, should a database
    written before positions were checked hold two), or None."""
    row = conn.exec_driver_sql(
        f"SELECT {_EFFECTS} FROM effects "  # noqa: S608 - fixed columns
        "WHERE run_id = ? AND task_id = ? AND attempt = ? AND ordinal = ? "
        "ORDER BY requested_at, id LIMIT 1",
        (run_id, task_id, attempt, ordinal),
    ).first()
    return unseal_record(conn, "effects", row_dict(row, EFFECT_COLUMNS, _EFFECT_TIMES))


def effect_ids_with_prefix(conn: SqlRunner, prefix: str, limit: int = 2) -> list[str]:
    rows = conn.exec_driver_sql(
        "SELECT id FROM effects WHERE id LIKE ? LIMIT ?", (prefix + "%", limit)
    )
    return [str(row[0]) for row in rows]


def effects(
    conn: SqlRunner,
    run_id: str,
    *,
    task_id: str | None = None,
    statuses: tuple[str, ...] = (),
) -> list[dict[str, Any]]:
    """A run's effects in journal order (requested, then task, attempt and ordinal)."""
    where = "run_id = ?"
    params: list[Any] = [run_id]
    if task_id is not None:
        where += " AND task_id = ?"
        params.append(task_id)
    if statuses:
        where += f" AND status IN ({', '.join('?' for _ in statuses)})"
        params.extend(statuses)
    rows = conn.exec_driver_sql(
        f"SELECT {_EFFECTS} FROM effects WHERE {where} "  # noqa: S608 - fixed columns
        "ORDER BY requested_at, task_id, attempt, ordinal",
        tuple(params),
    )
    return unseal_records(conn, "effects", row_dicts(rows, EFFECT_COLUMNS, _EFFECT_TIMES))


def unsettled_effect_ids(conn: SqlRunner, run_id: str | None = None) -> list[str]:
    """Ids of started or uncertain effects (of one run, or of all), oldest request first."""
    if run_id is None:
        rows = conn.exec_driver_sql(
            "SELECT id FROM effects WHERE status IN ('started', 'uncertain') ORDER BY requested_at"
        )
    else:
        rows = conn.exec_driver_sql(
            "SELECT id FROM effects WHERE status IN ('started', 'uncertain') AND run_id = ? "
            "ORDER BY requested_at",
            (run_id,),
        )
    return [str(row[0]) for row in rows]


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
    conn.exec_driver_sql(
        "INSERT INTO effects (id, format_version, run_id, task_id, attempt, ordinal, "
        "operation, input_digest, effect_class, idempotency, risk, idempotency_key, status, "
        "request_json, confirmed, requested_at, trace_id, span_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'requested', ?, 0, ?, ?, ?)",
        (
            effect_id,
            FORMAT_VERSION,
            run_id,
            task_id,
            attempt,
            ordinal,
            operation,
            input_digest,
            effect_class,
            idempotency,
            risk,
            effect_id,
            seal(conn, "effects", "request_json", (effect_id,), request_json),
            stamp,
            trace_id,
            None if trace_ids is None else trace_ids[1],
        ),
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


# -- reconciliations --------------------------------------------------------------------


def latest_reconciliation(conn: SqlRunner, effect_id: str) -> dict[str, Any] | None:
    row = conn.exec_driver_sql(
        f"SELECT {_RECONCILIATIONS} FROM reconciliations "  # noqa: S608 - fixed columns
        "WHERE effect_id = ? ORDER BY id DESC LIMIT 1",
        (effect_id,),
    ).first()
    return unseal_record(
        conn, "reconciliations", row_dict(row, RECONCILIATION_COLUMNS, _RECONCILIATION_TIMES)
    )


def reconciliations(conn: SqlRunner, effect_id: str) -> list[dict[str, Any]]:
    rows = conn.exec_driver_sql(
        f"SELECT {_RECONCILIATIONS} FROM reconciliations "  # noqa: S608 - fixed columns
        "WHERE effect_id = ? ORDER BY id",
        (effect_id,),
    )
    return unseal_records(
        conn, "reconciliations", row_dicts(rows, RECONCILIATION_COLUMNS, _RECONCILIATION_TIMES)
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
    inserted = conn.exec_driver_sql(
        "INSERT INTO reconciliations (format_version, effect_id, status, reason, actor, "
        "result_validated, compensation_effect_id, supersedes_id, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (
            FORMAT_VERSION,
            effect_id,
            status,
            reason,
            actor,
            int(result_validated),
            compensation_effect_id,
            supersedes_id,
            to_db(now),
        ),
    )
    new_id = inserted.first()[0]
    if evidence is not None or result_json is not None:
        record = (new_id,)
        conn.exec_driver_sql(
            "UPDATE reconciliations SET evidence = ?, result_json = ? WHERE id = ?",
            (
                seal(conn, "reconciliations", "evidence", record, evidence),
                seal(conn, "reconciliations", "result_json", record, result_json),
                new_id,
            ),
        )
    row = conn.exec_driver_sql(
        f"SELECT {_RECONCILIATIONS} FROM reconciliations "  # noqa: S608 - fixed columns
        "WHERE id = ?",
        (new_id,),
    ).first()
    found = unseal_record(
        conn, "reconciliations", row_dict(row, RECONCILIATION_COLUMNS, _RECONCILIATION_TIMES)
    )
    assert found is not None
    return found


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
    previous = conn.exec_driver_sql(
        "SELECT id FROM reconciliations WHERE effect_id = ? ORDER BY id DESC LIMIT 1",
        (effect_id,),
    ).first()
    conn.exec_driver_sql(
        "INSERT INTO reconciliations (format_version, effect_id, status, reason, actor,"
        " result_validated, compensation_effect_id, supersedes_id, created_at) VALUES"
        " (1, ?, 'compensated', ?, ?, 0, ?, ?, ?)",
        (
            effect_id,
            reason,
            actor,
            compensation_effect_id,
            None if previous is None else previous[0],
            to_db(now),
        ),
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
    conn.exec_driver_sql(
        "INSERT OR IGNORE INTO tool_calls (id, format_version, run_id, task_id, effect_id, "
        "tool, status, arguments_json, created_at) VALUES (?, 1, ?, ?, ?, ?, 'requested', ?, ?)",
        (
            effect_id,
            run_id,
            task_id,
            effect_id,
            tool,
            seal(conn, "tool_calls", "arguments_json", (effect_id,), arguments_json),
            to_db(now),
        ),
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
    conn.exec_driver_sql(
        "UPDATE tool_calls SET status = ?, result_json = ?, error_json = ?, "
        "finished_at = ? WHERE effect_id = ?",
        (
            status,
            seal(conn, "tool_calls", "result_json", (effect_id,), result_json),
            seal(conn, "tool_calls", "error_json", (effect_id,), error_json),
            to_db(now),
            effect_id,
        ),
    )


def tool_calls(conn: SqlRunner, run_id: str) -> list[tuple[str, str, str, str, str]]:
    """``(effect_id, task_id, tool, status, arguments_json)`` of a run's tool calls."""
    rows = conn.exec_driver_sql(
        "SELECT effect_id, task_id, tool, status, arguments_json FROM tool_calls "
        "WHERE run_id = ? ORDER BY created_at, id",
        (run_id,),
    )
    # A tool call's id is its effect's id.
    return [
        (row[0], row[1], row[2], row[3], unseal(conn, "tool_calls", "arguments_json", key, row[4]))
        for row in rows
        for key in [(row[0],)]
    ]
