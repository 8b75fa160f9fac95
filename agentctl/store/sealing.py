"""Sealing payloads at rest: the one codec every repository uses for payload columns.

A database that has encryption enabled (``agentctl db encryption enable``, see
docs/encryption.md) stores each payload value — a task's output, an effect's request, a
checkpoint's memory delta, an audit event's payload … (:data:`PAYLOAD_COLUMNS`) — sealed:
AES-256-GCM under a 96-bit nonce that never repeats under a key (``store/keyring.py``), the
associated data naming the table, the column and the record's key, so a value copied into
another row or column does not open. The key id travels with each value, so a database
half-way through a rotation holds values under two keys and every one of them names the
key that opens it. A sealed value has one of two forms, and both open on either store:

- bytes, ``aes256gcm:KEY_ID:`` then nonce ‖ ciphertext ‖ tag — what a SQLite store writes
  (a SQLite column takes bytes whatever its declared type: no base64, 3/4 of the size);
- text, ``aes256gcm:KEY_ID:BASE64(nonce ‖ ciphertext ‖ tag)`` — what a PostgreSQL store
  writes, its payload columns being ``text`` (they hold clear JSON with encryption off),
  and what SQLite stores held before migration ``0014_sealed_bytes``.

Repositories call :func:`seal` on the way in and :func:`unseal` on the way out, with the
connection they were handed: the connection carries the store's :class:`Sealer`
(:func:`sealer_of`). Callers above the store only ever see canonical plaintext, so every
identity (plan digests, fingerprints, effect ids, output digests, checkpoint checksums,
the audit chain) is computed on the same bytes with encryption on or off. Clear values
(written before ``enable``) pass through :func:`unseal` unchanged.

The keys, the nonces and the cipher are the key ring's (``store/keyring.py``); artifact
blob files are sealed in a form of their own (``store/blob_sealing.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from operator import methodcaller
from typing import Any

from agentctl.store.keyring import CLEAR, SEALED_BYTES_PREFIX, SEALED_PREFIX, Sealer
from agentctl.store.timestamps import to_db

__all__ = [
    "PAYLOAD_COLUMNS",
    "PayloadColumns",
    "binary_key_id",
    "is_sealed",
    "key_id_of",
    "open_binary",
    "open_value",
    "reseal",
    "reseal_binary",
    "seal",
    "sealed_head_of",
    "sealed_under",
    "seal_binary",
    "sealer_of",
    "unseal",
    "unseal_column",
    "unseal_columns",
    "unseal_record",
    "unseal_records",
]

#: Execution option that carries a store's sealer on its SQLAlchemy connections.
SEALER_OPTION = "agentctl_sealer"


@dataclass(frozen=True, slots=True)
class PayloadColumns:
    """The sealed columns of one table and the columns that name a record of it."""

    table: str
    key: tuple[str, ...]
    columns: tuple[str, ...]


#: Every payload column that is sealed when encryption is on (docs/encryption.md lists
#: them). Every reader and writer of these columns goes through :func:`seal`/:func:`unseal`;
#: ``db encryption enable`` and ``rotate`` walk exactly this table, then long-term memory,
#: whose text index and embeddings have forms of their own (store/memory_sealing.py).
PAYLOAD_COLUMNS: Mapping[str, PayloadColumns] = {
    p.table: p
    for p in (
        PayloadColumns("runs", ("id",), ("inputs_json", "output_json", "error_json")),
        PayloadColumns(
            "tasks", ("run_id", "task_id"), ("output_json", "error_json", "state_delta_json")
        ),
        PayloadColumns("effects", ("id",), ("request_json", "result_json", "error_json")),
        PayloadColumns("reconciliations", ("id",), ("evidence", "result_json")),
        PayloadColumns("approvals", ("id",), ("prompt", "input_json", "answer_json")),
        PayloadColumns("checkpoints", ("run_id", "seq"), ("memory_delta_json",)),
        PayloadColumns("audit_events", ("run_id", "seq"), ("payload_json",)),
        PayloadColumns(
            "audit_lane_events",
            ("run_id", "task_id", "claim_token", "lane_seq"),
            ("payload_json",),
        ),
        PayloadColumns("provider_sessions", ("run_id", "task_id"), ("state_json",)),
        PayloadColumns("tool_calls", ("id",), ("arguments_json", "result_json", "error_json")),
        PayloadColumns("schedules", ("name",), ("inputs_json", "observed_json", "pending_json")),
        PayloadColumns("schedule_firings", ("schedule_name", "slot_at"), ("inputs_json",)),
        PayloadColumns("monitor_observations", ("monitor_name", "slot_at"), ("value_json",)),
    )
}


def is_sealed(stored: object) -> bool:
    """Whether a stored payload value is sealed (in either form)."""
    if isinstance(stored, str):
        return stored.startswith(SEALED_PREFIX)
    return isinstance(stored, bytes | memoryview) and bytes(stored).startswith(SEALED_BYTES_PREFIX)


def key_id_of(stored: str | bytes) -> str:
    """The key id a sealed value (either form) names."""
    if isinstance(stored, str):
        return stored[len(SEALED_PREFIX) :].split(":", 1)[0]
    return bytes(stored)[len(SEALED_BYTES_PREFIX) :].split(b":", 1)[0].decode("ascii", "replace")


def sealed_under(stored: object, key_id: str) -> bool:
    """Whether a stored value is sealed under ``key_id`` (in either form)."""
    return is_sealed(stored) and key_id_of(stored) == key_id  # type: ignore[arg-type]


def sealed_head_of(column: Any, length: Any) -> Any:
    """``column``'s first ``length`` characters (a parameter) as text, to compare with a
    sealed value's head (``aes256gcm:KEY_ID:``) whichever its form: a bytes value's head
    is ASCII, read as text on SQLite; on PostgreSQL's text columns the CAST changes nothing."""
    from sqlalchemy import Text, cast, func, literal_column

    return cast(func.substr(column, literal_column("1"), length), Text)


