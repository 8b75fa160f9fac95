"""Reads behind ``agentctl inspect`` that belong to no other repository."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = ["TraceIndex", "artifact_listing", "trace_index"]


def artifact_listing(conn: SqlRunner, run_id: str) -> list[tuple[str, int, str, str, str | None]]:
    """``(name, version, blob digest, task_id, path)`` of a run's artifact refs, in the
    order they were recorded."""
    rows = conn.exec_driver_sql(
        "SELECT name, version, blob_digest, task_id, path FROM artifact_refs "
        "WHERE run_id = ? ORDER BY id",
        (run_id,),
    )
    return [(row[0], row[1], row[2], row[3], row[4]) for row in rows]


@dataclass
class TraceIndex:
    """The trace and span ids recorded on a run's rows (only rows that have them)."""

    run: tuple[str, str] | None = None
    tasks: dict[str, tuple[str, str]] = field(default_factory=dict)
    effects: dict[str, tuple[str, str]] = field(default_factory=dict)


def trace_index(conn: SqlRunner, run_id: str) -> TraceIndex:
    """Which span each record of the run belongs to, for ``inspect``."""
    index = TraceIndex()
    row = conn.exec_driver_sql(
        "SELECT trace_id, span_id FROM runs WHERE id = ? AND trace_id IS NOT NULL", (run_id,)
    ).first()
    if row is not None:
        index.run = (str(row[0]), str(row[1]))
    for task_id, trace_id, span_id in conn.exec_driver_sql(
        "SELECT task_id, trace_id, span_id FROM tasks WHERE run_id = ? AND trace_id IS NOT NULL",
        (run_id,),
    ):
        index.tasks[str(task_id)] = (str(trace_id), str(span_id))
    for effect_id, trace_id, span_id in conn.exec_driver_sql(
        "SELECT id, trace_id, span_id FROM effects WHERE run_id = ? AND trace_id IS NOT NULL",
        (run_id,),
    ):
        index.effects[str(effect_id)] = (str(trace_id), str(span_id))
    return index
