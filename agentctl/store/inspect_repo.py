"""Reads behind ``agentctl inspect`` that belong to no other repository."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from agentctl.store.statements import Statement, statement

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

__all__ = ["TraceIndex", "artifact_listing", "trace_index"]


def artifact_listing(conn: SqlRunner, run_id: str) -> list[tuple[str, int, str, str, str | None]]:
    """``(name, version, blob digest, task_id, path)`` of a run's artifact refs, in the
    order they were recorded."""
    rows = _artifact_listing.run(conn, run_id=run_id)
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
    row = _traced("runs", "id").run(conn, run_id=run_id).first()
    if row is not None:
        index.run = (str(row[0]), str(row[1]))
    for task_id, trace_id, span_id in _traced("tasks", "run_id", "task_id").run(
        conn, run_id=run_id
    ):
        index.tasks[str(task_id)] = (str(trace_id), str(span_id))
    for effect_id, trace_id, span_id in _traced("effects", "run_id", "id").run(conn, run_id=run_id):
        index.effects[str(effect_id)] = (str(trace_id), str(span_id))
    return index


@statement
def _artifact_listing(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.artifact_tables import artifact_refs

    c = artifact_refs.c
    return (
        select(c.name, c.version, c.blob_digest, c.task_id, c.path)
        .where(c.run_id == bindparam("run_id"))
        .order_by(c.id)
    )


@lru_cache(maxsize=4)
def _traced(table_name: str, run_column: str, *keys: str) -> Statement:
    """``(keys…, trace_id, span_id)`` of the traced rows of ``table_name`` whose
    ``run_column`` is the run."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, select

        from agentctl.store import tables

        table = tables.metadata.tables[table_name]
        c = table.c
        return select(*(c[key] for key in keys), c.trace_id, c.span_id).where(
            c[run_column] == bindparam("run_id"), c.trace_id.is_not(None)
        )

    return Statement(build, f"traced({table_name})")
