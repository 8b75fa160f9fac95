"""SQLAlchemy tables for every durable record (docs/durable-execution.md).

SQLite is the correctness boundary: what is not in these tables did not happen. Each
versioned record carries ``format_version`` so a row written by a newer agentctl is refused
instead of misread. JSON payloads are stored as canonical JSON text (``*_json`` columns) so
their digests can be recomputed from the stored bytes. Every lookup the CLI makes has an
index; names follow ``NAMING_CONVENTION`` so Alembic can alter constraints by name later.

The tables evolve only through new Alembic revisions in ``migrations/versions``; a test
checks that the migrations produce exactly this metadata.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from agentctl.store.formats import FORMAT_VERSION

#: A flag is 0/1 on both dialects (SQLite has no boolean type; the driver-level SQL writes
#: and compares integers, which a PostgreSQL BOOLEAN column would refuse).
FLAG = Boolean().with_variant(SmallInteger(), "postgresql")

__all__ = [
    "FORMAT_VERSION",
    "NAMING_CONVENTION",
    "NEWER_FORMAT_CONDITION",
    "NEWER_FORMAT_TABLES",
    "VERSIONED_TABLES",
    "approvals",
    "artifact_blobs",
    "artifact_leases",
    "artifact_refs",
    "audit_events",
    "budget_reservations",
    "budgets",
    "checkpoints",
    "effects",
    "encryption_keys",
    "memory_entries",
    "metadata",
    "monitor_observations",
    "plan_tasks",
    "provider_sessions",
    "reconciliations",
    "run_workflows",
    "runs",
    "schedule_firings",
    "schedules",
    "task_claims",
    "tasks",
    "tool_calls",
]


NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _ts(name: str, nullable: bool = True) -> Column[datetime]:
    return Column(name, DateTime(timezone=True), nullable=nullable)


def _format_version() -> Column[int]:
    return Column("format_version", Integer, nullable=False, server_default="1")


runs = Table(
    "runs",
    metadata,
    Column("id", String(80), primary_key=True),
    _format_version(),
    Column("workflow_name", String(255), nullable=False),
    Column("workflow_digest", String(80), nullable=False),
    Column("plan_digest", String(80), nullable=False),
    # The plan's header; its tasks are rows of ``plan_tasks``.
    Column("plan_json", Text, nullable=False),
    # The validated document the plan was compiled from (defaults filled in) without its
    # ``spec.tasks`` (the whole document is in ``run_workflows``): the executor reads action,
    # agent, tool, provider and policy definitions from it, never the file.
    Column("workflow_json", Text, nullable=False, server_default="{}"),
    Column("workflow_file", Text, nullable=True),
    Column("inputs_json", Text, nullable=False, server_default="{}"),
    Column("mode", String(20), nullable=False, server_default="execute"),
    Column("status", String(20), nullable=False),
    Column("workspace", Text, nullable=True),
    Column("source_run_id", String(80), ForeignKey("runs.id", ondelete="SET NULL")),
    Column("relation", String(20), nullable=True),
    Column("reason", Text, nullable=True),
    Column("output_json", Text, nullable=True),
    Column("error_json", Text, nullable=True),
    _ts("created_at", nullable=False),
    _ts("updated_at", nullable=False),
    _ts("deadline_at"),
    Column("cancel_requested", FLAG, nullable=False, server_default="0"),
    Column("cancel_reason", Text, nullable=True),
    Column("owner_id", String(80), nullable=True),
    _ts("owner_lease_expires_at"),
    # Incremented by every claim: the fencing token (agentctl.store.ownership).
    Column("owner_token", Integer, nullable=False, server_default="0"),
    # The root span of the run's latest execution (a resume links its own root span to it).
    Column("trace_id", String(64), nullable=True),
    Column("span_id", String(32), nullable=True),
    CheckConstraint(
        "mode IN ('execute', 'replay', 'retry', 'repair', 'fork', 'compensate')", name="mode"
    ),
    Index(None, "status", "created_at"),
    Index(None, "workflow_name", "created_at"),
    Index(None, "created_at"),
    Index(None, "source_run_id"),
    # One live compensation run per source run, decided by the database.
    Index(
        "uq_runs_live_compensation",
        "source_run_id",
        unique=True,
        sqlite_where=text("mode = 'compensate' AND status IN ('running', 'paused')"),
        postgresql_where=text("mode = 'compensate' AND status IN ('running', 'paused')"),
    ),
)

tasks = Table(
    "tasks",
    metadata,
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("task_id", String(512), primary_key=True),
    _format_version(),
    Column("ordinal", Integer, nullable=False),
    Column("status", String(20), nullable=False),
    Column("attempt", Integer, nullable=False, server_default="0"),
    Column("disposition", String(20), nullable=True),
    Column("definition_fingerprint", String(80), nullable=True),
    Column("input_digest", String(80), nullable=True),
    Column("output_contract_fingerprint", String(80), nullable=True),
    Column("output_json", Text, nullable=True),
    Column("output_digest", String(80), nullable=True),
    Column("state_delta_json", Text, nullable=True),
    Column("state_delta_digest", String(80), nullable=True),
    Column("artifact_manifest_json", Text, nullable=True),
    Column("error_json", Text, nullable=True),
    Column("source_run_id", String(80), nullable=True),
    Column("source_task_id", String(512), nullable=True),
    # {kind, expression, result, contextDigest} of the task's `when` or loop guard.
    Column("condition_json", Text, nullable=True),
    # The span of the task's latest attempt, when telemetry is on.
    Column("trace_id", String(64), nullable=True),
    Column("span_id", String(32), nullable=True),
    _ts("started_at"),
    _ts("finished_at"),
    CheckConstraint(
        "disposition IS NULL OR disposition IN ('executed', 'reused', 'recorded')",
        name="disposition",
    ),
    Index(None, "run_id", "status"),
    Index(None, "run_id", "ordinal"),
)

#: The compiled plan of a run, one compact row per task (the run row keeps the plan's
#: header): resume reads only the rows of the tasks it still has to run.
plan_tasks = Table(
    "plan_tasks",
    metadata,
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("task_id", String(512), primary_key=True),
    # The task's place in plan order (the same as its ``tasks.ordinal``).
    Column("ordinal", Integer, nullable=False),
    Column("record_json", Text, nullable=False),
)

#: The whole validated document a run was compiled from. The run row keeps it without its
#: task list (what the executor reads); retry, fork, compensation and the plan views read
#: the whole of it from here.
run_workflows = Table(
    "run_workflows",
    metadata,
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("workflow_json", Text, nullable=False),
)

effects = Table(
    "effects",
    metadata,
    Column("id", String(64), primary_key=True),
    _format_version(),
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("task_id", String(512), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("ordinal", Integer, nullable=False),
    Column("operation", String(120), nullable=False),
    Column("input_digest", String(80), nullable=False),
    Column("effect_class", String(40), nullable=False),
    Column("idempotency", String(40), nullable=False),
    Column("risk", String(20), nullable=False),
    Column("idempotency_key", String(255), nullable=True),
    Column("status", String(30), nullable=False),
    Column("request_json", Text, nullable=True),
    Column("result_json", Text, nullable=True),
    Column("error_json", Text, nullable=True),
    Column("confirmed", FLAG, nullable=False, server_default="0"),
    Column("trace_id", String(64), nullable=True),
    Column("span_id", String(32), nullable=True),
    _ts("requested_at", nullable=False),
    _ts("started_at"),
    _ts("finished_at"),
    CheckConstraint(
        "status IN ('requested', 'waiting_for_approval', 'started', 'succeeded', 'failed',"
        " 'cancelled', 'uncertain')",
        name="status",
    ),
    Index(None, "run_id", "task_id", "attempt", "ordinal"),
    Index(None, "run_id", "status"),
)

reconciliations = Table(
    "reconciliations",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    _format_version(),
    Column("effect_id", String(64), ForeignKey("effects.id", ondelete="CASCADE"), nullable=False),
    Column("status", String(20), nullable=False),
    Column("reason", Text, nullable=False),
    Column("actor", String(255), nullable=False),
    Column("evidence", Text, nullable=True),
    Column("result_json", Text, nullable=True),
    Column("result_validated", FLAG, nullable=False, server_default="0"),
    Column("compensation_effect_id", String(64), nullable=True),
    Column("supersedes_id", Integer, ForeignKey("reconciliations.id"), nullable=True),
    _ts("created_at", nullable=False),
    CheckConstraint("status IN ('applied', 'not_applied', 'compensated')", name="status"),
    Index(None, "effect_id", "id"),
)

approvals = Table(
    "approvals",
    metadata,
    Column("id", String(80), primary_key=True),
    _format_version(),
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("task_id", String(512), nullable=False),
    Column("effect_id", String(64), nullable=True),
    Column("kind", String(20), nullable=False),
    Column("prompt", Text, nullable=False),
    Column("choices_json", Text, nullable=True),
    Column("answer_schema_json", Text, nullable=True),
    Column("input_json", Text, nullable=True),
    Column("risk", String(20), nullable=True),
    Column("status", String(20), nullable=False),
    Column("resolver", String(255), nullable=True),
    Column("answer_json", Text, nullable=True),
    Column("reason", Text, nullable=True),
    _ts("created_at", nullable=False),
    _ts("resolved_at"),
    CheckConstraint("kind IN ('approval', 'question')", name="kind"),
    CheckConstraint(
        "status IN ('pending', 'approved', 'rejected', 'answered', 'expired')", name="status"
    ),
    Index(None, "run_id", "status"),
    Index(None, "status", "created_at"),
)

checkpoints = Table(
    "checkpoints",
    metadata,
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    _format_version(),
    Column("transition", String(600), nullable=False),
    Column("memory_delta_json", Text, nullable=False, server_default="{}"),
    Column("is_snapshot", FLAG, nullable=False, server_default="0"),
    Column("checksum", String(80), nullable=False),
    _ts("created_at", nullable=False),
)

audit_events = Table(
    "audit_events",
    metadata,
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    _format_version(),
    Column("kind", String(80), nullable=False),
    Column("task_id", String(512), nullable=True),
    Column("effect_id", String(64), nullable=True),
    Column("payload_json", Text, nullable=False),
    Column("prev_digest", String(80), nullable=True),
    Column("digest", String(80), nullable=False),
    _ts("created_at", nullable=False),
    # The span current when the event was written (not part of the chained digest).
    Column("trace_id", String(64), nullable=True),
    Column("span_id", String(32), nullable=True),
)

provider_sessions = Table(
    "provider_sessions",
    metadata,
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("task_id", String(512), primary_key=True),
    _format_version(),
    Column("provider", String(255), nullable=False),
    Column("state_json", Text, nullable=False),
    _ts("updated_at", nullable=False),
    Column("session_name", String(255), nullable=True),
    Index("ix_provider_sessions_session_name", "session_name"),
)

tool_calls = Table(
    "tool_calls",
    metadata,
    Column("id", String(80), primary_key=True),
    _format_version(),
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("task_id", String(512), nullable=False),
    Column("effect_id", String(64), ForeignKey("effects.id", ondelete="CASCADE")),
    Column("tool", String(255), nullable=False),
    Column("status", String(30), nullable=False),
    Column("arguments_json", Text, nullable=False),
    Column("result_json", Text, nullable=True),
    Column("error_json", Text, nullable=True),
    _ts("created_at", nullable=False),
    _ts("finished_at"),
    Index(None, "run_id", "task_id"),
    Index(None, "effect_id"),
)

budgets = Table(
    "budgets",
    metadata,
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("resource", String(60), primary_key=True),
    Column("limit_units", Float, nullable=True),
    Column("reserved_units", Float, nullable=False, server_default="0"),
    Column("used_units", Float, nullable=False, server_default="0"),
    Column("pricing_version", String(40), nullable=True),
    _ts("updated_at", nullable=False),
)

budget_reservations = Table(
    "budget_reservations",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(80), nullable=False),
    Column("resource", String(60), nullable=False),
    Column("effect_id", String(64), nullable=True),
    Column("units", Float, nullable=False),
    Column("status", String(20), nullable=False),
    _ts("created_at", nullable=False),
    _ts("settled_at"),
    ForeignKeyConstraint(
        ["run_id", "resource"], ["budgets.run_id", "budgets.resource"], ondelete="CASCADE"
    ),
    CheckConstraint("status IN ('held', 'settled', 'released')", name="status"),
    Index(None, "run_id", "status"),
    Index(None, "effect_id"),
)

artifact_blobs = Table(
    "artifact_blobs",
    metadata,
    Column("digest", String(80), primary_key=True),
    Column("size_bytes", Integer().with_variant(BigInteger(), "postgresql"), nullable=False),
    Column("media_type", String(255), nullable=True),
    _ts("created_at", nullable=False),
    _ts("verified_at"),
)

artifact_refs = Table(
    "artifact_refs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    _format_version(),
    Column(
        "blob_digest",
        String(80),
        ForeignKey("artifact_blobs.digest", ondelete="RESTRICT"),
        nullable=False,
    ),
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("task_id", String(512), nullable=False),
    Column("name", String(512), nullable=False),
    Column("version", Integer, nullable=False, server_default="1"),
    Column("path", Text, nullable=True),
    Column("definition_fingerprint", String(80), nullable=True),
    Column("input_digest", String(80), nullable=True),
    Column("output_digest", String(80), nullable=True),
    _ts("created_at", nullable=False),
    UniqueConstraint("name", "version"),
    Index(None, "run_id", "task_id"),
    Index(None, "blob_digest"),
)

artifact_leases = Table(
    "artifact_leases",
    metadata,
    Column("id", String(80), primary_key=True),
    # No foreign key: a lease protects a blob while it is being written, before its row exists.
    Column("blob_digest", String(80), nullable=True),
    Column("holder", String(255), nullable=False),
    _ts("created_at", nullable=False),
    _ts("expires_at", nullable=False),
    Index(None, "expires_at"),
    Index(None, "blob_digest"),
)

memory_entries = Table(
    "memory_entries",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    _format_version(),
    Column("namespace", String(255), nullable=False),
    Column("key", String(512), nullable=False),
    Column("value_type", String(10), nullable=False),
    Column("value_json", Text, nullable=False),
    Column("text", Text, nullable=True),
    Column("metadata_json", Text, nullable=False, server_default="{}"),
    Column("embedding", LargeBinary, nullable=True),
    Column("embedding_model", String(255), nullable=True),
    Column("provenance_json", Text, nullable=True),
    _ts("created_at", nullable=False),
    _ts("updated_at", nullable=False),
    _ts("expires_at"),
    # Encryption on (docs/encryption.md): ``text`` holds keyed tokens, this the sealed text.
    Column("text_sealed", Text, nullable=True),
    CheckConstraint("value_type IN ('text', 'json')", name="value_type"),
    UniqueConstraint("namespace", "key"),
    Index(None, "expires_at"),
)

# A schedule starts runs of one workflow by itself (cron in a time zone, or an interval).
# ``cursor_at``: every slot at or before it has been decided (fired, skipped or counted as
# missed), so a restarted daemon continues after it.
schedules = Table(
    "schedules",
    metadata,
    Column("name", String(255), primary_key=True),
    _format_version(),
    Column("workflow", Text, nullable=False),
    Column("workflow_file", Text, nullable=False),
    Column("project_dir", Text, nullable=False),
    Column("workspace", Text, nullable=True),
    Column("cron", String(255), nullable=True),
    Column("interval_seconds", Integer, nullable=True),
    Column("timezone", String(64), nullable=False, server_default="UTC"),
    Column("inputs_json", Text, nullable=False, server_default="{}"),
    Column("catch_up", String(10), nullable=False, server_default="latest"),
    Column("max_catch_up", Integer, nullable=False, server_default="10"),
    Column("overlap", String(10), nullable=False, server_default="skip"),
    Column("jitter_seconds", Integer, nullable=False, server_default="0"),
    Column("grace_seconds", Integer, nullable=False, server_default="60"),
    Column("paused", Boolean, nullable=False, server_default="0"),
    _ts("anchor_at", nullable=False),
    _ts("cursor_at", nullable=False),
    Column("missed", Integer, nullable=False, server_default="0"),
    _ts("created_at", nullable=False),
    _ts("updated_at", nullable=False),
    # A monitor is a schedule whose slots observe something: what and how
    # ({kind, target, debounceSeconds}); the last confirmed observation; a change waiting
    # for its debounce.
    Column("monitor_json", Text, nullable=True),
    Column("observed_json", Text, nullable=True),
    Column("pending_json", Text, nullable=True),
    CheckConstraint("catch_up IN ('skip', 'latest', 'all')", name="catch_up"),
    CheckConstraint("overlap IN ('skip', 'queue', 'allow')", name="overlap"),
    CheckConstraint("(cron IS NULL) <> (interval_seconds IS NULL)", name="timing"),
)

# One row per decided slot, unique per (schedule, slot): committed before its run exists,
# so two daemons, or a daemon restarted after a crash, never start a slot twice.
schedule_firings = Table(
    "schedule_firings",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    _format_version(),
    Column(
        "schedule_name",
        String(255),
        ForeignKey("schedules.name", ondelete="CASCADE"),
        nullable=False,
    ),
    _ts("slot_at", nullable=False),
    Column("trigger", String(10), nullable=False),
    Column("status", String(20), nullable=False),
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="SET NULL"), nullable=True),
    Column("missed", Integer, nullable=False, server_default="0"),
    Column("reason", Text, nullable=True),
    # Inputs of this firing on top of the schedule's (a monitor's observation).
    Column("inputs_json", Text, nullable=True),
    _ts("created_at", nullable=False),
    _ts("updated_at", nullable=False),
    CheckConstraint("trigger IN ('cron', 'interval', 'manual', 'monitor')", name="trigger"),
    UniqueConstraint("schedule_name", "slot_at"),
    Index(None, "status"),
    Index(None, "run_id"),
)

# Every observation a monitor made, one per (monitor, slot): the first daemon to commit it
# decides whether the value changed.
monitor_observations = Table(
    "monitor_observations",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column(
        "monitor_name",
        String(255),
        ForeignKey("schedules.name", ondelete="CASCADE"),
        nullable=False,
    ),
    _ts("slot_at", nullable=False),
    Column("digest", String(80), nullable=False),
    Column("value_json", Text, nullable=False),
    Column("outcome", String(20), nullable=False),
    _ts("created_at", nullable=False),
    CheckConstraint("outcome IN ('baseline', 'unchanged', 'pending', 'changed')", name="outcome"),
    UniqueConstraint("monitor_name", "slot_at"),
)

# A ready task of a run's parallel batch that any worker may execute (PostgreSQL workers;
# see store/task_claims_repo.py). Rows live only while their batch is in flight.
task_claims = Table(
    "task_claims",
    metadata,
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("task_id", String(512), primary_key=True),
    Column("state", String(20), nullable=False),
    Column("basis", String(80), nullable=False),
    Column("payload_json", Text, nullable=False),
    Column("token", Integer, nullable=False, server_default="0"),
    Column("worker", String(255)),
    _ts("lease_expires_at"),
    _ts("ready_at", nullable=False),
    _ts("started_at"),
    _ts("finished_at"),
    Column("outcome_json", Text),
    CheckConstraint("state IN ('ready', 'claimed', 'done')", name="state"),
    Index("ix_task_claims_state_ready_at", "state", "ready_at"),
)

# The keys that seal payloads at rest (store/keyring.py, docs/encryption.md): the name of
# the variable that held each key (never the key), the one ``active`` key new values are
# sealed under, and a constant sealed under the key so a wrong key is told from a lost one.
encryption_keys = Table(
    "encryption_keys",
    metadata,
    Column("key_id", String(64), primary_key=True),
    Column("key_env", String(255), nullable=False),
    Column("status", String(10), nullable=False),
    Column("check_value", Text, nullable=False),
    _ts("created_at", nullable=False),
    CheckConstraint("status IN ('active', 'retired')", name="status"),
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
    tasks,
    effects,
    approvals,
    checkpoints,
    audit_events,
    provider_sessions,
    tool_calls,
    artifact_refs,
)
for _table in NEWER_FORMAT_TABLES:
    Index(
        f"ix_{_table.name}_newer_format",
        _table.c.run_id,
        sqlite_where=text(NEWER_FORMAT_CONDITION),
        postgresql_where=text(NEWER_FORMAT_CONDITION),
    )
