"""Task rows: the pending rows a new run starts with, and the reads of a run's tasks.

Every function runs in the caller's transaction. A task's status changes through
:func:`agentctl.store.transitions.guarded_update` (one transition, one transaction); a
reused task record is copied by :mod:`agentctl.store.copying`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.rows import columns_sql, row_dicts
from agentctl.store.sealing import unseal, unseal_columns

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = [
    "TASK_COLUMNS",
    "insert_pending",
    "outputs",
    "outputs_in_order",
    "replace_metadata",
    "state_counts",
    "task_records",
    "task_states",
    "task_states_of",
    "tasks_in_states",
    "unfinished_task_states",
]

TASK_COLUMNS = (
    "run_id",
    "task_id",
    "format_version",
    "ordinal",
    "status",
    "attempt",
    "disposition",
    "definition_fingerprint",
    "input_digest",
    "output_contract_fingerprint",
    "output_json",
    "output_digest",
    "state_delta_json",
    "state_delta_digest",
    "artifact_manifest_json",
    "error_json",
    "source_run_id",
    "source_task_id",
    "started_at",
    "finished_at",
)
_TIMES = frozenset({"started_at", "finished_at"})
_SEALED = ("output_json", "error_json", "state_delta_json")

#: Rows per multi-row INSERT: 6 parameters each, well below SQLite's default limit of
#: 32,766 bound parameters.
ROWS_PER_INSERT = 1_000
_COLUMNS = columns_sql(TASK_COLUMNS)

#: ``(task_id, ordinal, status, attempt, disposition, output_json, error_json,
#: format_version)``: what the executor reads of each task.
TaskState = tuple[str, int, str, int, str | None, str | None, str | None, int]


def insert_pending(
    conn: SqlRunner, run_id: str, tasks: Iterable[tuple[str, str | None, str | None]]
) -> None:
    """One ``pending`` row per ``(task_id, definition fingerprint, output contract
    fingerprint)``, numbered in the order given: multi-row statements of at most
    :data:`ROWS_PER_INSERT` rows (a plan of hundreds of tasks is a few statements)."""
    rows = [
        (run_id, task_id, FORMAT_VERSION, ordinal, definition, contract)
        for ordinal, (task_id, definition, contract) in enumerate(tasks)
    ]
    for start in range(0, len(rows), ROWS_PER_INSERT):
        chunk = rows[start : start + ROWS_PER_INSERT]
        conn.exec_driver_sql(
            "INSERT INTO tasks (run_id, task_id, format_version, ordinal, status, attempt, "
            "definition_fingerprint, output_contract_fingerprint) VALUES "  # noqa: S608
            + ", ".join("(?, ?, ?, ?, 'pending', 0, ?, ?)" for _ in chunk),
            tuple(value for row in chunk for value in row),
        )


def task_states(conn: SqlRunner, run_id: str) -> list[TaskState]:
    """Every task of a run in plan order (one driver-level query: resume reads hundreds
    of rows, and statement compilation would cost more than the read)."""
    rows = conn.exec_driver_sql(
        "SELECT task_id, ordinal, status, attempt, disposition, output_json, error_json, "
        "format_version FROM tasks WHERE run_id = ? ORDER BY ordinal",
        (run_id,),
    )
    return [_opened_state(conn, run_id, row) for row in rows]


def _opened_state(conn: SqlRunner, run_id: str, row: Any) -> TaskState:
    opened = unseal_columns(conn, "tasks", (run_id, row[0]), row, _STATE_SEALED)
    return tuple(opened)  # type: ignore[return-value,unused-ignore]


_STATE_COLUMNS = (
    "task_id, ordinal, status, attempt, disposition, output_json, error_json, format_version"
)
_STATE_SEALED = {"output_json": 5, "error_json": 6}
_UNFINISHED = "('pending', 'running', 'waiting_for_approval', 'waiting_for_effect')"
_ID_CHUNK = 1_000


def unfinished_task_states(conn: SqlRunner, run_id: str) -> list[TaskState]:
    """The tasks of a run that are not in a terminal state, in plan order: what a resume
    still has to run (an indexed read of those rows only, however long the run is)."""
    # Sorted here: with ORDER BY, SQLite's planner walks the (run_id, ordinal) index over
    # every task of the run instead of the (run_id, status) index over the unfinished ones.
    rows = conn.exec_driver_sql(
        f"SELECT {_STATE_COLUMNS} FROM tasks WHERE run_id = ? "  # noqa: S608 - fixed text
        f"AND status IN {_UNFINISHED}",
        (run_id,),
    )
    return sorted((_opened_state(conn, run_id, row) for row in rows), key=lambda row: row[1])


def task_states_of(conn: SqlRunner, run_id: str, task_ids: Sequence[str]) -> list[TaskState]:
    """The given tasks of a run (those that exist), in plan order."""
    out: list[TaskState] = []
    for start in range(0, len(task_ids), _ID_CHUNK):
        chunk = tuple(task_ids[start : start + _ID_CHUNK])
        marks = ", ".join("?" * len(chunk))
        out.extend(
            _opened_state(conn, run_id, row)
            for row in conn.exec_driver_sql(
                f"SELECT {_STATE_COLUMNS} FROM tasks "  # noqa: S608 - fixed text
                f"WHERE run_id = ? AND task_id IN ({marks})",
                (run_id, *chunk),
            )
        )
    out.sort(key=lambda row: row[1])
    return out


def tasks_in_states(conn: SqlRunner, run_id: str, statuses: Sequence[str]) -> list[tuple[str, str]]:
    """``(task_id, status)`` of a run's tasks in one of ``statuses``, in plan order."""
    marks = ", ".join("?" * len(statuses))
    rows = conn.exec_driver_sql(
        "SELECT task_id, status, ordinal FROM tasks "  # noqa: S608 - fixed text
        f"WHERE run_id = ? AND status IN ({marks})",  # sorted here, as above
        (run_id, *statuses),
    )
    return [(row[0], row[1]) for row in sorted(rows, key=lambda row: row[2])]


