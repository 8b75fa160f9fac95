"""Audit lanes: a claimed task's events wait in a lane of their own until the run's owner
adopts them into the run's chain.

Why: a worker executing a claimed task (PostgreSQL workers) appended its events
(``effect.requested``, ``effect.succeeded`` …) to the run's audit chain itself, which
meant reading the chain's head under the run's advisory lock and holding that lock to the
commit, WAL fsync included: every worker of one run queued on it. Now each claim (run, task,
fencing token) has a lane, chained on its own and written by the claim's holder alone (the
claim's fence proves it holds it, so the lane's head lives in its memory: no read, no
lock). The run's owner, which holds the run's lock anyway, moves a lane into the chain once
its claim can no longer write (done, withdrawn or claimed again), before the task's own
transition event, and deletes it (docs/durable-execution.md, "Audit lanes").

The same release's second half, for the same reason (the run's lock a worker took late and
held through its commit): ``budget_pending_usage`` holds usage of resources without a limit
that a claimed task measured, written in its fenced outcome transaction without the run's
lock; the run's owner posts it into ``budgets.used_units`` (and deletes it) in the writes
that adopt lanes (docs/budgets.md, "Workers").

``downgrade`` drops both tables, and refuses while either still holds rows: those are a live
claim's (or a crashed owner's not yet adopted) and would be lost; let the runs go on (or
finish) under this release first.

Revision ID: 0016_audit_lanes
Revises: 0015_plain_results
Create Date: 2026-12-02 15:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_audit_lanes"
down_revision: str | None = "0015_plain_results"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "audit_lane_events",
        sa.Column("run_id", sa.String(length=80), nullable=False),
        sa.Column("task_id", sa.String(length=512), nullable=False),
        sa.Column("claim_token", sa.Integer(), nullable=False),
        sa.Column("lane_seq", sa.Integer(), nullable=False),
        sa.Column("format_version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("kind", sa.String(length=80), nullable=False),
        sa.Column("effect_id", sa.String(length=64), nullable=True),
        sa.Column("payload_json", sa.Text(), nullable=False),
        sa.Column("prev_digest", sa.String(length=80), nullable=False),
        sa.Column("digest", sa.String(length=80), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("trace_id", sa.String(length=64), nullable=True),
        sa.Column("span_id", sa.String(length=32), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
            name=op.f("fk_audit_lane_events_run_id_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "run_id", "task_id", "claim_token", "lane_seq", name=op.f("pk_audit_lane_events")
        ),
    )
    op.create_table(
        "budget_pending_usage",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=80), nullable=False),
        sa.Column("resource", sa.String(length=60), nullable=False),
        sa.Column("effect_id", sa.String(length=64), nullable=True),
        sa.Column("units", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id", "resource"],
            ["budgets.run_id", "budgets.resource"],
            name=op.f("fk_budget_pending_usage_run_id_budgets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_budget_pending_usage")),
    )
    with op.batch_alter_table("budget_pending_usage", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_budget_pending_usage_run_id"), ["run_id"], unique=False
        )


def downgrade() -> None:
    conn = op.get_bind()
    pending = conn.exec_driver_sql("SELECT count(*) FROM audit_lane_events").scalar()
    if pending:
        raise RuntimeError(
            f"{pending} audit events of claimed tasks are not adopted into their runs' "
            "chains yet; let those runs' owners commit them under this release first"
        )
    unposted = conn.exec_driver_sql("SELECT count(*) FROM budget_pending_usage").scalar()
    if unposted:
        raise RuntimeError(
            f"{unposted} usage rows of claimed tasks are not posted into their runs' budget "
            "ledgers yet; let those runs' owners post them under this release first"
        )
    with op.batch_alter_table("budget_pending_usage", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_budget_pending_usage_run_id"))
    op.drop_table("budget_pending_usage")
    op.drop_table("audit_lane_events")