def sealer_of(conn: Any) -> Sealer:
    """The sealer a connection from a store carries (:data:`CLEAR` when none)."""
    found = getattr(conn, "sealer", None)
    if isinstance(found, Sealer):
        return found
    options = getattr(conn, "get_execution_options", None)
    if options is not None:
        value = options().get(SEALER_OPTION)
        if isinstance(value, Sealer):
            return value
    return CLEAR


def _record_part(part: Any) -> str:
    # A timestamp in a record's key (a firing's slot) names it by its stored text: SQLite
    # hands that text back, PostgreSQL a datetime, and both must give the same bytes.
    return to_db(part) if isinstance(part, datetime) else str(part)


def _aad(table: str, column: str, record: tuple[Any, ...]) -> bytes:
    # Per value on every write: a record of text is one join; one that ends in a number
    # (a checkpoint's or audit event's sequence) skips the join's TypeError.
    tail = None
    if type(record[-1]) is str:
        try:
            tail = "/".join(record)
        except TypeError:
            pass
    if tail is None:
        tail = "/".join([part if type(part) is str else _record_part(part) for part in record])
    return f"{table}.{column}/{tail}".encode()


def seal(
    conn: Any, table: str, column: str, record: tuple[Any, ...], value: str | None
) -> str | bytes | None:
    """``value`` as stored in ``table.column`` of ``record``: sealed when encryption is on
    (bytes on a SQLite store, base64 text on PostgreSQL)."""
    if value is None:
        return None
    sealer = sealer_of(conn)
    if sealer.active is None:
        return value
    return sealer.seal_stored(value, _aad(table, column, record))


def unseal(conn: Any, table: str, column: str, record: tuple[Any, ...], stored: Any) -> Any:
    """The plaintext of a stored ``table.column`` value (clear values pass through)."""
    if isinstance(stored, str):
        if not stored.startswith(SEALED_PREFIX):
            return stored
    elif not is_sealed(stored):
        return stored
    return sealer_of(conn).open_stored(stored, _aad(table, column, record))


