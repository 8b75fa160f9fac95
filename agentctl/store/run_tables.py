"""The tables of a run and its tasks (docs/durable-execution.md): the run row, its compiled
plan (a header on the run, one compact row per task) and the document it was compiled
from, each task's state, the provider session an agent task continues, and the ready tasks
a PostgreSQL worker may claim.
"""

from __future__ import annotations

from sqlalchemy import (
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    text,
)

from agentctl.store.table_base import FLAG, format_version_column, metadata, timestamp_column

__all__ = ["plan_tasks", "provider_sessions", "run_workflows", "runs", "task_claims", "tasks"]


runs = Table(
    "runs",
    metadata,
    Column("id", String(80), primary_key=True),
    format_version_column(),
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
    # ``tasks``: the run's result is every task's recorded output, assembled from the task
    # rows (output_json NULL, no copy); NULL: the result is output_json (run_results.py).
    Column("output_source", String(20), nullable=True),
    Column("error_json", Text, nullable=True),
    timestamp_column("created_at", nullable=False),
    timestamp_column("updated_at", nullable=False),
    timestamp_column("deadline_at"),
    Column("cancel_requested", FLAG, nullable=False, server_default="0"),
    Column("cancel_reason", Text, nullable=True),
    Column("owner_id", String(80), nullable=True),
    timestamp_column("owner_lease_expires_at"),
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
    format_version_column(),
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
    timestamp_column("started_at"),
    timestamp_column("finished_at"),
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

provider_sessions = Table(
    "provider_sessions",
    metadata,
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("task_id", String(512), primary_key=True),
    format_version_column(),
    Column("provider", String(255), nullable=False),
    Column("state_json", Text, nullable=False),
    timestamp_column("updated_at", nullable=False),
    Column("session_name", String(255), nullable=True),
    Index("ix_provider_sessions_session_name", "session_name"),
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
    timestamp_column("lease_expires_at"),
    timestamp_column("ready_at", nullable=False),
    timestamp_column("started_at"),
    timestamp_column("finished_at"),
    Column("outcome_json", Text),
    CheckConstraint("state IN ('ready', 'claimed', 'done')", name="state"),
    # The claim's order over the ready rows (a claim reads the few it takes, not every
    # ready row of the batch), and the leases a reclaim looks at: partial indexes, so a
    # claim's fence check (by the primary key) has no index on ``state`` to stray into
    # (0017). Their statements name the state as a literal, for the planner to match.
    Index(
        "ix_task_claims_ready",
        "ready_at",
        "run_id",
        "task_id",
        sqlite_where=text("state = 'ready'"),
        postgresql_where=text("state = 'ready'"),
    ),
    Index(
        "ix_task_claims_leases",
        "lease_expires_at",
        sqlite_where=text("state = 'claimed'"),
        postgresql_where=text("state = 'claimed'"),
    ),
)
