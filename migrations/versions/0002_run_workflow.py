"""Store the validated workflow document and its file on each run.

Why: a run must be executable from its own row. The compiled plan names actions, agents,
tools and providers but does not carry their definitions, and recompiling the file on
resume would silently pick up edits made after the run started. Keeping the validated
document (with defaults) beside the plan makes resume, replay and repair read exactly what
the run was created with; ``workflow_file`` records where it came from for operators.

Revision ID: 0002_run_workflow
Revises: 0001_initial
Create Date: 2026-11-29 17:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_run_workflow"
down_revision: str | None = "0001_initial"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("workflow_json", sa.Text(), server_default="{}", nullable=False)
        )
        batch_op.add_column(sa.Column("workflow_file", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("workflow_file")
        batch_op.drop_column("workflow_json")
