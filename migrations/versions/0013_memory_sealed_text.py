"""Add ``memory_entries.text_sealed``: a memory entry's searchable text, sealed.

Why: with encryption at rest on (docs/encryption.md), a memory entry's ``text`` column
holds keyed tokens of its words, not the words, so the text index (FTS5, PostgreSQL
``tsvector``) can still match a query's words without seeing them. The text itself is
still needed (re-embedding, re-tokenizing under a new key at ``rotate``), so it is kept
sealed beside the tokens; the key id it names is also the key the tokens were made with.
Clear databases leave the column NULL. ``downgrade`` drops it (unseal first: tokens do not
turn back into words).

Revision ID: 0013_memory_sealed_text
Revises: 0012_encryption_keys
Create Date: 2026-12-01 22:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_memory_sealed_text"
down_revision: str | None = "0012_encryption_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ADD COLUMN on both dialects: a batch re-creation of memory_entries on SQLite
    # would drop the triggers that keep its text index in step (0003_memory_search).
    op.add_column("memory_entries", sa.Column("text_sealed", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("memory_entries", "text_sealed")
