"""Index what the claimed tasks' statements read, and nothing their updates change.

Why: a claimed task updates its effect twice (``started``, then its outcome) and its
budget reservation once (settled); each of those updates changed an indexed ``status``
column, so PostgreSQL could never make them HOT updates: every one wrote a new entry into
every index of the table (four for an effect) and the WAL for each. Nothing reads those
two indexes: a run's effects by status are read through the ``run_id`` that leads
``ix_effects_run_id_task_id_attempt_ordinal``, and reservations by their effect. And
``task_claims`` was indexed on ``(state, ready_at)``, which served neither of its
statements well: a claim of one ready row read and sorted every ready row of the batch
(the index does not hold the claim's order), and on a fresh store, without statistics
yet, the planner took it for a claim's fence check (by run, task and token) over the
primary key, walking every claimed row of every run for each check.

So: ``ix_effects_run_id_status`` goes; reservations are indexed by the foreign key's
columns (``run_id, resource``, which a budget row's delete looks up) instead of
``run_id, status``; ``task_claims`` gets two partial indexes in place of ``(state,
ready_at)``: the ready rows in the claim's order (``ready_at, run_id, task_id``) and the
claimed rows by lease (a reclaim), which a fence check cannot use. On PostgreSQL the
effects and reservations tables keep a fifth of each new page free (``fillfactor`` 80),
for the new version of an updated row to fit on its page (a HOT update needs the room).

``downgrade`` restores the indexes and the default fill factor.

Revision ID: 0017_hot_updates
Revises: 0016_audit_lanes
Create Date: 2026-12-02 16:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017_hot_updates"
down_revision: str | None = "0016_audit_lanes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The tables whose rows are updated soon after their insert, and their fill factor.
FILL_FACTOR = {"effects": 80, "budget_reservations": 80}


def upgrade() -> None:
    op.drop_index(op.f("ix_effects_run_id_status"), table_name="effects")
    op.drop_index(op.f("ix_budget_reservations_run_id_status"), table_name="budget_reservations")
    op.create_index(
        op.f("ix_budget_reservations_run_id_resource"),
        "budget_reservations",
        ["run_id", "resource"],
        unique=False,
    )
    op.drop_index("ix_task_claims_state_ready_at", table_name="task_claims")
    ready = sa.text("state = 'ready'")
    op.create_index(
        "ix_task_claims_ready",
        "task_claims",
        ["ready_at", "run_id", "task_id"],
        unique=False,
        sqlite_where=ready,
        postgresql_where=ready,
    )
    claimed = sa.text("state = 'claimed'")
    op.create_index(
        "ix_task_claims_leases",
        "task_claims",
        ["lease_expires_at"],
        unique=False,
        sqlite_where=claimed,
        postgresql_where=claimed,
    )
    if op.get_bind().dialect.name == "postgresql":
        for table, fill in FILL_FACTOR.items():
            op.execute(f"ALTER TABLE {table} SET (fillfactor = {fill})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in FILL_FACTOR:
            op.execute(f"ALTER TABLE {table} RESET (fillfactor)")
    op.drop_index("ix_task_claims_leases", table_name="task_claims")
    op.drop_index("ix_task_claims_ready", table_name="task_claims")
    op.create_index(
        "ix_task_claims_state_ready_at", "task_claims", ["state", "ready_at"], unique=False
    )
    op.drop_index(op.f("ix_budget_reservations_run_id_resource"), table_name="budget_reservations")
    op.create_index(
        op.f("ix_budget_reservations_run_id_status"),
        "budget_reservations",
        ["run_id", "status"],
        unique=False,
    )
    op.create_index(op.f("ix_effects_run_id_status"), "effects", ["run_id", "status"], unique=False)
