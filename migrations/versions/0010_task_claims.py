"""Task claims: the ready tasks of one run that any worker may execute.

Why: with PostgreSQL, a run's parallel batch spreads over ``agentctl worker`` processes.
The run's owner publishes each task of a batch as a ``task_claims`` row (``ready``, with the
rendered vars it runs with and a digest of what it is based on); a worker with free capacity
claims the row (``claimed``: its name, a lease, and a fencing token bumped by every claim),
executes the task through the ordinary effect protocol, and records the outcome on the row
(``done``) in one transaction fenced by that token. The owner commits the batch from the
outcomes, in plan order, and removes the rows. A worker that dies leaves a ``claimed`` row
whose lease runs out; another worker claims it again, and the first one's late writes are
refused by the token. The index serves the claim query (ready rows, or leases run out).
SQLite stores never write these rows: one process executes a run's tasks there.

Revision ID: 0010_task_claims
Revises: 0009_plan_rows
Create Date: 2026-11-30 17:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_task_claims"
down_revision: str | None = "0009_plan_rows"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "task_claims",
        sa.Column("run_id", sa.String(length=80), nullable=False),
        sa.Column("task_id", sa.String(length=512), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("basis", sa.String(length=80), nullable=False),
        sa.Column("payload_json", sa.Text(), nullable=False),
        sa.Column("token", sa.Integer(), server_default="0", nullable=False),
        sa.Column("worker", sa.String(length=255), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ready_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome_json", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "state IN ('ready', 'claimed', 'done')", name=op.f("ck_task_claims_state")
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_task_claims_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "task_id", name=op.f("pk_task_claims")),
    )
    op.create_index(
        op.f("ix_task_claims_state_ready_at"), "task_claims", ["state", "ready_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_task_claims_state_ready_at"), table_name="task_claims")
    op.drop_table("task_claims")
