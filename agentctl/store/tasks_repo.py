"""Task rows: the pending rows a new run starts with, and the reads of a run's tasks.

Every function runs in the caller's transaction. A task's status changes through
:func:`agentctl.store.transitions.guarded_update` (one transition, one transaction); a
reused task record is copied by :mod:`agentctl.store.copying`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.rows import row_dicts
from agentctl.store.sealing import unseal, unseal_column, unseal_columns
from agentctl.store.statements import Statement, columns, one_of, padded, statement

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

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


#: ``(task_id, ordinal, status, attempt, disposition, output_json, error_json,
#: format_version)``: what the executor reads of each task.
TaskState = tuple[str, int, str, int, str | None, str | None, str | None, int]


def insert_pending(
    conn: SqlRunner, run_id: str, tasks: Iterable[tuple[str, str | None, str | None]]
) -> None:
    """One ``pending`` row per ``(task_id, definition fingerprint, output contract
    fingerprint)``, numbered in the order given: one statement executed per row in one
    driver call (a plan of hundreds of tasks is prepared once)."""
    _insert_pending.run_many(
        conn,
        (
            {
                "run_id": run_id,
                "task_id": task_id,
                "ordinal": ordinal,
                "definition_fingerprint": definition,
                "output_contract_fingerprint": contract,
            }
            for ordinal, (task_id, definition, contract) in enumerate(tasks)
        ),
    )


@statement
def _insert_pending(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, insert

    from agentctl.store.run_tables import tasks

    given = (
        "run_id",
        "task_id",
        "ordinal",
        "definition_fingerprint",
        "output_contract_fingerprint",
    )
    return insert(tasks).values(
        format_version=FORMAT_VERSION,
        status="pending",
        attempt=0,
        **{name: bindparam(name) for name in given},
    )


def task_states(conn: SqlRunner, run_id: str) -> list[TaskState]:
    """Every task of a run in plan order (one driver-level query: resume reads hundreds
    of rows, and statement compilation would cost more than the read)."""
    rows = _task_states.run(conn, run_id=run_id)
    return [_opened_state(conn, run_id, row) for row in rows]


_STATE_COLUMNS = (
    "task_id",
    "ordinal",
    "status",
    "attempt",
    "disposition",
    "output_json",
    "error_json",
    "format_version",
)


def _states_of_run() -> Any:
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import tasks

    return select(*columns(tasks, _STATE_COLUMNS)).where(tasks.c.run_id == bindparam("run_id"))


@statement
def _task_states(_: SqlDialect) -> Executable:
    from agentctl.store.run_tables import tasks

    return _states_of_run().order_by(tasks.c.ordinal)  # type: ignore[no-any-return]


def _opened_state(conn: SqlRunner, run_id: str, row: Any) -> TaskState:
    opened = unseal_columns(conn, "tasks", (run_id, row[0]), row, _STATE_SEALED)
    return tuple(opened)  # type: ignore[return-value,unused-ignore]


_STATE_SEALED = {"output_json": 5, "error_json": 6}
_UNFINISHED = ("pending", "running", "waiting_for_approval", "waiting_for_effect")
_ID_CHUNK = 1_024  # ids per IN list: a power of two (statements.padded)


def unfinished_task_states(conn: SqlRunner, run_id: str) -> list[TaskState]:
    """The tasks of a run that are not in a terminal state, in plan order: what a resume
    still has to run (an indexed read of those rows only, however long the run is)."""
    # Sorted here: with ORDER BY, SQLite's planner walks the (run_id, ordinal) index over
    # every task of the run instead of the (run_id, status) index over the unfinished ones.
    rows = _unfinished_states.run(conn, run_id=run_id)
    return sorted((_opened_state(conn, run_id, row) for row in rows), key=lambda row: row[1])


@statement
def _unfinished_states(_: SqlDialect) -> Executable:
    from agentctl.store.run_tables import tasks

    return _states_of_run().where(  # type: ignore[no-any-return]
        one_of(tasks.c.status, _UNFINISHED)
    )


def task_states_of(conn: SqlRunner, run_id: str, task_ids: Sequence[str]) -> list[TaskState]:
    """The given tasks of a run (those that exist), in plan order."""
    out: list[TaskState] = []
    for start in range(0, len(task_ids), _ID_CHUNK):
        chunk = padded(task_ids[start : start + _ID_CHUNK])
        ids = {f"task_id_{n}": task_id for n, task_id in enumerate(chunk)}
        out.extend(
            _opened_state(conn, run_id, row)
            for row in _states_of_tasks(len(chunk)).run(conn, run_id=run_id, **ids)
        )
    out.sort(key=lambda row: row[1])
    return out


@lru_cache(maxsize=16)
def _states_of_tasks(count: int) -> Statement:
    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam

        from agentctl.store.run_tables import tasks

        ids: list[Any] = [bindparam(f"task_id_{n}") for n in range(count)]
        return _states_of_run().where(tasks.c.task_id.in_(ids))  # type: ignore[no-any-return]

    return Statement(build, f"states_of_tasks({count})")


def tasks_in_states(conn: SqlRunner, run_id: str, statuses: Sequence[str]) -> list[tuple[str, str]]:
    """``(task_id, status)`` of a run's tasks in one of ``statuses``, in plan order."""
    wanted = {f"status_{n}": status for n, status in enumerate(statuses)}
    rows = _tasks_in_states(len(statuses)).run(conn, run_id=run_id, **wanted)
    return [(row[0], row[1]) for row in sorted(rows, key=lambda row: row[2])]  # as above


