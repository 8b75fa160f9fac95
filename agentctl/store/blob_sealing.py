"""Sealing artifact blob files at rest (docs/encryption.md): the file's bytes sealed under
the store's active key (:class:`~agentctl.store.keyring.Sealer`), its name (the digest of
the plain bytes) the associated data, so bytes moved under another name do not open.
"""

from __future__ import annotations

from agentctl.store.keyring import Sealer

__all__ = ["BLOB_MAGIC", "blob_is_sealed", "blob_key_id", "open_blob", "seal_blob"]

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
