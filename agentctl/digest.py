"""Canonical JSON and SHA-256 digests: the identity of plans, inputs, outputs and effects.

Canonical JSON here is: UTF-8, object keys sorted, no insignificant whitespace, no NaN or
infinities, integers as integers. Two values that are equal as JSON have the same bytes, so
their digests match whatever key order or formatting they arrived with.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = [
    "canonical_json",
    "compact_json",
    "digest_bytes",
    "digest_json",
    "effect_id",
    "effect_input_digest",
    "sha256_hex",
]


#: ``json.dumps`` with these options builds a new encoder on every call; canonical JSON is
#: written several times per task transition, so one encoder is kept (it holds no state
#: between calls).
_CANONICAL = json.JSONEncoder(
    sort_keys=True,
    separators=(",", ":"),
    ensure_ascii=False,
    allow_nan=False,
)


def canonical_json(value: Any) -> str:
    """Serialize ``value`` canonically; raises ``ValueError`` for non-JSON values or NaN."""
    return _CANONICAL.encode(value)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_bytes(data: bytes) -> str:
    """``sha256:<hex>`` of raw bytes (artifact and file identities)."""
    return "sha256:" + sha256_hex(data)


def digest_json(value: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``value``."""
    return digest_bytes(canonical_json(value).encode("utf-8"))


def compact_json(value: Any) -> str:
    """Compact JSON that keeps key order (upstream's serde_json with ``preserve_order``)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def effect_input_digest(effect_input: Any) -> str:
    """Lowercase hex SHA-256 of the effect input as compact JSON (docs/durable-execution.md)."""
    return sha256_hex(compact_json(effect_input).encode("utf-8"))


def effect_id(
    run_id: str,
    task_id: str,
    attempt: int,
    ordinal: int,
    operation: str,
    input_digest: str,
) -> str:
    """The effect id of docs/durable-execution.md, byte-compatible with upstream.

    Lowercase hex SHA-256 of ``run id NUL task id NUL attempt NUL ordinal NUL operation NUL
    input digest``. NUL cannot occur in any field (ids and operations are validated names,
    digests are hex), so the framing is unambiguous; a NUL is refused rather than hashed.
    """
    fields = [run_id, task_id, str(int(attempt)), str(int(ordinal)), operation, input_digest]
    if any("\x00" in part for part in fields):
        raise ValueError("effect id fields must not contain NUL")
    return sha256_hex("\x00".join(fields).encode("utf-8"))
