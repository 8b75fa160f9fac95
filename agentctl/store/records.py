"""Record access helpers shared by every reader: format-version checks and lookups.

A row written by a newer agentctl (``format_version`` above :data:`FORMAT_VERSION`) is
refused with exit 5 rather than read with the wrong meaning.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection, RowMapping

from agentctl.errors import NewerFormatError, NotFoundError
from agentctl.store.tables import FORMAT_VERSION, runs

__all__ = ["check_format_version", "get_run"]


def check_format_version(kind: str, record_id: Any, version: int) -> None:
    if version > FORMAT_VERSION:
        from agentctl import __version__

        raise NewerFormatError(
            f"{kind} {record_id} has record format version {version}; this agentctl "
            f"({__version__}) reads versions up to {FORMAT_VERSION}",
            hint="it was written by a newer agentctl: upgrade agentctl to read it",
        )


def get_run(conn: Connection, run_id: str) -> RowMapping:
    """The run row, or exit 5 naming the id."""
    row = conn.execute(select(runs).where(runs.c.id == run_id)).mappings().first()
    if row is None:
        raise NotFoundError(
            f"unknown run {run_id!r}",
            hint="list runs with `agentctl runs list`, or pass the right --db",
            run_id=run_id,
        )
    check_format_version("run", run_id, int(row["format_version"]))
    return row
