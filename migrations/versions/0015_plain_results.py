"""A run without declared ``outputs:`` keeps its result in its task rows, not a copy.

Why: a run whose workflow declares no ``outputs:`` has every task's recorded output as its
result. Its finish wrote a second copy of all of them into ``runs.output_json`` (840 KB for
a 5,000-step chain: about 200 WAL pages, enough to make that commit checkpoint too), and a
resume encoded that copy first. The task rows already hold each output's canonical text,
and a finished run's task rows never change (docs/durable-execution.md), so the finish now
stores a reference instead: ``runs.output_source = 'tasks'`` with ``output_json`` NULL, and
every reader assembles the same text from the rows (agentctl/store/run_results.py).

Existing rows keep their copies (``output_source`` NULL: the result is ``output_json`` as
before) and read exactly as they did. ``downgrade`` writes each referenced result back
into ``output_json`` as the earlier release wrote it (the canonical object of the task
texts, keys sorted); it refuses a run whose task outputs are sealed (encryption at rest:
the run row's copy would have to be sealed under the run's own record).

Revision ID: 0015_plain_results
Revises: 0014_sealed_bytes
Create Date: 2026-12-02 10:40:00
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_plain_results"
down_revision: str | None = "0014_sealed_bytes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PREFIX = "aes256gcm:"


def upgrade() -> None:
    op.add_column("runs", sa.Column("output_source", sa.String(20), nullable=True))


def _text(value: object) -> str:
    if isinstance(value, bytes | memoryview):
        value = bytes(value).decode("utf-8", "replace")
    return str(value)


def downgrade() -> None:
    conn = op.get_bind()
    runs = conn.exec_driver_sql("SELECT id FROM runs WHERE output_source = 'tasks'").all()
    for (run_id,) in runs:
        rows = conn.exec_driver_sql(
            "SELECT task_id, output_json FROM tasks WHERE run_id = "
            + ("?" if conn.dialect.name == "sqlite" else "%s")
            + " AND output_json IS NOT NULL ORDER BY ordinal",
            (run_id,),
        ).all()
        texts = {str(task_id): _text(value) for task_id, value in rows}
        if any(text.startswith(_PREFIX) for text in texts.values()):
            raise RuntimeError(
                f"run {run_id}: its task outputs are sealed (encryption at rest); "
                "0014 cannot hold its result without a copy sealed under the run row: "
                "stay at 0015 or delete the run first"
            )
        # The canonical object of the members' canonical texts (keys sorted, as
        # digest.canonical_object writes it; kept here so this revision keeps its meaning).
        copy = (
            "{"
            + ",".join(
                json.encoder.encode_basestring(key) + ":" + texts[key] for key in sorted(texts)
            )
            + "}"
        )
        conn.exec_driver_sql(
            "UPDATE runs SET output_json = "
            + ("?" if conn.dialect.name == "sqlite" else "%s")
            + " WHERE id = "
            + ("?" if conn.dialect.name == "sqlite" else "%s"),
            (copy, run_id),
        )
    # ALTER TABLE … DROP COLUMN (SQLite 3.35+): a batch copy of ``runs`` would drop the old
    # table, and the foreign keys (on in every store connection) would cascade the delete.
    op.drop_column("runs", "output_source")
