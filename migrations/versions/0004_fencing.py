"""Fencing tokens on run ownership, and one live compensation per source run.

Why: a lease alone let a second process take over a run whose owner was still working
(a task longer than the lease), after which both wrote. ``owner_token`` is incremented by
every claim; each write of an owner checks it inside its transaction, so the previous
owner's writes fail instead of overwriting. The partial unique index makes "one
compensation run at a time per source run" a property of the database: two concurrent
``agentctl compensate`` commands cannot both create one.

Revision ID: 0004_fencing
Revises: 0003_memory_search
Create Date: 2026-11-30 14:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_fencing"
down_revision: str | None = "0003_memory_search"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("owner_token", sa.Integer(), server_default="0", nullable=False)
        )
    op.create_index(
        "uq_runs_live_compensation",
        "runs",
        ["source_run_id"],
        unique=True,
        sqlite_where=sa.text("mode = 'compensate' AND status IN ('running', 'paused')"),
        postgresql_where=sa.text("mode = 'compensate' AND status IN ('running', 'paused')"),
    )


def downgrade() -> None:
    op.drop_index("uq_runs_live_compensation", table_name="runs")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("owner_token")
