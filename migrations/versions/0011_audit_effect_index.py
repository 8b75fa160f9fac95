"""Drop the audit chain's index on ``effect_id``: nothing reads events by effect.

Why: every transition appends one audit event, and most events have no effect at all,
yet each insert also wrote an entry into ``ix_audit_events_effect_id`` (one more page in
the write-ahead log per commit, about a tenth of a transition's pages). No query looks
audit events up by effect id (an effect's history lives in ``effects`` and
``reconciliations``; the chain is read per run, in ``seq`` order), so the index cost a
page per step and disk space for nothing. ``downgrade`` puts it back.

Revision ID: 0011_audit_effect_index
Revises: 0010_task_claims
Create Date: 2026-12-01 03:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011_audit_effect_index"
down_revision: str | None = "0010_task_claims"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index(op.f("ix_audit_events_effect_id"), table_name="audit_events")


def downgrade() -> None:
    op.create_index(op.f("ix_audit_events_effect_id"), "audit_events", ["effect_id"], unique=False)
