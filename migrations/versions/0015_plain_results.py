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
texts, keys sorted), sealed under the run row when the task outputs are sealed (the
store's key must be at hand, as for any read of them).

Revision ID: 0015_plain_results
Revises: 0014_sealed_bytes
Create Date: 2026-12-02 10:40:00
"""

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0015_plain_results"
down_revision: str | None = "0014_sealed_bytes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PREFIX = "aes256gcm:"
_STRING: Any = json.encoder.encode_basestring


def upgrade() -> None:
    op.add_column("runs", sa.Column("output_source", sa.String(20), nullable=True))


def _sealed(value: object) -> bool:
    if isinstance(value, bytes | memoryview):
        return bytes(value).startswith(_PREFIX.encode())
    return isinstance(value, str) and value.startswith(_PREFIX)


def _copy(texts: dict[str, str]) -> str:
    """The canonical object of the members' canonical texts, keys sorted (what
    ``digest.canonical_object`` writes; kept here so this revision keeps its meaning)."""
    return "{" + ",".join(_STRING(key) + ":" + texts[key] for key in sorted(texts)) + "}"


def downgrade() -> None:
    conn = op.get_bind()
    mark = "?" if conn.dialect.name == "sqlite" else "%s"
    runs = conn.exec_driver_sql("SELECT id FROM runs WHERE output_source = 'tasks'").all()
    for (run_id,) in runs:
        rows = conn.exec_driver_sql(
            f"SELECT task_id, output_json FROM tasks WHERE run_id = {mark}"  # noqa: S608
            " AND output_json IS NOT NULL ORDER BY ordinal",
            (run_id,),
        ).all()
        if not any(_sealed(value) for _, value in rows):
            stored: object = _copy({str(task_id): str(value) for task_id, value in rows})
        else:
            # Encryption at rest: the outputs open with the store's key (the connection
            # carries its sealer) and the copy is sealed under the run row, as 0014's
            # release wrote it; without the key this stops with encryption.key_missing.
            from agentctl.store import sealing

            texts = {
                str(task_id): str(
                    sealing.unseal(conn, "tasks", "output_json", (run_id, task_id), value)
                )
                for task_id, value in rows
            }
            if sealing.sealer_of(conn).active is None:
                raise RuntimeError(
                    f"run {run_id}: its task outputs are sealed but the store has no active "
                    "key to seal its result's copy with; open it with the key to downgrade"
                )
            stored = sealing.seal(conn, "runs", "output_json", (run_id,), _copy(texts))
        conn.exec_driver_sql(
            f"UPDATE runs SET output_json = {mark} WHERE id = {mark}",  # noqa: S608
            (stored, run_id),
        )
    # ALTER TABLE … DROP COLUMN (SQLite 3.35+): a batch copy of ``runs`` would drop the old
    # table, and the foreign keys (on in every store connection) would cascade the delete.
    op.drop_column("runs", "output_source")
