"""The tables of the effect journal (docs/durable-execution.md): every effect and the
conclusions reconciled onto it, the approvals and questions that gate it, the tool calls
that committed with it, and the budget it was reserved against.
"""

from __future__ import annotations

from sqlalchemy import (
    CheckConstraint,
    Column,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    String,
    Table,
    Text,
)

from agentctl.store.table_base import FLAG, format_version_column, metadata, timestamp_column

__all__ = [
    "approvals",
    "budget_pending_usage",
    "budget_reservations",
    "budgets",
    "effects",
    "reconciliations",
    "tool_calls",
]


effects = Table(
    "effects",
    metadata,
    Column("id", String(64), primary_key=True),
    format_version_column(),
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("task_id", String(512), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("ordinal", Integer, nullable=False),
    Column("operation", String(120), nullable=False),
    Column("input_digest", String(80), nullable=False),
    Column("effect_class", String(40), nullable=False),
    Column("idempotency", String(40), nullable=False),
    Column("risk", String(20), nullable=False),
    Column("idempotency_key", String(255), nullable=True),
    Column("status", String(30), nullable=False),
    Column("request_json", Text, nullable=True),
    Column("result_json", Text, nullable=True),
    Column("error_json", Text, nullable=True),
    Column("confirmed", FLAG, nullable=False, server_default="0"),
    Column("trace_id", String(64), nullable=True),
    Column("span_id", String(32), nullable=True),
    timestamp_column("requested_at", nullable=False),
    timestamp_column("started_at"),
    timestamp_column("finished_at"),
    CheckConstraint(
        "status IN ('requested', 'waiting_for_approval', 'started', 'succeeded', 'failed',"
        " 'cancelled', 'uncertain')",
        name="status",
    ),
    # No index on ``status``: each effect's status changes twice, and an indexed ``status``
    # made both updates write into every index (no HOT update); a run's effects by status
    # are read through the ``run_id`` prefix of this one (0017).
    Index(None, "run_id", "task_id", "attempt", "ordinal"),
)

reconciliations = Table(
    "reconciliations",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    format_version_column(),
    Column("effect_id", String(64), ForeignKey("effects.id", ondelete="CASCADE"), nullable=False),
    Column("status", String(20), nullable=False),
    Column("reason", Text, nullable=False),
    Column("actor", String(255), nullable=False),
    Column("evidence", Text, nullable=True),
    Column("result_json", Text, nullable=True),
    Column("result_validated", FLAG, nullable=False, server_default="0"),
    Column("compensation_effect_id", String(64), nullable=True),
    Column("supersedes_id", Integer, ForeignKey("reconciliations.id"), nullable=True),
    timestamp_column("created_at", nullable=False),
    CheckConstraint("status IN ('applied', 'not_applied', 'compensated')", name="status"),
    Index(None, "effect_id", "id"),
)

approvals = Table(
    "approvals",
    metadata,
    Column("id", String(80), primary_key=True),
    format_version_column(),
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("task_id", String(512), nullable=False),
    Column("effect_id", String(64), nullable=True),
    Column("kind", String(20), nullable=False),
    Column("prompt", Text, nullable=False),
    Column("choices_json", Text, nullable=True),
    Column("answer_schema_json", Text, nullable=True),
    Column("input_json", Text, nullable=True),
    Column("risk", String(20), nullable=True),
    Column("status", String(20), nullable=False),
    Column("resolver", String(255), nullable=True),
    Column("answer_json", Text, nullable=True),
    Column("reason", Text, nullable=True),
    timestamp_column("created_at", nullable=False),
    timestamp_column("resolved_at"),
    CheckConstraint("kind IN ('approval', 'question')", name="kind"),
    CheckConstraint(
        "status IN ('pending', 'approved', 'rejected', 'answered', 'expired')", name="status"
    ),
    Index(None, "run_id", "status"),
    Index(None, "status", "created_at"),
)

tool_calls = Table(
    "tool_calls",
    metadata,
    Column("id", String(80), primary_key=True),
    format_version_column(),
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("task_id", String(512), nullable=False),
    Column("effect_id", String(64), ForeignKey("effects.id", ondelete="CASCADE")),
    Column("tool", String(255), nullable=False),
    Column("status", String(30), nullable=False),
    Column("arguments_json", Text, nullable=False),
    Column("result_json", Text, nullable=True),
    Column("error_json", Text, nullable=True),
    timestamp_column("created_at", nullable=False),
    timestamp_column("finished_at"),
    Index(None, "run_id", "task_id"),
    Index(None, "effect_id"),
)

budgets = Table(
    "budgets",
    metadata,
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("resource", String(60), primary_key=True),
    Column("limit_units", Float, nullable=True),
    Column("reserved_units", Float, nullable=False, server_default="0"),
    Column("used_units", Float, nullable=False, server_default="0"),
    Column("pricing_version", String(40), nullable=True),
    timestamp_column("updated_at", nullable=False),
)

budget_reservations = Table(
    "budget_reservations",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(80), nullable=False),
    Column("resource", String(60), nullable=False),
    Column("effect_id", String(64), nullable=True),
    Column("units", Float, nullable=False),
    Column("status", String(20), nullable=False),
    timestamp_column("created_at", nullable=False),
    timestamp_column("settled_at"),
    ForeignKeyConstraint(
        ["run_id", "resource"], ["budgets.run_id", "budgets.resource"], ondelete="CASCADE"
    ),
    CheckConstraint("status IN ('held', 'settled', 'released')", name="status"),
    # The foreign key's columns (a budget row's delete finds its reservations), not the
    # ``status`` that settling changes (0017: that made every settling update non-HOT).
    Index(None, "run_id", "resource"),
    Index(None, "effect_id"),
)

#: Usage of a resource without a limit that a claimed task measured (a PostgreSQL worker),
#: written in the worker's fenced outcome transaction without the run's lock; the run's
#: owner posts it into ``budgets.used_units`` and deletes it in one of its writes
#: (docs/budgets.md, "Workers").
budget_pending_usage = Table(
    "budget_pending_usage",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(80), nullable=False),
    Column("resource", String(60), nullable=False),
    Column("effect_id", String(64), nullable=True),
    Column("units", Float, nullable=False),
    timestamp_column("created_at", nullable=False),
    ForeignKeyConstraint(
        ["run_id", "resource"], ["budgets.run_id", "budgets.resource"], ondelete="CASCADE"
    ),
    Index(None, "run_id"),
)
