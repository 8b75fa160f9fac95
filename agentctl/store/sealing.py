"""Sealing payloads at rest: the one codec every repository uses for payload columns.

A database that has encryption enabled (``agentctl db encryption enable``, see
docs/encryption.md) stores each payload value — a task's output, an effect's request, a
checkpoint's memory delta, an audit event's payload … (:data:`PAYLOAD_COLUMNS`) — sealed:
AES-256-GCM under a 96-bit nonce that never repeats under a key (:func:`next_nonce`), the
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

A key is never stored: the database records, beside each key id, the name of the
environment variable that held it at ``enable``/``rotate``; ``AGENTCTL_ENCRYPTION_KEYS``
(``ID=BASE64,ID=BASE64``) offers keys under other names (old keys during a rotation, a host
that names the variable differently). A sealed value whose key cannot be found is
``encryption.key_missing`` (exit 5) naming the key id; a key that does not open it is
``encryption.key_mismatch``.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import os
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from operator import methodcaller
from typing import TYPE_CHECKING, Any

from agentctl.errors import PersistenceError, UsageError
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = [
    "BLOB_MAGIC",
    "CLEAR",
    "KEYS_ENV",
    "PAYLOAD_COLUMNS",
    "SEALED_PREFIX",
    "SEALED_BYTES_PREFIX",
    "PayloadColumns",
    "Sealer",
    "binary_key_id",
    "blob_is_sealed",
    "blob_key_id",
    "check_key_id",
    "is_sealed",
    "key_from_text",
    "key_id_of",
    "next_nonce",
    "open_binary",
    "open_blob",
    "open_value",
    "reseal",
    "reseal_binary",
    "seal",
    "sealed_head_of",
    "sealed_under",
    "seal_binary",
    "seal_blob",
    "sealer_of",
    "unseal",
    "unseal_column",
    "unseal_columns",
    "unseal_record",
    "unseal_records",
]

SEALED_PREFIX = "aes256gcm:"
SEALED_BYTES_PREFIX = SEALED_PREFIX.encode()
#: ``ID=BASE64`` pairs, comma-separated: keys offered besides the recorded variables.
KEYS_ENV = "AGENTCTL_ENCRYPTION_KEYS"
#: Execution option that carries a store's sealer on its SQLAlchemy connections.
SEALER_OPTION = "agentctl_sealer"

_NONCE_BYTES = 12
_COUNTER_LIMIT = 1 << 32
_SEARCH_INFO = b"agentctl long-term memory search tokens v1"
_KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


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


# -- nonces ----------------------------------------------------------------------------


class _NonceSource:
    """96-bit GCM nonces: this process's random 64-bit prefix, then a 32-bit counter that
    starts at a random value. The prefix (and the counter's start) is drawn again when the
    counter would wrap and in a forked child, so two processes never go on from one draw
    (docs/encryption.md, "Nonces", says why the nonces are unique per key)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = self._drawn()

    @staticmethod
    def _drawn() -> tuple[bytes, itertools.count[int]]:
        drawn = os.urandom(_NONCE_BYTES)
        return drawn[:8], itertools.count(int.from_bytes(drawn[8:], "big"))

    def redraw(self) -> None:
        """A fresh draw (and lock: the parent's may have been held at the fork)."""
        self._lock = threading.Lock()
        self._state = self._drawn()

    def next(self) -> bytes:
        while True:
            # One attribute read: a prefix always goes with its own counter, and next() on
            # itertools.count is one C call, so no two threads get the same number.
            state = self._state
            number = next(state[1])
            if number < _COUNTER_LIMIT:
                return state[0] + number.to_bytes(4, "big")
            with self._lock:
                if self._state is state:
                    self._state = self._drawn()


_NONCES = _NonceSource()
os.register_at_fork(after_in_child=_NONCES.redraw)


def next_nonce() -> bytes:
    """A nonce no other value sealed by this process (or any other) is given."""
    return _NONCES.next()


def check_key_id(key_id: str) -> str:
    if not _KEY_ID.fullmatch(key_id):
        raise UsageError(
            f"key id {key_id!r} is not 1-64 letters, digits, '.', '_' or '-'",
            code="encryption.bad_key",
            hint="choose a key id such as 2026-12 or prod-1",
        )
    return key_id


def key_from_text(text: str, where: str) -> bytes:
    """A 32-byte key from its base64 text (``where`` names its source in errors)."""
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != 32:
        raise UsageError(
            f"{where} does not hold a base64 32-byte key",
            code="encryption.bad_key",
            hint='make one with `python -c "import os,base64;'
            'print(base64.b64encode(os.urandom(32)).decode())"`',
        )
    return key


def _offered_keys() -> dict[str, bytes]:
    text = os.environ.get(KEYS_ENV, "").strip()
    offered: dict[str, bytes] = {}
    for pair in filter(None, (part.strip() for part in text.split(","))):
        key_id, sep, value = pair.partition("=")
        if not sep:
            raise UsageError(
                f"{KEYS_ENV} entry {pair[:20]!r}… is not ID=BASE64",
                code="encryption.bad_key",
                hint=f"set {KEYS_ENV} to comma-separated ID=BASE64 pairs",
            )
        offered[check_key_id(key_id.strip())] = key_from_text(value, f"{KEYS_ENV} entry {key_id}")
    return offered


@dataclass(slots=True, eq=False)
class Sealer:
    """The store's key ring: the key new values are sealed under (None: encryption off)
    and where to find every key a stored value may name."""

    active: str | None = None
    #: key id -> the environment variable recorded for it.
    variables: Mapping[str, str] = field(default_factory=dict)
    #: keys given directly (``enable``/``rotate`` in this process, tests).
    given: dict[str, bytes] = field(default_factory=dict)
    #: New values sealed as bytes (a SQLite store) rather than base64 text (PostgreSQL).
    binary: bool = False
    _ciphers: dict[str, AESGCM] = field(default_factory=dict)
    #: key id -> the head of a value sealed under it, in this sealer's form.
    _heads: dict[str, str | bytes] = field(default_factory=dict)
    _search_keys: dict[str, bytes] = field(default_factory=dict)
    #: key id -> word -> its search token (store/memory_sealing.py), bounded there.
    search_token_cache: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        return self.active is not None

    def key(self, key_id: str) -> bytes | None:
        """The key named ``key_id`` from what this process was offered, or None."""
        if key_id in self.given:
            return self.given[key_id]
        offered = _offered_keys()
        if key_id in offered:
            return offered[key_id]
        variable = self.variables.get(key_id)
        if variable and os.environ.get(variable, "").strip():
            return key_from_text(os.environ[variable], f"${variable} (key {key_id})")
        return None

    def _cipher(self, key_id: str, aad: bytes) -> AESGCM:
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            key = self.key(key_id)
            if key is None:
                raise _missing(key_id, self.variables.get(key_id), aad.decode())
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            cipher = self._ciphers[key_id] = AESGCM(key)
        return cipher

    def search_key(self, key_id: str) -> bytes:
        """The key long-term memory's search tokens are made with under ``key_id``:
        derived from the encryption key with HKDF-SHA256, so the AES key itself never
        doubles as a MAC key (store/memory_sealing.py)."""
        derived = self._search_keys.get(key_id)
        if derived is None:
            key = self.key(key_id)
            if key is None:
                raise _missing(key_id, self.variables.get(key_id), "long-term memory's text index")
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.kdf.hkdf import HKDF

            hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_SEARCH_INFO)
            derived = self._search_keys[key_id] = hkdf.derive(key)
        return derived

    def seal_bytes(self, data: bytes, aad: bytes, *, key_id: str | None = None) -> bytes:
        """nonce ‖ ciphertext ‖ tag of ``data`` under ``key_id`` (default: the active key)."""
        key_id = key_id or self.active
        assert key_id is not None, "sealing needs a key id"
        cipher = self._ciphers.get(key_id) or self._cipher(key_id, aad)
        nonce = _NONCES.next()
        return nonce + cipher.encrypt(nonce, data, aad)

    def open_bytes(self, sealed: bytes, aad: bytes, key_id: str) -> bytes:
        cipher = self._ciphers.get(key_id) or self._cipher(key_id, aad)
        try:
            return cipher.decrypt(sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:], aad)
        except Exception as exc:  # imported only when needed: this path runs per value
            from cryptography.exceptions import InvalidTag

            if isinstance(exc, InvalidTag):
                raise _mismatch(key_id, aad.decode()) from None
            raise

    def seal_text(self, text: str, aad: bytes, *, key_id: str | None = None) -> str:
        """``text`` sealed in the text form (``aes256gcm:KEY_ID:BASE64``), whatever the store."""
        key_id = key_id or self.active
        assert key_id is not None
        body = binascii.b2a_base64(
            self.seal_bytes(text.encode(), aad, key_id=key_id), newline=False
        )
        return f"{SEALED_PREFIX}{key_id}:{body.decode('ascii')}"

    def seal_stored(self, text: str, aad: bytes) -> str | bytes:
        """``text`` sealed under the active key in the form this store writes (bytes on
        SQLite, base64 text on PostgreSQL): the one path every payload write takes."""
        key_id = self.active
        assert key_id is not None
        head = self._heads.get(key_id)
        if head is None:
            head = f"{SEALED_PREFIX}{key_id}:"
            head = self._heads[key_id] = head.encode() if self.binary else head
        cipher = self._ciphers.get(key_id) or self._cipher(key_id, aad)
        nonce = _NONCES.next()
        body = nonce + cipher.encrypt(nonce, text.encode(), aad)
        if isinstance(head, bytes):
            return head + body
        return head + binascii.b2a_base64(body, newline=False).decode("ascii")

    def open_text(self, stored: str, aad: bytes) -> str:
        key_id, _, body = stored[len(SEALED_PREFIX) :].partition(":")
        try:
            sealed = binascii.a2b_base64(body, strict_mode=True)
        except (binascii.Error, ValueError):
            raise _mismatch(key_id, aad.decode()) from None
        return self.open_bytes(sealed, aad, key_id).decode()

    def open_stored(self, stored: str | bytes, aad: bytes) -> str:
        """The plaintext of a sealed payload value in either form."""
        if isinstance(stored, str):
            return self.open_text(stored, aad)
        data = bytes(stored)
        end = data.index(b":", len(SEALED_BYTES_PREFIX))
        key_id = data[len(SEALED_BYTES_PREFIX) : end].decode("ascii", "replace")
        return self.open_bytes(data[end + 1 :], aad, key_id).decode()


