"""The store's key ring: the keys payloads are sealed under, and the cipher around them.

A :class:`Sealer` names the key new values are sealed under (``None``: encryption off) and
finds every key a stored value may name. A key is never stored: the database records,
beside each key id, the name of the environment variable that held it at
``enable``/``rotate``; ``AGENTCTL_ENCRYPTION_KEYS`` (``ID=BASE64,ID=BASE64``) offers keys
under other names (old keys during a rotation, a host that names the variable
differently). A sealed value whose key cannot be found is ``encryption.key_missing``
(exit 5) naming the key id; a key that does not open it is ``encryption.key_mismatch``.

Values are sealed with AES-256-GCM under a 96-bit nonce that never repeats under a key
(:func:`next_nonce`). A sealed value starts ``aes256gcm:KEY_ID:`` (:data:`SEALED_PREFIX`),
as bytes on a SQLite store or as base64 text on PostgreSQL; which table and column a value
belongs to, and how a payload column is read and written, is ``store/sealing.py``.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentctl.errors import PersistenceError, UsageError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = [
    "CLEAR",
    "KEYS_ENV",
    "SEALED_BYTES_PREFIX",
    "SEALED_PREFIX",
    "Sealer",
    "check_key_id",
    "key_from_text",
    "next_nonce",
]

SEALED_PREFIX = "aes256gcm:"
SEALED_BYTES_PREFIX = SEALED_PREFIX.encode()
#: ``ID=BASE64`` pairs, comma-separated: keys offered besides the recorded variables.
KEYS_ENV = "AGENTCTL_ENCRYPTION_KEYS"

_NONCE_BYTES = 12
_COUNTER_LIMIT = 1 << 32
_SEARCH_INFO = b"agentctl long-term memory search tokens v1"
_KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


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
