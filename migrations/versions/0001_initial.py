"""Initial schema: every durable record of docs/durable-execution.md.

Why: agentctl's correctness boundary is this database. The first revision creates the run,
task, effect, reconciliation, approval/question, checkpoint, audit event, provider session,
tool call, budget/reservation, artifact blob/ref/lease and long-term memory tables at once,
so every later feature evolves them through its own revision instead of ad-hoc DDL.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-29 16:42:50.316021
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Flags are stored as 0/1 on both dialects: SQLite has no boolean type, and the store's
# driver-level SQL writes and compares them as integers (``is_snapshot = 1``), which a
# PostgreSQL BOOLEAN column would refuse. On SQLite this renders exactly as before.
_FLAG = sa.Boolean().with_variant(sa.SmallInteger(), "postgresql")
# SQLite integers are 64-bit; PostgreSQL's INTEGER is 32-bit, too small for a blob's size.
_SIZE = sa.Integer().with_variant(sa.BigInteger(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "artifact_blobs",
        sa.Column("digest", sa.String(length=80), nullable=False),
        sa.Column("size_bytes", _SIZE, nullable=False),
        sa.Column("media_type", sa.String(length=255), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("verified_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("digest", name=op.f("pk_artifact_blobs")),
    )
    op.create_table(
        "artifact_leases",
        sa.Column("id", sa.String(length=80), nullable=False),
        sa.Column("blob_digest", sa.String(length=80), nullable=True),
        sa.Column("holder", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_artifact_leases")),
    )
    with op.batch_alter_table("artifact_leases", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_artifact_leases_blob_digest"), ["blob_digest"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_artifact_leases_expires_at"), ["expires_at"], unique=False
        )

    op.create_table(
        "memory_entries",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("format_version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("namespace", sa.String(length=255), nullable=False),
        sa.Column("key", sa.String(length=512), nullable=False),
        sa.Column("value_type", sa.String(length=10), nullable=False),
        sa.Column("value_json", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("metadata_json", sa.Text(), server_default="{}", nullable=False),
        sa.Column("embedding", sa.LargeBinary(), nullable=True),
        sa.Column("embedding_model", sa.String(length=255), nullable=True),
        sa.Column("provenance_json", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "value_type IN ('text', 'json')", name=op.f("ck_memory_entries_value_type")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_entries")),
        sa.UniqueConstraint("namespace", "key", name=op.f("uq_memory_entries_namespace_key")),
    )
    with op.batch_alter_table("memory_entries", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_memory_entries_expires_at"), ["expires_at"], unique=False
        )

    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=80), nullable=False),
        sa.Column("format_version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("workflow_name", sa.String(length=255), nullable=False),
        sa.Column("workflow_digest", sa.String(length=80), nullable=False),
        sa.Column("plan_digest", sa.String(length=80), nullable=False),
        sa.Column("plan_json", sa.Text(), nullable=False),
        sa.Column("inputs_json", sa.Text(), server_default="{}", nullable=False),
        sa.Column("mode", sa.String(length=20), server_default="execute", nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("workspace", sa.Text(), nullable=True),
        sa.Column("source_run_id", sa.String(length=80), nullable=True),
        sa.Column("relation", sa.String(length=20), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("output_json", sa.Text(), nullable=True),
        sa.Column("error_json", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deadline_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cancel_requested", _FLAG, server_default="0", nullable=False),
        sa.Column("cancel_reason", sa.Text(), nullable=True),
        sa.Column("owner_id", sa.String(length=80), nullable=True),
        sa.Column("owner_lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "mode IN ('execute', 'replay', 'retry', 'repair', 'fork', 'compensate')",
            name=op.f("ck_runs_mode"),
        ),
        sa.ForeignKeyConstraint(
            ["source_run_id"],
            ["runs.id"],
            name=op.f("fk_runs_source_run_id_runs"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_runs_created_at"), ["created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_source_run_id"), ["source_run_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_runs_status_created_at"), ["status", "created_at"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_runs_workflow_name_created_at"),
            ["workflow_name", "created_at"],
            unique=False,
        )

    op.create_table(
        "approvals",
        sa.Column("id", sa.String(length=80), nullable=False),
        sa.Column("format_version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("run_id", sa.String(length=80), nullable=False),
        sa.Column("task_id", sa.String(length=512), nullable=False),
        sa.Column("effect_id", sa.String(length=64), nullable=True),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("choices_json", sa.Text(), nullable=True),
        sa.Column("answer_schema_json", sa.Text(), nullable=True),
        sa.Column("input_json", sa.Text(), nullable=True),
        sa.Column("risk", sa.String(length=20), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("resolver", sa.String(length=255), nullable=True),
        sa.Column("answer_json", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("kind IN ('approval', 'question')", name=op.f("ck_approvals_kind")),
        sa.CheckConstraint(
            "status IN ('pending', 'approved', 'rejected', 'answered', 'expired')",
            name=op.f("ck_approvals_status"),
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_approvals_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_approvals")),
    )
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_approvals_run_id_status"), ["run_id", "status"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_approvals_status_created_at"), ["status", "created_at"], unique=False
        )

    op.create_table(
        "artifact_refs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("format_version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("blob_digest", sa.String(length=80), nullable=False),
        sa.Column("run_id", sa.String(length=80), nullable=False),
        sa.Column("task_id", sa.String(length=512), nullable=False),
        sa.Column("name", sa.String(length=512), nullable=False),
        sa.Column("version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("path", sa.Text(), nullable=True),
        sa.Column("definition_fingerprint", sa.String(length=80), nullable=True),
        sa.Column("input_digest", sa.String(length=80), nullable=True),
        sa.Column("output_digest", sa.String(length=80), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["blob_digest"],
            ["artifact_blobs.digest"],
            name=op.f("fk_artifact_refs_blob_digest_artifact_blobs"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_artifact_refs_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_artifact_refs")),
        sa.UniqueConstraint("name", "version", name=op.f("uq_artifact_refs_name_version")),
    )
    with op.batch_alter_table("artifact_refs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_artifact_refs_blob_digest"), ["blob_digest"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_artifact_refs_run_id_task_id"), ["run_id", "task_id"], unique=False
        )

    op.create_table(
        "audit_events",
        sa.Column("run_id", sa.String(length=80), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("format_version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("kind", sa.String(length=80), nullable=False),
        sa.Column("task_id", sa.String(length=512), nullable=True),
        sa.Column("effect_id", sa.String(length=64), nullable=True),
        sa.Column("payload_json", sa.Text(), nullable=False),
        sa.Column("prev_digest", sa.String(length=80), nullable=True),
        sa.Column("digest", sa.String(length=80), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_audit_events_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "seq", name=op.f("pk_audit_events")),
    )
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_events_effect_id"), ["effect_id"], unique=False)

    op.create_table(
        "budgets",
        sa.Column("run_id", sa.String(length=80), nullable=False),
        sa.Column("resource", sa.String(length=60), nullable=False),
        sa.Column("limit_units", sa.Float(), nullable=True),
        sa.Column("reserved_units", sa.Float(), server_default="0", nullable=False),
        sa.Column("used_units", sa.Float(), server_default="0", nullable=False),
        sa.Column("pricing_version", sa.String(length=40), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_budgets_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "resource", name=op.f("pk_budgets")),
    )
    op.create_table(
        "checkpoints",
        sa.Column("run_id", sa.String(length=80), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("format_version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("transition", sa.String(length=600), nullable=False),
        sa.Column("memory_delta_json", sa.Text(), server_default="{}", nullable=False),
        sa.Column("is_snapshot", _FLAG, server_default="0", nullable=False),
        sa.Column("checksum", sa.String(length=80), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_checkpoints_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "seq", name=op.f("pk_checkpoints")),
    )
    op.create_table(
        "effects",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("format_version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("run_id", sa.String(length=80), nullable=False),
        sa.Column("task_id", sa.String(length=512), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("operation", sa.String(length=120), nullable=False),
        sa.Column("input_digest", sa.String(length=80), nullable=False),
        sa.Column("effect_class", sa.String(length=40), nullable=False),
        sa.Column("idempotency", sa.String(length=40), nullable=False),
        sa.Column("risk", sa.String(length=20), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=True),
        sa.Column("status", sa.String(length=30), nullable=False),
        sa.Column("request_json", sa.Text(), nullable=True),
        sa.Column("result_json", sa.Text(), nullable=True),
        sa.Column("error_json", sa.Text(), nullable=True),
        sa.Column("confirmed", _FLAG, server_default="0", nullable=False),
        sa.Column("trace_id", sa.String(length=64), nullable=True),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "status IN ('requested', 'waiting_for_approval', 'started', 'succeeded', 'failed',"
            " 'cancelled', 'uncertain')",
            name=op.f("ck_effects_status"),
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_effects_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_effects")),
    )
    with op.batch_alter_table("effects", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_effects_run_id_status"), ["run_id", "status"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_effects_run_id_task_id_attempt_ordinal"),
            ["run_id", "task_id", "attempt", "ordinal"],
            unique=False,
        )

    op.create_table(
        "provider_sessions",
        sa.Column("run_id", sa.String(length=80), nullable=False),
        sa.Column("task_id", sa.String(length=512), nullable=False),
        sa.Column("format_version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("provider", sa.String(length=255), nullable=False),
        sa.Column("state_json", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
            name=op.f("fk_provider_sessions_run_id_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", "task_id", name=op.f("pk_provider_sessions")),
    )
    op.create_table(
        "tasks",
        sa.Column("run_id", sa.String(length=80), nullable=False),
        sa.Column("task_id", sa.String(length=512), nullable=False),
        sa.Column("format_version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("attempt", sa.Integer(), server_default="0", nullable=False),
        sa.Column("disposition", sa.String(length=20), nullable=True),
        sa.Column("definition_fingerprint", sa.String(length=80), nullable=True),
        sa.Column("input_digest", sa.String(length=80), nullable=True),
        sa.Column("output_contract_fingerprint", sa.String(length=80), nullable=True),
        sa.Column("output_json", sa.Text(), nullable=True),
        sa.Column("output_digest", sa.String(length=80), nullable=True),
        sa.Column("state_delta_json", sa.Text(), nullable=True),
        sa.Column("state_delta_digest", sa.String(length=80), nullable=True),
        sa.Column("artifact_manifest_json", sa.Text(), nullable=True),
        sa.Column("error_json", sa.Text(), nullable=True),
        sa.Column("source_run_id", sa.String(length=80), nullable=True),
        sa.Column("source_task_id", sa.String(length=512), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "disposition IS NULL OR disposition IN ('executed', 'reused', 'recorded')",
            name=op.f("ck_tasks_disposition"),
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_tasks_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "task_id", name=op.f("pk_tasks")),
    )
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_tasks_run_id_ordinal"), ["run_id", "ordinal"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_tasks_run_id_status"), ["run_id", "status"], unique=False
        )

    op.create_table(
        "budget_reservations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=80), nullable=False),
        sa.Column("resource", sa.String(length=60), nullable=False),
        sa.Column("effect_id", sa.String(length=64), nullable=True),
        sa.Column("units", sa.Float(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("settled_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "status IN ('held', 'settled', 'released')", name=op.f("ck_budget_reservations_status")
        ),
        sa.ForeignKeyConstraint(
            ["run_id", "resource"],
            ["budgets.run_id", "budgets.resource"],
            name=op.f("fk_budget_reservations_run_id_budgets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_budget_reservations")),
    )
    with op.batch_alter_table("budget_reservations", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_budget_reservations_effect_id"), ["effect_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_budget_reservations_run_id_status"), ["run_id", "status"], unique=False
        )

    op.create_table(
        "reconciliations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("format_version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("effect_id", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("actor", sa.String(length=255), nullable=False),
        sa.Column("evidence", sa.Text(), nullable=True),
        sa.Column("result_json", sa.Text(), nullable=True),
        sa.Column("result_validated", _FLAG, server_default="0", nullable=False),
        sa.Column("compensation_effect_id", sa.String(length=64), nullable=True),
        sa.Column("supersedes_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "status IN ('applied', 'not_applied', 'compensated')",
            name=op.f("ck_reconciliations_status"),
        ),
        sa.ForeignKeyConstraint(
            ["effect_id"],
            ["effects.id"],
            name=op.f("fk_reconciliations_effect_id_effects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["supersedes_id"],
            ["reconciliations.id"],
            name=op.f("fk_reconciliations_supersedes_id_reconciliations"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reconciliations")),
    )
    with op.batch_alter_table("reconciliations", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_reconciliations_effect_id_id"), ["effect_id", "id"], unique=False
        )

    op.create_table(
        "tool_calls",
        sa.Column("id", sa.String(length=80), nullable=False),
        sa.Column("format_version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("run_id", sa.String(length=80), nullable=False),
        sa.Column("task_id", sa.String(length=512), nullable=False),
        sa.Column("effect_id", sa.String(length=64), nullable=True),
        sa.Column("tool", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=30), nullable=False),
        sa.Column("arguments_json", sa.Text(), nullable=False),
        sa.Column("result_json", sa.Text(), nullable=True),
        sa.Column("error_json", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["effect_id"],
            ["effects.id"],
            name=op.f("fk_tool_calls_effect_id_effects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_tool_calls_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tool_calls")),
    )
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tool_calls_effect_id"), ["effect_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_tool_calls_run_id_task_id"), ["run_id", "task_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tool_calls_run_id_task_id"))
        batch_op.drop_index(batch_op.f("ix_tool_calls_effect_id"))

    op.drop_table("tool_calls")
    with op.batch_alter_table("reconciliations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_reconciliations_effect_id_id"))

    op.drop_table("reconciliations")
    with op.batch_alter_table("budget_reservations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_budget_reservations_run_id_status"))
        batch_op.drop_index(batch_op.f("ix_budget_reservations_effect_id"))

    op.drop_table("budget_reservations")
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tasks_run_id_status"))
        batch_op.drop_index(batch_op.f("ix_tasks_run_id_ordinal"))

    op.drop_table("tasks")
    op.drop_table("provider_sessions")
    with op.batch_alter_table("effects", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_effects_run_id_task_id_attempt_ordinal"))
        batch_op.drop_index(batch_op.f("ix_effects_run_id_status"))

    op.drop_table("effects")
    op.drop_table("checkpoints")
    op.drop_table("budgets")
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_events_effect_id"))

    op.drop_table("audit_events")
    with op.batch_alter_table("artifact_refs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_artifact_refs_run_id_task_id"))
        batch_op.drop_index(batch_op.f("ix_artifact_refs_blob_digest"))

    op.drop_table("artifact_refs")
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_approvals_status_created_at"))
        batch_op.drop_index(batch_op.f("ix_approvals_run_id_status"))

    op.drop_table("approvals")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_runs_workflow_name_created_at"))
        batch_op.drop_index(batch_op.f("ix_runs_status_created_at"))
        batch_op.drop_index(batch_op.f("ix_runs_source_run_id"))
        batch_op.drop_index(batch_op.f("ix_runs_created_at"))

    op.drop_table("runs")
    with op.batch_alter_table("memory_entries", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_memory_entries_expires_at"))

    op.drop_table("memory_entries")
    with op.batch_alter_table("artifact_leases", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_artifact_leases_expires_at"))
        batch_op.drop_index(batch_op.f("ix_artifact_leases_blob_digest"))

    op.drop_table("artifact_leases")
    op.drop_table("artifact_blobs")
