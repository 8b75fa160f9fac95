"""The schema as a whole: every durable record's table (docs/durable-execution.md).

SQLite is the correctness boundary: what is not in these tables did not happen. Each
versioned record carries ``format_version`` so a row written by a newer agentctl is refused
instead of misread. JSON payloads are stored as canonical JSON text (``*_json`` columns) so
their digests can be recomputed from the stored bytes. Every lookup the CLI makes has an
index; names follow ``NAMING_CONVENTION`` (store/table_base.py) so Alembic can alter
constraints by name later.

The tables evolve only through new Alembic revisions in ``migrations/versions``; a test
checks that the migrations produce exactly this metadata. The tables are defined by
concept in the modules of ``TABLE_MODULES``; this module loads them all, so its
``metadata`` is the whole schema.
"""

from __future__ import annotations

from sqlalchemy import Index, text

from agentctl.store import (
    artifact_tables,
    audit_tables,
    journal_tables,
    key_tables,
    memory_tables,
    run_tables,
    schedule_tables,
)
from agentctl.store.audit_tables import checkpoints
from agentctl.store.formats import FORMAT_VERSION
from agentctl.store.journal_tables import effects, reconciliations, tool_calls
from agentctl.store.run_tables import runs, task_claims
from agentctl.store.table_base import metadata

__all__ = [
    "FORMAT_VERSION",
    "NEWER_FORMAT_CONDITION",
    "NEWER_FORMAT_TABLES",
    "TABLE_MODULES",
    "VERSIONED_TABLES",
    "metadata",
    # Re-exported for store/effects_repo.py and store/task_claims_repo.py, the last modules
    # that import these tables from here; they leave this list once those two import them
    # from their table modules.
    "checkpoints",
    "effects",
    "reconciliations",
    "runs",
    "task_claims",
    "tool_calls",
]

#: The modules whose tables make up the schema: importing this module registers them all
#: on ``metadata``.
TABLE_MODULES = (
    run_tables,
    journal_tables,
    audit_tables,
    artifact_tables,
    memory_tables,
    schedule_tables,
    key_tables,
)

#: Tables whose rows carry a record format version (checked on read).
VERSIONED_TABLES = tuple(t.name for t in metadata.sorted_tables if "format_version" in t.c)


#: Records of a run written in a newer format are looked for before the run is resumed
#: (``records.check_run_records``). These partial indexes hold only such rows — none, in
#: a database this version wrote — so the check costs the same however long the run is.
#: Their condition names the current ``FORMAT_VERSION``; a release that raises it
#: re-creates them in its migration (a test keeps the two in step).
NEWER_FORMAT_CONDITION = f"format_version > {FORMAT_VERSION}"
NEWER_FORMAT_TABLES = (
    run_tables.tasks,
    journal_tables.effects,
    journal_tables.approvals,
    audit_tables.checkpoints,
    audit_tables.audit_events,
    run_tables.provider_sessions,
    journal_tables.tool_calls,
    artifact_tables.artifact_refs,
)
for _table in NEWER_FORMAT_TABLES:
    Index(
        f"ix_{_table.name}_newer_format",
        _table.c.run_id,
        sqlite_where=text(NEWER_FORMAT_CONDITION),
        postgresql_where=text(NEWER_FORMAT_CONDITION),
    )
