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
    "digest_bytes",
    "digest_json",
    "effect_id",
    "sha256_hex",
]


def canonical_json(value: Any) -> str:
    """Serialize ``value`` canonically; raises ``ValueError`` for non-JSON values or NaN."""
    return json.dumps(
        value,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_bytes(data: bytes) -> str:
    """``sha256:<hex>`` of raw bytes (artifact and file identities)."""
    return "sha256:" + sha256_hex(data)


def digest_json(value: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``value``."""
    return digest_bytes(canonical_json(value).encode("utf-8"))


def effect_id(
    run_id: str,
    task_id: str,
    attempt: int,
    ordinal: int,
    operation: str,
    input_digest: str,
) -> str:
    """The effect id: 64-hex SHA-256 over (run, task, attempt, ordinal, operation, input).

    The fields are framed as a canonical JSON array, so no two distinct tuples collide by
    concatenation (``("a", "bc")`` vs ``("ab", "c")``).
    """
    fields = ["effect/v1", run_id, task_id, attempt, ordinal, operation, input_digest]
    framed = canonical_json(fields)
    return sha256_hex(framed.encode("utf-8"))
