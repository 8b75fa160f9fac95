"""Add ``encryption_keys``: which key ids seal the database's payloads (docs/encryption.md).

Why: ``agentctl db encryption enable|rotate`` seals payload columns and artifact blobs
under a key id. A later process must know, without the key, whether new writes are to be
sealed and under which id, and where to look for that key: each row records a key id, the
name of the environment variable that held it (never the key), whether it is the active
key, and a check value sealed under it so a wrong key is told apart from a missing one.
``downgrade`` drops the table (sealed values stay sealed; decrypt first with a release
that has this revision).

Revision ID: 0012_encryption_keys
Revises: 0011_audit_effect_index
Create Date: 2026-12-01 19:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_encryption_keys"
down_revision: str | None = "0011_audit_effect_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "encryption_keys",
        sa.Column("key_id", sa.String(length=64), nullable=False),
        sa.Column("key_env", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("check_value", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "status IN ('active', 'retired')", name=op.f("ck_encryption_keys_status")
        ),
        sa.PrimaryKeyConstraint("key_id", name=op.f("pk_encryption_keys")),
    )


def downgrade() -> None:
    op.drop_table("encryption_keys")
