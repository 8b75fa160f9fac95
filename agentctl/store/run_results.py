"""A run's result as stored: a copy in the run row, or a reference to its task rows.

A run whose workflow declares ``outputs:`` stores the rendered result in
``runs.output_json``. A run that declares none has every task's recorded output as its
result (an object by task id); that result is not copied. Its finish leaves
``output_json`` NULL and sets ``runs.output_source`` to :data:`EVERY_TASK`, and this module
is the one home that turns the task rows into that result:

- :func:`stored_result_text` — the result's canonical JSON, what every reader of a run row
  gets (``runs_repo.run`` and ``runs_repo.run_state``, so ``inspect``, ``runs``, the API,
  the dashboard, re-submitting a finished run). A referenced result is assembled at the
  text level from the rows' stored canonical texts (:func:`plain_result_text`): nothing is
  parsed and encoded again, and the text is byte for byte the copy earlier releases wrote.
- :func:`plain_result` — the same result as values, for the executor that has just
  finished the run: the outputs it holds are taken as they are, the others come from one
  read and one parse (:func:`~agentctl.digest.parse_json`).

Why a reference is enough: a finished run's task rows never change. Terminal task states
have no moves out (store/states.py); the finishing commit cancels the tasks still live; a
terminal run has no moves out either, so no execution takes it again; ``runs upgrade``
rewrites only a task's reuse metadata; retry, repair, fork, replay and compensation write
rows of their own run (store/copying.py); ``gc`` deletes a run with its task rows; key
rotation re-seals a text without changing it (docs/durable-execution.md).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from agentctl.digest import canonical_object, parse_json
from agentctl.errors import PersistenceError
from agentctl.store import tasks_repo

if TYPE_CHECKING:
    from agentctl.store.runner import SqlRunner

__all__ = [
    "EVERY_TASK",
    "parse_texts",
    "plain_result",
    "plain_result_text",
    "stored_result_text",
]

#: ``runs.output_source`` of a run whose result is every task's recorded output.
EVERY_TASK = "tasks"


def plain_result_text(conn: SqlRunner, run_id: str) -> str:
    """The canonical JSON of every recorded output of the run by task id, from the rows'
    stored texts (one query, no parse): what ``canonical_json`` writes for that object."""
    task_ids, texts = tasks_repo.outputs_in_order(conn, run_id)
    return canonical_object(dict(zip(task_ids, texts, strict=True)))


def plain_result(
    conn: SqlRunner, run_id: str, held: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Every recorded output of the run by task id, in plan order.

    ``held`` maps task ids to the outputs the caller already holds as values (those it
    recorded or read); they are taken as they are. The others' stored texts are read in
    one query and parsed in one pass."""
    task_ids, texts = tasks_repo.outputs_in_order(conn, run_id)
    if not held:
        return dict(zip(task_ids, parse_texts(texts), strict=True))
    missing = [text for task_id, text in zip(task_ids, texts, strict=True) if task_id not in held]
    parsed = iter(parse_texts(missing))
    return {task_id: held[task_id] if task_id in held else next(parsed) for task_id in task_ids}


def stored_result_text(
    conn: SqlRunner, run_id: str, output_json: str | None, source: str | None
) -> str | None:
    """The run's result as canonical JSON, from its row's ``output_json`` and
    ``output_source`` (already unsealed): the copy, or the result the reference names."""
    if source is None:
        return output_json
    if source == EVERY_TASK:
        return plain_result_text(conn, run_id)
    raise PersistenceError(
        f"run {run_id} has an unknown output_source {source!r}",
        code="store.corrupt",
        hint="the database was written by a newer agentctl or changed by hand; upgrade "
        "agentctl, or inspect the run's row",
        run_id=run_id,
    )


def parse_texts(texts: Sequence[str]) -> list[Any]:
    """The values of many JSON texts, in one parse."""
    if not texts:
        return []
    with _collector_paused():
        return list(parse_json("[" + ",".join(texts) + "]"))


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
