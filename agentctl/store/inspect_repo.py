"""Reads behind ``agentctl inspect`` that belong to no other repository."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = ["artifact_listing"]


def artifact_listing(conn: SqlRunner, run_id: str) -> list[tuple[str, int, str, str, str | None]]:
    """``(name, version, blob digest, task_id, path)`` of a run's artifact refs, in the
    order they were recorded."""
    rows = conn.exec_driver_sql(
        "SELECT name, version, blob_digest, task_id, path FROM artifact_refs "
        "WHERE run_id = ? ORDER BY id",
        (run_id,),
    )
    return [(row[0], row[1], row[2], row[3], row[4]) for row in rows]
