"""Name provider sessions so a later run can continue them.

Why: an agent task may continue the conversation of an earlier run's task
(``session: {from: {run, task}}``) or a session it names (``session: {name: reviewer}``).
The nullable ``session_name`` column holds that name on the rows of tasks that declare one,
indexed so the newest session of a name is found without reading every row; rows of
tasks without a name keep it null.

Revision ID: 0008_session_names
Revises: 0007_schedules
Create Date: 2026-12-03 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_session_names"
down_revision: str | None = "0007_schedules"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("provider_sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("session_name", sa.String(length=255), nullable=True))
        batch_op.create_index("ix_provider_sessions_session_name", ["session_name"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("provider_sessions", schema=None) as batch_op:
        batch_op.drop_index("ix_provider_sessions_session_name")
        batch_op.drop_column("session_name")