#: The sealer of a store with encryption off and nothing sealed in it yet.
CLEAR = Sealer()


def _missing(key_id: str, variable: str | None, what: str) -> PersistenceError:
    where = f"${variable}" if variable else "no variable recorded"
    return PersistenceError(
        f"{what} is sealed under encryption key {key_id!r}, and this process was not given "
        f"that key ({where}, {KEYS_ENV})",
        code="encryption.key_missing",
        hint=f"set {variable or 'the variable'} to the base64 key {key_id}, or add "
        f"{key_id}=BASE64 to {KEYS_ENV}; listing runs needs no key",
    )


def _mismatch(key_id: str, what: str) -> PersistenceError:
    return PersistenceError(
        f"the key offered as {key_id!r} does not open {what} (a wrong key, or the value "
        "was altered or moved from another record)",
        code="encryption.key_mismatch",
        hint=f"offer the key that was enabled as {key_id} (`agentctl db encryption "
        "inventory` names the variable); restore the record from a backup if it was altered",
    )


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


# -- artifact blobs -------------------------------------------------------------------

#: First bytes of a sealed blob file, then the key id and a newline, then nonce ‖ ciphertext.
BLOB_MAGIC = b"agentctl-sealed-blob-v1\n"


def _blob_aad(digest_hex: str) -> bytes:
    return f"artifact_blobs/{digest_hex}".encode()


def blob_is_sealed(head: bytes) -> bool:
    return head.startswith(BLOB_MAGIC)


def blob_key_id(data: bytes) -> str:
    return data[len(BLOB_MAGIC) :].split(b"\n", 1)[0].decode("ascii", "replace")


def seal_blob(sealer: Sealer, digest_hex: str, plain: bytes) -> bytes:
    """A blob's file bytes sealed under the active key; its name (the digest of
    ``plain``) is the associated data, so bytes moved under another name do not open."""
    assert sealer.active is not None
    header = BLOB_MAGIC + sealer.active.encode() + b"\n"
    return header + sealer.seal_bytes(plain, _blob_aad(digest_hex))


def open_blob(sealer: Sealer, digest_hex: str, data: bytes) -> bytes:
    """The plaintext of a blob file's bytes (a clear file passes through)."""
    if not blob_is_sealed(data):
        return data
    key_id = blob_key_id(data)
    body = data[len(BLOB_MAGIC) + len(key_id) + 1 :]
    return sealer.open_bytes(body, _blob_aad(digest_hex), key_id)
