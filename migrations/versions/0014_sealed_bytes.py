"""On SQLite, sealed payload values become bytes instead of base64 text.

Why: with encryption at rest on (docs/encryption.md), every payload value was stored as
``aes256gcm:KEY_ID:BASE64(nonce ‖ ciphertext ‖ tag)``: 4/3 of the sealed bytes, and a
base64 pass on every write and read. A SQLite column takes bytes whatever its declared
type, so a SQLite store now writes ``aes256gcm:KEY_ID:`` then the raw bytes. This
revision converts the values an earlier release sealed, so a database holds one form;
the codec (agentctl/store/sealing.py) still opens both. PostgreSQL's payload columns are
``text`` (they hold clear JSON when encryption is off), so PostgreSQL keeps the text form
and this revision changes nothing there. ``downgrade`` turns bytes back into text.

The columns are listed here, not imported: a revision must keep meaning what it meant.

Revision ID: 0014_sealed_bytes
Revises: 0013_memory_sealed_text
Create Date: 2026-12-02 01:30:00
"""

import binascii
from collections.abc import Sequence

from alembic import op

revision: str = "0014_sealed_bytes"
down_revision: str | None = "0013_memory_sealed_text"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PREFIX = "aes256gcm:"
_BATCH = 500

#: Every column that held sealed values at 0013 (sealing.PAYLOAD_COLUMNS, then memory's).
_COLUMNS: dict[str, tuple[str, ...]] = {
    "runs": ("inputs_json", "output_json", "error_json"),
    "tasks": ("output_json", "error_json", "state_delta_json"),
    "effects": ("request_json", "result_json", "error_json"),
    "reconciliations": ("evidence", "result_json"),
    "approvals": ("prompt", "input_json", "answer_json"),
    "checkpoints": ("memory_delta_json",),
    "audit_events": ("payload_json",),
    "provider_sessions": ("state_json",),
    "tool_calls": ("arguments_json", "result_json", "error_json"),
    "schedules": ("inputs_json", "observed_json", "pending_json"),
    "schedule_firings": ("inputs_json",),
    "monitor_observations": ("value_json",),
    "memory_entries": ("value_json", "provenance_json", "text_sealed"),
}


def _to_bytes(stored: str) -> bytes:
    key_id, _, body = stored[len(_PREFIX) :].partition(":")
    return f"{_PREFIX}{key_id}:".encode() + binascii.a2b_base64(body)


def _to_text(stored: bytes) -> str:
    head, _, body = stored[len(_PREFIX) :].partition(b":")
    return f"{_PREFIX}{head.decode('ascii')}:" + binascii.b2a_base64(body, newline=False).decode()


def _convert(from_type: str, convert: object) -> None:
    conn = op.get_bind()
    if conn.dialect.name != "sqlite":
        return
    for table, columns in _COLUMNS.items():
        for column in columns:
            select = (
                f"SELECT rowid, {column} FROM {table} WHERE typeof({column}) = ? "  # noqa: S608
                f"AND CAST(substr({column}, 1, ?) AS TEXT) = ? AND rowid > ? ORDER BY rowid LIMIT ?"
            )
            after = 0
            while True:
                rows = conn.exec_driver_sql(
                    select, (from_type, len(_PREFIX), _PREFIX, after, _BATCH)
                ).all()
                if not rows:
                    break
                conn.exec_driver_sql(
                    f"UPDATE {table} SET {column} = ? WHERE rowid = ?",  # noqa: S608
                    [(convert(value), rowid) for rowid, value in rows],  # type: ignore[operator]
                )
                after = rows[-1][0]


def upgrade() -> None:
    _convert("text", _to_bytes)


def downgrade() -> None:
    _convert("blob", _to_text)
