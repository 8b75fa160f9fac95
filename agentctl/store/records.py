"""Record access helpers shared by every reader: format-version checks and lookups.

A row written by a newer agentctl (``format_version`` above :data:`FORMAT_VERSION`) is
refused with exit 5 rather than read with the wrong meaning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.engine import Connection, RowMapping

from agentctl.errors import NewerFormatError, NotFoundError
from agentctl.store.run_tables import runs
from agentctl.store.statements import statement
from agentctl.store.tables import FORMAT_VERSION, NEWER_FORMAT_CONDITION

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect

__all__ = [
    "RUN_RECORDS",
    "check_format_version",
    "check_run_records",
    "get_run",
    "newer_format_probe",
    "unknown_run",
]


def check_format_version(kind: str, record_id: Any, version: int) -> None:
    if version > FORMAT_VERSION:
        from agentctl.version import __version__

        raise NewerFormatError(
            f"{kind} {record_id} has record format version {version}; this agentctl "
            f"({__version__}) reads versions up to {FORMAT_VERSION}",
            hint="it was written by a newer agentctl: upgrade agentctl to read it",
        )


def get_run(conn: Connection, run_id: str) -> RowMapping:
    """The run row, or exit 5 naming the id."""
    row = conn.execute(select(runs).where(runs.c.id == run_id)).mappings().first()
    if row is None:
        raise unknown_run(run_id)
    check_format_version("run", run_id, int(row["format_version"]))
    return row


def unknown_run(run_id: str) -> NotFoundError:
    """The error for a run id that names no run (exit 5)."""
    return NotFoundError(
        f"unknown run {run_id!r}",
        hint="list runs with `agentctl runs list`, or pass the right --db",
        run_id=run_id,
    )


#: Every per-run record family and the column that names one of its records.
RUN_RECORDS = (
    ("task", "tasks", "task_id"),
    ("effect", "effects", "id"),
    ("approval", "approvals", "id"),
    ("checkpoint", "checkpoints", "seq"),
    ("audit event", "audit_events", "seq"),
    ("provider session", "provider_sessions", "task_id"),
    ("tool call", "tool_calls", "id"),
    ("artifact ref", "artifact_refs", "name"),
)


# One statement probes every record family of a run (one round trip instead of eight). Each
# member is a sub-select whose condition is written out, not bound: that is what lets the
# database answer it from the table's partial index of newer-format rows
# (tables.NEWER_FORMAT_TABLES). Keys are read as text so the members' columns agree on
# PostgreSQL.
@statement
def newer_format_probe(_: SqlDialect) -> Executable:
    from sqlalchemy import Text, bindparam, cast, literal_column, text, union_all

    from agentctl.store.tables import metadata

    members = []
    for position, (_kind, name, key) in enumerate(RUN_RECORDS):
        table = metadata.tables[name]
        probe = (
            select(cast(table.c[key], Text).label("record_key"), table.c.format_version)
            .where(table.c.run_id == bindparam("run_id"), text(NEWER_FORMAT_CONDITION))
            .limit(1)
            .subquery(f"probe_{position}")
        )
        members.append(
            select(
                literal_column(str(position)).label("family"),
                probe.c.record_key,
                probe.c.format_version,
            )
        )
    return union_all(*members)


def check_run_records(conn: Any, run_id: str) -> None:
    """Refuse (exit 5) a run any of whose records was written in a newer format, before
    anything of the run is read for execution or changed: a resume that met such a record
    halfway would otherwise leave the run half-updated."""
    found = newer_format_probe.run(conn, run_id=run_id)
    for position, key, version in sorted(found, key=lambda row: int(row[0])):
        kind = RUN_RECORDS[int(position)][0]
        check_format_version(kind, f"{run_id}/{key}", int(version))
