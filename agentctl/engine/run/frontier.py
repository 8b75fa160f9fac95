"""A stored run as its executor reads it: the frontier first, everything else on demand.

Resuming a run must not cost more because the run is long. The executor starts from the
plan's header and the tasks that are not finished (with their compiled records); the rows
of finished tasks — a dependency's status, an output a template reads, a child an
aggregate collects — are read when first asked for, one indexed read each, and kept.
Whatever iterates every task (the run's output when it declares none, a prediction) reads
the rest in one query.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from agentctl.compiler.plan import Plan, PlanTask, check_plan_format
from agentctl.digest import canonical_object, parse_json
from agentctl.errors import PersistenceError
from agentctl.store import plan_repo, tasks_repo
from agentctl.store.engine import SqlRunner
from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.records import check_format_version

__all__ = [
    "StoredPlan",
    "TaskOutputs",
    "TaskRows",
    "created_row",
    "hand_over",
    "load_frontier",
    "take_handed",
    "task_row",
]

Reader = Callable[[], SqlRunner]


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while parsing many JSON values at once.

    Parsing allocates thousands of containers, which triggers collections of the oldest
    generation: in a long-lived process those traverse every object it holds and cost far
    more than the parse (measured: 150 ms around a 6 ms parse of 5,000 outputs). Parsed
    JSON holds no reference cycles, so nothing is left uncollected."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _malformed(run_id: str, exc: Exception) -> PersistenceError:
    return PersistenceError(
        f"stored plan of run {run_id} is malformed: {exc}",
        code="store.corrupt",
        hint="the run record is corrupt; recompile the workflow and start a new run",
        run_id=run_id,
    )


class StoredPlan:
    """A run's compiled plan: the header at once, each task's record when first needed.

    ``tasks`` is a mapping of task id to :class:`PlanTask`; ``order`` (every task id in
    plan order) and :meth:`whole` read every record, so the executor's hot path uses
    neither.
    """

    def __init__(self, run_id: str, header: Mapping[str, Any], reader: Reader) -> None:
        check_plan_format(header)
        self.run_id = run_id
        self.header = header
        self.reader = reader
        try:
            self.max_concurrency = int(header["maxConcurrency"])
            self.task_count = int(header["taskCount"])
            self.artifact_tasks: tuple[str, ...] = tuple(header.get("artifactTasks") or ())
        except (KeyError, TypeError, ValueError) as exc:
            raise _malformed(run_id, exc) from exc
        self._tasks: dict[str, PlanTask] = {}
        self._order: tuple[str, ...] | None = None
        self.tasks: Mapping[str, PlanTask] = _PlanTasks(self)

    def adopt(self, plan: Plan) -> None:
        """Use the tasks of ``plan``, the compiled plan these rows were written from in
        this process (:func:`hand_over`), instead of parsing the rows again."""
        self._tasks.update(plan.tasks)
        self._order = plan.order

    def load(self, task_ids: Sequence[str], conn: SqlRunner | None = None) -> None:
        """Read the records of the given tasks not read yet (one query)."""
        missing = [t for t in task_ids if t not in self._tasks]
        if missing:
            self._add(plan_repo.records(conn or self.reader(), self.run_id, missing))

    def holds(self, task_id: str) -> bool:
        """Whether the record of ``task_id`` has been read (no read needed for it)."""
        return task_id in self._tasks

    def _add(self, records: list[tuple[str, str]]) -> None:
        for task_id, record in records:
            if task_id not in self._tasks:
                try:
                    self._tasks[task_id] = PlanTask.from_row(task_id, json.loads(record))
                except (KeyError, TypeError, ValueError, AttributeError) as exc:
                    raise _malformed(self.run_id, exc) from exc

    @property
    def order(self) -> tuple[str, ...]:
        """Every task id in plan order (reads every record not read yet)."""
        return self.load_all()

    def load_all(self, conn: SqlRunner | None = None) -> tuple[str, ...]:
        if self._order is None:
            records = plan_repo.records(conn or self.reader(), self.run_id)
            self._add(records)
            self._order = tuple(task_id for task_id, _ in records)
        return self._order

    def whole(self, conn: SqlRunner | None = None) -> Plan:
        """The complete :class:`Plan` (a prediction walks all of it)."""
        order = self.load_all(conn)
        return Plan.from_parts(self.header, [(t, self._tasks[t].to_row()) for t in order])


class _PlanTasks(Mapping[str, PlanTask]):
    def __init__(self, plan: StoredPlan) -> None:
        self._plan = plan

    def __getitem__(self, task_id: str) -> PlanTask:
        found = self._plan._tasks.get(task_id)  # noqa: SLF001 - the plan's own cache
        if found is None:
            self._plan.load([task_id])
            found = self._plan._tasks.get(task_id)  # noqa: SLF001
            if found is None:
                raise KeyError(task_id)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._plan.order)

    def __len__(self) -> int:
        return self._plan.task_count


def task_row(run_id: str, state: tuple[Any, ...]) -> Any:
    """A :class:`~agentctl.engine.core.records.TaskRow` of a ``tasks_repo.TaskState`` tuple."""
    from agentctl.engine.core.records import TaskRow

    task_id, ordinal, status, attempt, disposition, output, error, version = state
    if version > FORMAT_VERSION:
        check_format_version("task", f"{run_id}/{task_id}", int(version))
    return TaskRow(
        task_id=task_id,
        ordinal=int(ordinal),
        status=status,
        attempt=int(attempt),
        disposition=disposition,
        output=None if output is None else json.loads(output),
        has_output=output is not None,
        error=None if error is None else json.loads(error),
        output_json=output,
    )


class TaskRows(Mapping[str, Any]):
    """A run's task rows by id: those given up front, the others read when first asked
    for. Rows this execution changes are the objects kept here, so what the executor
    wrote is what it reads back. Iterating reads every row (plan order)."""

    def __init__(self, run_id: str, rows: Mapping[str, Any], reader: Reader) -> None:
        self.run_id = run_id
        self.reader = reader
        self._rows: dict[str, Any] = dict(rows)
        self._complete = False

    def __getitem__(self, task_id: str) -> Any:
        row = self._rows.get(task_id)
        if row is None:
            if self._complete:
                raise KeyError(task_id)
            self.load([task_id])
            row = self._rows.get(task_id)
            if row is None:
                raise KeyError(task_id)
        return row

    def load(self, task_ids: Sequence[str], conn: SqlRunner | None = None) -> None:
        """Read the rows of the given tasks not read yet (one query)."""
        missing = [t for t in task_ids if t not in self._rows]
        if missing and not self._complete:
            for state in tasks_repo.task_states_of(conn or self.reader(), self.run_id, missing):
                self._rows[state[0]] = task_row(self.run_id, state)

    def holds(self, task_ids: Sequence[str]) -> bool:
        """Whether every row of ``task_ids`` has been read (no read needed for them)."""
        return self._complete or all(t in self._rows for t in task_ids)

    def every(self, conn: SqlRunner | None = None) -> dict[str, Any]:
        """Every row of the run, in plan order (one query the first time)."""
        return self._all(conn)

    def held(self, count: int) -> list[Any] | None:
        """Every row of the run in plan order, without a read, when all ``count`` of them
        are held (an execution that ran the whole run has them); else None."""
        if len(self._rows) != count:
            return None
        return sorted(self._rows.values(), key=lambda row: row.ordinal)

    def _all(self, conn: SqlRunner | None = None) -> dict[str, Any]:
        if not self._complete:
            merged: dict[str, Any] = {}
            for state in tasks_repo.task_states(conn or self.reader(), self.run_id):
                merged[state[0]] = self._rows.get(state[0]) or task_row(self.run_id, state)
            self._rows = merged
            self._complete = True
        return self._rows

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


class TaskOutputs(Mapping[str, Any]):
    """``tasks`` for templates: the recorded output of each task that has one, read
    through :class:`TaskRows` (a task without an output is absent)."""

    def __init__(self, rows: TaskRows, task_count: int | None = None) -> None:
        self._rows = rows
        self._task_count = task_count

    def __getitem__(self, task_id: str) -> Any:
        row = self._rows.get(task_id)
        if row is None or not row.has_output:
            raise KeyError(task_id)
        return row.output

    def __iter__(self) -> Iterator[str]:
        return (task_id for task_id, row in self._rows.items() if row.has_output)

    def every(self) -> tuple[dict[str, Any], str]:
        """Every recorded output in plan order, and the canonical JSON of that object,
        from the stored rows (all of this execution's transitions must have committed).

        Each stored output is canonical JSON already, so the object's canonical text is
        those texts under their sorted keys, with nothing encoded again. When every row is
        held with its stored text (an execution that ran the whole run), nothing is read:
        the values are the outputs this execution recorded. Otherwise one query of the bare
        texts and one parse of them all (:func:`~agentctl.digest.parse_json`), where rows
        read one by one would cost a parse each."""
        held = None if self._task_count is None else self._rows.held(self._task_count)
        if held is not None:
            kept = [row for row in held if row.has_output]
            texts = [row.output_json for row in kept if row.output_json is not None]
            if len(texts) == len(kept):
                return {row.task_id: row.output for row in kept}, _object_text(
                    [row.task_id for row in kept], texts
                )
        task_ids, texts = tasks_repo.outputs_in_order(self._rows.reader(), self._rows.run_id)
        with _collector_paused():
            values = parse_json("[" + ",".join(texts) + "]")
        return dict(zip(task_ids, values, strict=True)), _object_text(task_ids, texts)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _object_text(task_ids: Sequence[str], texts: Sequence[str]) -> str:
    """The canonical JSON of an object from its keys and its values' canonical texts (in
    the same order)."""
    return canonical_object(dict(zip(task_ids, texts, strict=True)))


#: The plan a run was just created with in this process, by (database, run id): the
#: execution that follows (``roll``) takes it instead of parsing the rows just written.
_handed: dict[tuple[str, str], Plan] = {}


def hand_over(database: str, run_id: str, plan: Plan) -> None:
    """Keep the plan of the run just committed for its first execution (one at a time)."""
    _handed.clear()
    _handed[(database, run_id)] = plan


def take_handed(database: str, run_id: str) -> Plan | None:
    """The plan :func:`hand_over` kept for this run, once."""
    return _handed.pop((database, run_id), None)


def created_row(task_id: str, ordinal: int) -> Any:
    """The :class:`~agentctl.engine.core.records.TaskRow` of a task as run creation writes
    it (``tasks_repo.insert_pending``): pending, no attempt, output or error yet."""
    from agentctl.engine.core.records import TaskRow

    return TaskRow(
        task_id=task_id,
        ordinal=ordinal,
        status="pending",
        attempt=0,
        disposition=None,
        output=None,
        has_output=False,
        error=None,
        output_json=None,
    )


def load_frontier(
    conn: SqlRunner,
    run_id: str,
    header: Mapping[str, Any],
    reader: Reader,
    handed: Plan | None = None,
    *,
    untouched: bool = False,
) -> tuple[StoredPlan, TaskRows, list[str]]:
    """What a (re)started execution reads: the tasks not finished, in plan order, their
    compiled records, and the rows of the finished tasks they depend on or are routed by.
    Nothing here grows with the number of finished tasks beyond those.

    ``handed`` is the compiled plan the rows were written from in this process; it is
    used only when its digest is the stored one. ``untouched`` says nothing has written
    the run's tasks since it was created (the caller's claim is the run's first, and no
    task transition is recorded: every one writes a checkpoint): with the handed plan, the
    rows are then the ones creation wrote (:func:`created_row`), made without a read."""
    plan = StoredPlan(run_id, header, reader)
    adopted = handed is not None and handed.plan_digest == header.get("planDigest")
    if adopted and untouched and handed is not None:
        plan.adopt(handed)
        order = handed.order
        rows = TaskRows(run_id, {t: created_row(t, n) for n, t in enumerate(order)}, reader)
        return plan, rows, list(order)
    states = tasks_repo.unfinished_task_states(conn, run_id)
    frontier = [state[0] for state in states]
    rows = TaskRows(run_id, {state[0]: task_row(run_id, state) for state in states}, reader)
    if adopted and handed is not None:
        plan.adopt(handed)
    elif len(frontier) * 2 >= plan.task_count:
        plan.load_all(conn)  # most of the plan: one ordered read beats many keyed ones
    else:
        plan.load(frontier, conn)
    wanted: dict[str, None] = {}
    for task_id in frontier:
        task = plan.tasks[task_id]
        wanted.update(dict.fromkeys(task.needs))
        wanted.update(dict.fromkeys(guard.router for guard in task.route_guards))
        wanted.update(dict.fromkeys(task.uses.children))
    rows.load(list(wanted), conn)
    return plan, rows, frontier
