"""The tables of schedules and monitors (docs/schedules.md): each schedule, every slot it
decided, and every observation a monitor made.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from agentctl.store.table_base import format_version_column, metadata, timestamp_column

__all__ = ["monitor_observations", "schedule_firings", "schedules"]


# A schedule starts runs of one workflow by itself (cron in a time zone, or an interval).
# ``cursor_at``: every slot at or before it has been decided (fired, skipped or counted as
# missed), so a restarted daemon continues after it.
schedules = Table(
    "schedules",
    metadata,
    Column("name", String(255), primary_key=True),
    format_version_column(),
    Column("workflow", Text, nullable=False),
    Column("workflow_file", Text, nullable=False),
    Column("project_dir", Text, nullable=False),
    Column("workspace", Text, nullable=True),
    Column("cron", String(255), nullable=True),
    Column("interval_seconds", Integer, nullable=True),
    Column("timezone", String(64), nullable=False, server_default="UTC"),
    Column("inputs_json", Text, nullable=False, server_default="{}"),
    Column("catch_up", String(10), nullable=False, server_default="latest"),
    Column("max_catch_up", Integer, nullable=False, server_default="10"),
    Column("overlap", String(10), nullable=False, server_default="skip"),
    Column("jitter_seconds", Integer, nullable=False, server_default="0"),
    Column("grace_seconds", Integer, nullable=False, server_default="60"),
    Column("paused", Boolean, nullable=False, server_default="0"),
    timestamp_column("anchor_at", nullable=False),
    timestamp_column("cursor_at", nullable=False),
    Column("missed", Integer, nullable=False, server_default="0"),
    timestamp_column("created_at", nullable=False),
    timestamp_column("updated_at", nullable=False),
    # A monitor is a schedule whose slots observe something: what and how
    # ({kind, target, debounceSeconds}); the last confirmed observation; a change waiting
    # for its debounce.
    Column("monitor_json", Text, nullable=True),
    Column("observed_json", Text, nullable=True),
    Column("pending_json", Text, nullable=True),
    CheckConstraint("catch_up IN ('skip', 'latest', 'all')", name="catch_up"),
    CheckConstraint("overlap IN ('skip', 'queue', 'allow')", name="overlap"),
    CheckConstraint("(cron IS NULL) <> (interval_seconds IS NULL)", name="timing"),
)

# One row per decided slot, unique per (schedule, slot): committed before its run exists,
# so two daemons, or a daemon restarted after a crash, never start a slot twice.
schedule_firings = Table(
    "schedule_firings",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    format_version_column(),
    Column(
        "schedule_name",
        String(255),
        ForeignKey("schedules.name", ondelete="CASCADE"),
        nullable=False,
    ),
    timestamp_column("slot_at", nullable=False),
    Column("trigger", String(10), nullable=False),
    Column("status", String(20), nullable=False),
    Column("run_id", String(80), ForeignKey("runs.id", ondelete="SET NULL"), nullable=True),
    Column("missed", Integer, nullable=False, server_default="0"),
    Column("reason", Text, nullable=True),
    # Inputs of this firing on top of the schedule's (a monitor's observation).
    Column("inputs_json", Text, nullable=True),
    timestamp_column("created_at", nullable=False),
    timestamp_column("updated_at", nullable=False),
    CheckConstraint("trigger IN ('cron', 'interval', 'manual', 'monitor')", name="trigger"),
    UniqueConstraint("schedule_name", "slot_at"),
    Index(None, "status"),
    Index(None, "run_id"),
)

# Every observation a monitor made, one per (monitor, slot): the first daemon to commit it
# decides whether the value changed.
monitor_observations = Table(
    "monitor_observations",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column(
        "monitor_name",
        String(255),
        ForeignKey("schedules.name", ondelete="CASCADE"),
        nullable=False,
    ),
    timestamp_column("slot_at", nullable=False),
    Column("digest", String(80), nullable=False),
    Column("value_json", Text, nullable=False),
    Column("outcome", String(20), nullable=False),
    timestamp_column("created_at", nullable=False),
    CheckConstraint("outcome IN ('baseline', 'unchanged', 'pending', 'changed')", name="outcome"),
    UniqueConstraint("monitor_name", "slot_at"),
)
