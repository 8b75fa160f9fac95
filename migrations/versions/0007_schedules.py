"""Schedules, monitors and their firings: runs that start by themselves.

Why: ``agentctl schedule`` and ``agentctl daemon`` start runs from cron expressions and
intervals. A schedule row keeps its timing, inputs, catch-up and overlap policies and the
cursor up to which its slots were decided. Each decided slot is a ``schedule_firings`` row,
unique per (schedule, slot) and committed before the run is created, then linked to the run
in the run's own creating transaction: a slot is never started twice (two daemons, a
restart after a crash) and never silently lost (a recorded slot without a run is finished
by the next daemon). A monitor is a schedule row whose slots observe files, an HTTP
endpoint or a command (``monitor_json``); each observation is a ``monitor_observations`` row,
unique per (monitor, slot), and a change starts a run through the same firing record.

Revision ID: 0007_schedules
Revises: 0006_trace_ids
Create Date: 2026-11-30 15:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_schedules"
down_revision: str | None = "0006_trace_ids"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("format_version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("workflow", sa.Text(), nullable=False),
        sa.Column("workflow_file", sa.Text(), nullable=False),
        sa.Column("project_dir", sa.Text(), nullable=False),
        sa.Column("workspace", sa.Text(), nullable=True),
        sa.Column("cron", sa.String(length=255), nullable=True),
        sa.Column("interval_seconds", sa.Integer(), nullable=True),
        sa.Column("timezone", sa.String(length=64), server_default="UTC", nullable=False),
        sa.Column("inputs_json", sa.Text(), server_default="{}", nullable=False),
        sa.Column("catch_up", sa.String(length=10), server_default="latest", nullable=False),
        sa.Column("max_catch_up", sa.Integer(), server_default="10", nullable=False),
        sa.Column("overlap", sa.String(length=10), server_default="skip", nullable=False),
        sa.Column("jitter_seconds", sa.Integer(), server_default="0", nullable=False),
        sa.Column("grace_seconds", sa.Integer(), server_default="60", nullable=False),
        sa.Column("paused", sa.Boolean(), server_default="0", nullable=False),
        sa.Column("anchor_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("cursor_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("missed", sa.Integer(), server_default="0", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("monitor_json", sa.Text(), nullable=True),
        sa.Column("observed_json", sa.Text(), nullable=True),
        sa.Column("pending_json", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "catch_up IN ('skip', 'latest', 'all')", name=op.f("ck_schedules_catch_up")
        ),
        sa.CheckConstraint(
            "overlap IN ('skip', 'queue', 'allow')", name=op.f("ck_schedules_overlap")
        ),
        sa.CheckConstraint(
            "(cron IS NULL) <> (interval_seconds IS NULL)", name=op.f("ck_schedules_timing")
        ),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_schedules")),
    )
    op.create_table(
        "schedule_firings",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("format_version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("schedule_name", sa.String(length=255), nullable=False),
        sa.Column("slot_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("trigger", sa.String(length=10), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("run_id", sa.String(length=80), nullable=True),
        sa.Column("missed", sa.Integer(), server_default="0", nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("inputs_json", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "trigger IN ('cron', 'interval', 'manual', 'monitor')",
            name=op.f("ck_schedule_firings_trigger"),
        ),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
            name=op.f("fk_schedule_firings_run_id_runs"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["schedule_name"],
            ["schedules.name"],
            name=op.f("fk_schedule_firings_schedule_name_schedules"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedule_firings")),
        sa.UniqueConstraint(
            "schedule_name", "slot_at", name=op.f("uq_schedule_firings_schedule_name_slot_at")
        ),
    )
    op.create_index(
        op.f("ix_schedule_firings_run_id"), "schedule_firings", ["run_id"], unique=False
    )
    op.create_index(
        op.f("ix_schedule_firings_status"), "schedule_firings", ["status"], unique=False
    )
    op.create_table(
        "monitor_observations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("monitor_name", sa.String(length=255), nullable=False),
        sa.Column("slot_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("digest", sa.String(length=80), nullable=False),
        sa.Column("value_json", sa.Text(), nullable=False),
        sa.Column("outcome", sa.String(length=20), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "outcome IN ('baseline', 'unchanged', 'pending', 'changed')",
            name=op.f("ck_monitor_observations_outcome"),
        ),
        sa.ForeignKeyConstraint(
            ["monitor_name"],
            ["schedules.name"],
            name=op.f("fk_monitor_observations_monitor_name_schedules"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_monitor_observations")),
        sa.UniqueConstraint(
            "monitor_name", "slot_at", name=op.f("uq_monitor_observations_monitor_name_slot_at")
        ),
    )


def downgrade() -> None:
    op.drop_table("monitor_observations")
    op.drop_index(op.f("ix_schedule_firings_status"), table_name="schedule_firings")
    op.drop_index(op.f("ix_schedule_firings_run_id"), table_name="schedule_firings")
    op.drop_table("schedule_firings")
    op.drop_table("schedules")