def seal_binary(
    conn: Any, table: str, column: str, record: tuple[Any, ...], value: bytes | None
) -> bytes | None:
    """A binary column's value (an embedding) as stored: ``aes256gcm:KEY_ID:`` then
    nonce ‖ ciphertext ‖ tag as raw bytes, when encryption is on."""
    if value is None:
        return None
    sealer = sealer_of(conn)
    if sealer.active is None:
        return value
    head = f"{SEALED_PREFIX}{sealer.active}:".encode()
    return head + sealer.seal_bytes(value, _aad(table, column, record))


def binary_key_id(stored: bytes) -> str | None:
    """The key id a stored binary value was sealed under (None: clear)."""
    if not stored.startswith(SEALED_BYTES_PREFIX):
        return None
    return stored[len(SEALED_BYTES_PREFIX) :].split(b":", 1)[0].decode("ascii", "replace")


def open_binary(
    sealer: Sealer, table: str, column: str, record: tuple[Any, ...], data: bytes
) -> bytes:
    key_id = binary_key_id(data)
    if key_id is None:
        return data
    body = data[len(SEALED_BYTES_PREFIX) + len(key_id) + 1 :]
    return sealer.open_bytes(body, _aad(table, column, record), key_id)


def reseal_binary(
    sealer: Sealer, table: str, column: str, record: tuple[Any, ...], stored: bytes
) -> bytes:
    """A stored binary value sealed under the sealer's active key (``enable``/``rotate``)."""
    assert sealer.active is not None
    plain = open_binary(sealer, table, column, record, stored)
    head = f"{SEALED_PREFIX}{sealer.active}:".encode()
    return head + sealer.seal_bytes(plain, _aad(table, column, record))


def open_value(
    sealer: Sealer, table: str, column: str, record: tuple[Any, ...], stored: str | bytes
) -> str:
    """The plaintext of a stored ``table.column`` value, opened with ``sealer``."""
    if not is_sealed(stored):
        return str(stored)
    return sealer.open_stored(stored, _aad(table, column, record))


def reseal(
    sealer: Sealer, table: str, column: str, record: tuple[Any, ...], stored: str | bytes
) -> str | bytes:
    """A stored value sealed under the sealer's active key, in the store's form
    (``enable``/``rotate``)."""
    aad = _aad(table, column, record)
    text = sealer.open_stored(stored, aad) if is_sealed(stored) else str(stored)
    return sealer.seal_stored(text, aad)


#: ``value.startswith(SEALED_PREFIX)`` as one C-level call per value (:func:`unseal_column`).
_STARTS_SEALED = methodcaller("startswith", SEALED_PREFIX)


def unseal_column(
    conn: Any, table: str, column: str, records: Iterable[tuple[Any, ...]], stored: list[Any]
) -> list[Any]:
    """The plaintexts of one column's values read from many rows; ``records`` yields the
    key of each value in turn and is consumed only when a value needs opening.

    ``stored`` itself comes back when none is sealed, which one C-level pass finds: a clear
    text never starts with the sealed prefix, and a value sealed on SQLite is bytes, whose
    ``startswith`` refuses the text prefix. A call per value costs more than reading the
    value when a run's thousands of outputs are read back."""
    try:
        if not any(map(_STARTS_SEALED, stored)):
            return stored
    except TypeError:  # bytes (sealed on SQLite) or another non-text value
        pass
    return [
        unseal(conn, table, column, record, value)
        for record, value in zip(records, stored, strict=True)
    ]


def unseal_columns(
    conn: Any,
    table: str,
    record: tuple[Any, ...],
    row: Any,
    positions: Mapping[str, int],
) -> list[Any]:
    """``row`` as a list with the values at ``positions`` (column -> index) opened."""
    out = list(row)
    for column, position in positions.items():
        out[position] = unseal(conn, table, column, record, out[position])
    return out


def unseal_record(conn: Any, table: str, record: dict[str, Any] | None) -> dict[str, Any] | None:
    """A row mapping (with the table's key columns) with its payload columns opened."""
    if record is None:
        return None
    spec = PAYLOAD_COLUMNS[table]
    key = tuple(record[column] for column in spec.key)
    for column in spec.columns:
        if column in record:
            record[column] = unseal(conn, table, column, key, record[column])
    return record


def unseal_records(conn: Any, table: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for record in records:
        unseal_record(conn, table, record)
    return records