def task_records(conn: SqlRunner, run_id: str) -> list[dict[str, Any]]:
    """Every column of every task of a run in plan order (timestamps naive UTC)."""
    rows = conn.exec_driver_sql(
        f"SELECT {_COLUMNS} FROM tasks WHERE run_id = ? ORDER BY ordinal",  # noqa: S608
        (run_id,),
    )
    records = row_dicts(rows, TASK_COLUMNS, _TIMES)
    for record in records:
        for column in _SEALED:
            record[column] = unseal(
                conn, "tasks", column, (run_id, record["task_id"]), record[column]
            )
    return records


def state_counts(conn: SqlRunner, run_id: str) -> dict[str, int]:
    """How many of a run's tasks are in each state."""
    rows = conn.exec_driver_sql(
        "SELECT status, COUNT(*) FROM tasks WHERE run_id = ? GROUP BY status", (run_id,)
    )
    return {str(row[0]): int(row[1]) for row in rows}


def outputs(conn: SqlRunner, run_id: str) -> list[tuple[str, str]]:
    """``(task_id, output_json)`` of every task of a run that has an output."""
    rows = conn.exec_driver_sql(
        "SELECT task_id, output_json FROM tasks WHERE run_id = ? AND output_json IS NOT NULL",
        (run_id,),
    )
    return [(row[0], _output(conn, run_id, row[0], row[1])) for row in rows]


def outputs_in_order(conn: SqlRunner, run_id: str) -> list[tuple[str, str]]:
    """``(task_id, output_json)`` of every task of a run that has an output, in plan order."""
    rows = conn.exec_driver_sql(
        "SELECT task_id, output_json FROM tasks WHERE run_id = ? AND output_json IS NOT NULL "
        "ORDER BY ordinal",
        (run_id,),
    )
    return [(row[0], _output(conn, run_id, row[0], row[1])) for row in rows]


def _output(conn: SqlRunner, run_id: str, task_id: str, stored: str) -> str:
    return str(unseal(conn, "tasks", "output_json", (run_id, task_id), stored))


#: The reuse metadata of a task row ``replace_metadata`` may rewrite.
_METADATA = frozenset(
    {
        "definition_fingerprint",
        "input_digest",
        "output_contract_fingerprint",
        "output_digest",
        "state_delta_digest",
    }
)


def replace_metadata(
    conn: SqlRunner,
    run_id: str,
    task_id: str,
    expected: Mapping[str, str | None],
    values: Mapping[str, str | None],
) -> bool:
    """Set a succeeded task's reuse metadata to ``values`` if every column still holds
    ``expected`` (``runs upgrade``); False when the row changed in between."""
    if not set(values) <= _METADATA or not set(expected) <= _METADATA:
        raise ValueError(f"not task reuse metadata: {sorted({*values, *expected} - _METADATA)}")
    names = sorted(values)
    checked = sorted(expected)
    conditions = " AND ".join(
        f"{name} IS NULL" if expected[name] is None else f"{name} = ?" for name in checked
    )
    statement = (
        f"UPDATE tasks SET {', '.join(f'{name} = ?' for name in names)} "  # noqa: S608
        f"WHERE run_id = ? AND task_id = ? AND status = 'succeeded' AND {conditions}"
    )
    parameters = (
        *(values[name] for name in names),
        run_id,
        task_id,
        *(expected[name] for name in checked if expected[name] is not None),
    )
    return int(conn.exec_driver_sql(statement, parameters).rowcount or 0) == 1
