"""Canonical JSON and SHA-256 digests: the identity of plans, inputs, outputs and effects.

Canonical JSON here is: UTF-8, object keys sorted at every level, no insignificant
whitespace, no NaN or infinities, integers as integers. Two values that are equal as JSON
have the same bytes, so their digests match whatever key order or formatting they arrived
with. :func:`identity_json` goes one step further for the identities that decide reuse (the
effect input digest, hence effect ids, approval ids and idempotency keys): a number has one
form, so ``1`` and ``1.0`` (and ``-0.0`` and ``0``) name the same request. Strings are taken
code point for code point: two spellings of one text that differ in Unicode normalisation
are different paths, arguments and prompts to the outside world, so they are different
requests (docs/durable-execution.md, "Identities").
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "canonical_json",
    "canonical_json_reusing",
    "canonical_object",
    "compact_json",
    "digest_bytes",
    "digest_json",
    "effect_id",
    "effect_input_digest",
    "identity_json",
    "parse_json",
    "sha256_hex",
    "string_json",
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


#: The C encoder behind ``_CANONICAL``, made once: ``JSONEncoder.encode`` makes a new one
#: (and a dict for its circular-reference check) on every call, which costs about as much
#: as encoding a task's small output. Without that check, a value that contains itself
#: runs out of recursion instead; it is then encoded by ``_CANONICAL``, which names it.
_C_MAKE_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)
_ENCODE: Any = (
    None
    if _C_MAKE_ENCODER is None
    else _C_MAKE_ENCODER(
        None, _CANONICAL.default, json.encoder.encode_basestring, None, ":", ",", True, False, False
    )
)


def canonical_json(value: Any) -> str:
    """Serialize ``value`` canonically; raises ``ValueError`` for non-JSON values or NaN."""
    if _ENCODE is None:
        return _CANONICAL.encode(value)
    try:
        return "".join(_ENCODE(value, 0))
    except RecursionError:
        return _CANONICAL.encode(value)  # a circular value: its ValueError


def parse_json(text: str) -> Any:
    """The value of JSON text, exactly what ``json.loads`` returns, about twice as fast on
    large texts (a run's thousands of recorded outputs read back at once): pydantic-core's
    parser, with object keys interned as ``json.loads`` interns them. That parser refuses
    what it cannot read the way ``json.loads`` does (nesting deeper than 200, an integer of
    more than 4,300 digits, a lone surrogate escape, a raw control character); ``json.loads``
    then reads the text, or raises its own error."""
    from pydantic_core import from_json

    try:
        return from_json(text, cache_strings="keys")
    except ValueError:
        return json.loads(text)


#: How canonical JSON writes a string (the function the C encoder above is given).
_STRING: Any = json.encoder.encode_basestring


def canonical_object(members: Mapping[str, str]) -> str:
    """The canonical JSON of an object given the canonical text of each member's value by
    its (string) key: what ``canonical_json`` writes for that object."""
    return "{" + ",".join(_STRING(key) + ":" + members[key] for key in sorted(members)) + "}"


def string_json(text: str) -> str:
    """How canonical JSON writes the string ``text``."""
    return _STRING(text)  # type: ignore[no-any-return]


#: How many levels :func:`canonical_json_reusing` looks through for known parts; below
#: that a value is encoded whole.
REUSE_DEPTH = 3

#: The shortest known text worth taking: walking a value in Python costs more than the C
#: encoder takes for a few hundred bytes (a fan-out child's small output).
REUSE_WORTH = 512


def canonical_json_reusing(
    value: Any, known: Iterable[tuple[Any, str]], *, worth: int = REUSE_WORTH
) -> str:
    """``canonical_json(value)``, with the text of every part of ``value`` that *is* one of
    ``known``'s objects (the same object, not an equal one) taken from ``known`` rather than
    encoded again: each known text must be its object's canonical JSON, and the objects
    must not change while this runs (the caller holds them).

    A step's output often holds its rendered input (``builtin.assign`` twice over) and an
    aggregate holds its children's outputs, whose texts are already made; a join over a
    200-way fan-out then encodes a few hundred bytes instead of a hundred kilobytes. Only
    the top :data:`REUSE_DEPTH` levels are looked through, objects whose keys are all
    strings and lists, exactly as the encoder writes them; anything else is encoded by
    :func:`canonical_json`, so the text is the same as ``canonical_json(value)``. Known
    texts shorter than ``worth`` characters are not worth the walk and are left out."""
    texts = {id(part): (part, text) for part, text in known if len(text) >= worth}
    if not texts:
        return canonical_json(value)
    return _reusing(value, texts, REUSE_DEPTH)


def scalar_json(value: Any) -> str | None:
    """How canonical JSON writes ``value`` if it is a string, null, a boolean or an int
    (those exact types); None for anything else. For encoders that walk a value in Python
    to reuse texts they already have (:func:`canonical_json_reusing`, the compiler's
    fingerprints): the leaves they write themselves are written by this one rule."""
    kind = type(value)
    if kind is str:
        return _STRING(value)  # type: ignore[no-any-return]
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if kind is int:
        return int.__repr__(value)
    return None


def _reusing(value: Any, texts: dict[int, tuple[Any, str]], depth: int) -> str:
    found = texts.get(id(value))
    if found is not None and found[0] is value:
        return found[1]
    scalar = scalar_json(value)
    if scalar is not None:
        return scalar
    kind = type(value)
    if depth and kind is dict and all(type(key) is str for key in value):
        below = depth - 1
        return canonical_object({key: _reusing(item, texts, below) for key, item in value.items()})
    if depth and kind is list:
        below = depth - 1
        return "[" + ",".join(_reusing(item, texts, below) for item in value) + "]"
    return canonical_json(value)


_SHA256 = hashlib.sha256


def sha256_hex(data: bytes) -> str:
    return _SHA256(data).hexdigest()


def digest_bytes(data: bytes) -> str:
    """``sha256:<hex>`` of raw bytes (artifact and file identities)."""
    return "sha256:" + _SHA256(data).hexdigest()  # a task transition takes three of these


def digest_json(value: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``value``."""
    return digest_bytes(canonical_json(value).encode("utf-8"))


def compact_json(value: Any) -> str:
    """Compact JSON that keeps key order: for text shown to people and models, never for an
    identity (use :func:`canonical_json` or :func:`identity_json`)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_has_float(item) for item in value)
    return False


def _one_number_form(value: Any) -> Any:
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, dict):
        return {key: _one_number_form(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_one_number_form(item) for item in value]
    return value


def identity_json(value: Any) -> str:
    """Canonical JSON with one form per number: what identities that decide reuse hash.

    An integral float is written as the integer it equals (``2.0`` -> ``2``); other floats
    keep Python's shortest round-trip form. Values without floats (nearly all) are encoded
    directly.
    """
    if _has_float(value):
        value = _one_number_form(value)
    return _CANONICAL.encode(value)


def effect_input_digest(effect_input: Any) -> str:
    """Lowercase hex SHA-256 of the effect input's :func:`identity_json`.

    Releases before identity format 2 hashed the input's compact JSON in whatever key order
    it was built; those effects are still recognised by their position in the attempt and
    their stored request (``agentctl.engine.effects.journal.journaled_effect``).
    """
    return sha256_hex(identity_json(effect_input).encode("utf-8"))


def effect_id(
    run_id: str,
    task_id: str,
    attempt: int,
    ordinal: int,
    operation: str,
    input_digest: str,
) -> str:
    """The effect id of docs/durable-execution.md ("Identities").

    Lowercase hex SHA-256 of ``run id NUL task id NUL attempt NUL ordinal NUL operation NUL
    input digest``. NUL cannot occur in any field (ids and operations are validated names,
    digests are hex), so the framing is unambiguous; a NUL is refused rather than hashed.
    """
    fields = [run_id, task_id, str(int(attempt)), str(int(ordinal)), operation, input_digest]
    if any("\x00" in part for part in fields):
        raise ValueError("effect id fields must not contain NUL")
    return sha256_hex("\x00".join(fields).encode("utf-8"))
