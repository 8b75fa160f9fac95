"""The tables of a run's history (docs/durable-execution.md): the checkpoint that seals each
transition with its working-memory delta, the hash-chained audit events, and the lanes a
claimed task's events wait in until the run's owner adopts them into the chain.
"""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Integer, String, Table, Text

from agentctl.store.table_base import FLAG, format_version_column, metadata, timestamp_column

__all__ = ["audit_events", "audit_lane_events", "checkpoints"]


checkpoints = Table(
    "checkpoints",
    metadata,
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    format_version_column(),
    Column("transition", String(600), nullable=False),
    Column("memory_delta_json", Text, nullable=False, server_default="{}"),
    Column("is_snapshot", FLAG, nullable=False, server_default="0"),
    Column("checksum", String(80), nullable=False),
    timestamp_column("created_at", nullable=False),
)

audit_events = Table(
    "audit_events",
    metadata,
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    format_version_column(),
    Column("kind", String(80), nullable=False),
    Column("task_id", String(512), nullable=True),
    Column("effect_id", String(64), nullable=True),
    Column("payload_json", Text, nullable=False),
    Column("prev_digest", String(80), nullable=True),
    Column("digest", String(80), nullable=False),
    timestamp_column("created_at", nullable=False),
    # The span current when the event was written (not part of the chained digest).
    Column("trace_id", String(64), nullable=True),
    Column("span_id", String(32), nullable=True),
)

audit_lane_events = Table(
    "audit_lane_events",
    metadata,
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("task_id", String(512), primary_key=True),
    Column("claim_token", Integer, primary_key=True),
    Column("lane_seq", Integer, primary_key=True),
    format_version_column(),
    Column("kind", String(80), nullable=False),
    Column("effect_id", String(64), nullable=True),
    Column("payload_json", Text, nullable=False),
    Column("prev_digest", String(80), nullable=False),
    Column("digest", String(80), nullable=False),
    timestamp_column("created_at", nullable=False),
    Column("trace_id", String(64), nullable=True),
    Column("span_id", String(32), nullable=True),
)
"""A claimed task's events before its run's owner adopts them into the chain
(observability/audit_lanes.py): one lane per claim (run, task, fencing token), chained on
its own, written by the claim's holder alone."""