@lru_cache(maxsize=16)
def _tasks_in_states(count: int) -> Statement:
    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, select

        from agentctl.store.run_tables import tasks

        c = tasks.c
        return select(c.task_id, c.status, c.ordinal).where(
            c.run_id == bindparam("run_id"),
            c.status.in_([bindparam(f"status_{n}") for n in range(count)]),
        )

    return Statement(build, f"tasks_in_states({count})")


def task_records(conn: SqlRunner, run_id: str) -> list[dict[str, Any]]:
    """Every column of every task of a run in plan order (timestamps naive UTC)."""
    rows = _task_records.run(conn, run_id=run_id)
    records = row_dicts(rows, TASK_COLUMNS, _TIMES)
    for record in records:
        for column in _SEALED:
            record[column] = unseal(
                conn, "tasks", column, (run_id, record["task_id"]), record[column]
            )
    return records


@statement
def _task_records(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import tasks

    return (
        select(*columns(tasks, TASK_COLUMNS))
        .where(tasks.c.run_id == bindparam("run_id"))
        .order_by(tasks.c.ordinal)
    )


def state_counts(conn: SqlRunner, run_id: str) -> dict[str, int]:
    """How many of a run's tasks are in each state."""
    rows = _state_counts.run(conn, run_id=run_id)
    return {str(row[0]): int(row[1]) for row in rows}


@statement
def _state_counts(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, func, select

    from agentctl.store.run_tables import tasks

    return (
        select(tasks.c.status, func.count())
        .where(tasks.c.run_id == bindparam("run_id"))
        .group_by(tasks.c.status)
    )


def outputs(conn: SqlRunner, run_id: str) -> list[tuple[str, str]]:
    """``(task_id, output_json)`` of every task of a run that has an output."""
    task_ids, texts = _columns(conn, run_id, _outputs.run(conn, run_id=run_id))
    return list(zip(task_ids, texts, strict=True))


def outputs_in_order(conn: SqlRunner, run_id: str) -> tuple[list[str], list[str]]:
    """The ids of every task of a run that has an output, in plan order, and their
    ``output_json`` in the same order (two lists: a run's result reads thousands)."""
    return _columns(conn, run_id, _outputs_in_order.run(conn, run_id=run_id))


def _columns(conn: SqlRunner, run_id: str, result: Any) -> tuple[list[str], list[str]]:
    rows = list(result)
    task_ids = [row[0] for row in rows]
    records = ((run_id, task_id) for task_id in task_ids)
    stored = [row[1] for row in rows]
    texts = unseal_column(conn, "tasks", "output_json", records, stored)
    return task_ids, stored if texts is stored else [str(text) for text in texts]


def _outputs_query() -> Any:
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import tasks

    c = tasks.c
    return select(c.task_id, c.output_json).where(
        c.run_id == bindparam("run_id"), c.output_json.is_not(None)
    )


@statement
def _outputs(_: SqlDialect) -> Executable:
    return _outputs_query()  # type: ignore[no-any-return]


@statement
def _outputs_in_order(_: SqlDialect) -> Executable:
    from agentctl.store.run_tables import tasks

    return _outputs_query().order_by(tasks.c.ordinal)  # type: ignore[no-any-return]


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
    names = tuple(sorted(values))
    checked = tuple(sorted(expected))
    nulls = tuple(name for name in checked if expected[name] is None)
    update = _replace_metadata(names, checked, nulls)
    given = {f"new_{name}": values[name] for name in names}
    given.update({f"old_{name}": expected[name] for name in checked if name not in nulls})
    return int(update.run(conn, run_id=run_id, task_id=task_id, **given).rowcount or 0) == 1


@lru_cache(maxsize=64)
def _replace_metadata(
    names: tuple[str, ...], checked: tuple[str, ...], nulls: tuple[str, ...]
) -> Statement:
    """Set ``names``, if each of ``checked`` holds its ``old_`` value (NULL: ``nulls``)."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, update

        from agentctl.store.run_tables import tasks

        c = tasks.c
        return (
            update(tasks)
            .values({c[name]: bindparam(f"new_{name}") for name in names})
            .where(
                c.run_id == bindparam("run_id"),
                c.task_id == bindparam("task_id"),
                c.status == "succeeded",
                *(
                    c[name].is_(None) if name in nulls else c[name] == bindparam(f"old_{name}")
                    for name in checked
                ),
            )
        )

    return Statement(build, f"replace_metadata{(names, checked, nulls)}")
