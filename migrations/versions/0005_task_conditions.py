"""Keep every condition decision on the task that made it.

Why: a skipped task recorded its ``when`` expression, result and context digest in its
output, but a condition that evaluated true — and the guard of every loop iteration that
ran — left no trace, so an operator could not tell from the records why a task ran. The
nullable ``condition_json`` column holds ``{kind, expression, result, contextDigest}`` for
every evaluation, true or false; replay and retry copy it with the task's result.

Revision ID: 0005_task_conditions
Revises: 0004_fencing
Create Date: 2026-12-02 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_task_conditions"
down_revision: str | None = "0004_fencing"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("condition_json", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_column("condition_json")
