"""Trace and span ids on the records an execution writes.

Why: with the OpenTelemetry integration enabled, an operator who finds a slow or failed
span in a tracing system must be able to find the effect, task attempt or audit event it
belongs to, and the other way round. ``effects.trace_id`` existed but had no span id;
tasks and audit events had neither. Runs keep the ids of their latest execution's root
span, so a resume can link its new root span to the earlier one. Every column is nullable:
nothing is written when telemetry is off, and older rows stay as they were.

Revision ID: 0006_trace_ids
Revises: 0005_task_conditions
Create Date: 2026-11-30 15:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_trace_ids"
down_revision: str | None = "0005_task_conditions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ADDED = {
    "runs": ("trace_id", "span_id"),
    "tasks": ("trace_id", "span_id"),
    "audit_events": ("trace_id", "span_id"),
    "effects": ("span_id",),
}


def _column(name: str) -> sa.Column:  # type: ignore[type-arg]
    return sa.Column(name, sa.String(64 if name == "trace_id" else 32), nullable=True)


def upgrade() -> None:
    for table, columns in _ADDED.items():
        with op.batch_alter_table(table, schema=None) as batch_op:
            for name in columns:
                batch_op.add_column(_column(name))


def downgrade() -> None:
    for table, columns in _ADDED.items():
        with op.batch_alter_table(table, schema=None) as batch_op:
            for name in reversed(columns):
                batch_op.drop_column(name)
