from __future__ import annotations

import json
import math
import random
import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentctl.digest import (
    canonical_json,
    digest_json,
    effect_id,
    effect_input_digest,
    identity_json,
    parse_json,
)
from agentctl.ids import FixedClock, IdGenerator, approval_id

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


def test_canonical_json_sorts_keys_and_drops_whitespace() -> None:
    assert canonical_json({"b": 1, "a": [1, {"d": None, "c": "é"}]}) == (
        '{"a":[1,{"c":"é","d":null}],"b":1}'
    )


@given(st.dictionaries(st.text(), json_values))
def test_digest_ignores_key_order(value: dict[str, object]) -> None:
    reordered = dict(reversed(list(value.items())))
    assert digest_json(value) == digest_json(reordered)


_STDLIB_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


#: JSON values as stored records hold them (finite floats: canonical JSON refuses NaN).
_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=30,
)


@given(_JSON_VALUES)
def test_canonical_json_is_the_stdlib_encoders_text(value: object) -> None:
    # canonical_json keeps one C encoder instead of JSONEncoder.encode's one per call: the
    # text must be the same, for every value (digests of stored records depend on it).
    assert canonical_json(value) == _STDLIB_CANONICAL.encode(value)


def _typed(value: object) -> object:
    """``value`` with every number's type spelled out (``1 == 1.0`` and ``True == 1``)."""
    if isinstance(value, dict):
        return {key: _typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_typed(item) for item in value]
    return (type(value).__name__, repr(value))


@given(_JSON_VALUES)
def test_parse_json_reads_canonical_text_as_json_loads_does(value: object) -> None:
    # A run's result is parsed with the faster parser: the same values, of the same types,
    # in the same key order as json.loads, for every value canonical_json can write.
    text = canonical_json(value)
    parsed = parse_json(text)
    assert _typed(parsed) == _typed(json.loads(text))
    assert list(_keys(parsed)) == list(_keys(json.loads(text)))


def _keys(value: object) -> list[object]:
    if isinstance(value, dict):
        return [(key, _keys(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [_keys(item) for item in value]
    return []


@pytest.mark.parametrize(
    "text",
    [
        "[" * 300 + "]" * 300,  # nested deeper than pydantic-core's limit
        '"\\ud800"',  # a lone surrogate escape
        "1" * 4000,  # a long integer
    ],
)
def test_parse_json_falls_back_to_json_loads_where_the_fast_parser_refuses(text: str) -> None:
    assert parse_json(text) == json.loads(text)


@pytest.mark.parametrize("text", ["[1,", '"\x01"', "NaN x", '{"a":1}{'])
def test_parse_json_refuses_what_json_loads_refuses(text: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        parse_json(text)


def test_canonical_json_names_a_value_that_contains_itself() -> None:
    looped: list[object] = []
    looped.append(looped)
    with pytest.raises(ValueError, match="Circular reference"):
        canonical_json({"a": looped})
    assert canonical_json({"a": [1]}) == '{"a":[1]}'  # and the next value encodes as usual


def test_canonical_json_rejects_nan() -> None:
    with pytest.raises(ValueError):
        canonical_json({"x": math.nan})


def test_effect_id_matches_the_reference_formula() -> None:
    import hashlib

    digest = effect_input_digest({"path": "a.txt"})
    assert digest == hashlib.sha256(b'{"path":"a.txt"}').hexdigest()
    expected = hashlib.sha256(f"run-1\x00t\x001\x001\x00builtin.read\x00{digest}".encode())
    assert effect_id("run-1", "t", 1, 1, "builtin.read", digest) == expected.hexdigest()
    with pytest.raises(ValueError):
        effect_id("run\x001", "t", 1, 1, "x", digest)


def test_effect_id_is_64_hex_and_framed() -> None:
    one = effect_id("run-1", "a", 1, 0, "builtin.write", "sha256:00")
    assert len(one) == 64 and int(one, 16) >= 0
    # Concatenation of fields must not collide.
    assert effect_id("run-1", "ab", 1, 0, "x", "d") != effect_id("run-1a", "b", 1, 0, "x", "d")
    assert one == effect_id("run-1", "a", 1, 0, "builtin.write", "sha256:00")
    assert one != effect_id("run-1", "a", 2, 0, "builtin.write", "sha256:00")


def test_ids_are_uuid7_with_prefix_and_monotonic() -> None:
    clock = FixedClock(datetime(2026, 5, 1, tzinfo=UTC))
    ids = IdGenerator(clock=clock, random_bytes=lambda n: b"\xff" * n)
    first, second = ids.run_id(), ids.run_id("retry")
    assert first.startswith("run-") and second.startswith("retry-")
    parsed = uuid.UUID(first.removeprefix("run-"))
    assert parsed.version == 7
    assert parsed.int >> 80 == int(clock.now().timestamp() * 1000)
    generated = [ids.new("x").removeprefix("x-") for _ in range(50)]
    assert generated == sorted(generated)
    with pytest.raises(ValueError):
        ids.run_id("bogus")


def test_approval_id_uses_first_16_hex_of_effect() -> None:
    assert approval_id("a" * 64) == "approval-" + "a" * 16


json_with_floats = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


def _shuffled(value: object, rng: random.Random) -> object:
    """The same JSON value with the keys of every object, at every depth, in a new order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: _shuffled(item, rng) for key, item in items}
    if isinstance(value, list):
        return [_shuffled(item, rng) for item in value]
    return value


def _floated(value: object) -> object:
    """The same JSON value with every integer that a float holds exactly written as one."""
    if isinstance(value, bool) or not isinstance(value, int | dict | list):
        return value
    if isinstance(value, int):
        return float(value) if abs(value) <= 2**53 else value
    if isinstance(value, dict):
        return {key: _floated(item) for key, item in value.items()}
    return [_floated(item) for item in value]


@given(json_with_floats, st.randoms(use_true_random=False))
def test_effect_input_digest_ignores_key_order_at_every_depth(
    value: object, rng: random.Random
) -> None:
    # The defect this guards: a resumed attempt rebuilt `with:` from the stored, key-sorted
    # workflow and got a second effect id for the same request.
    assert effect_input_digest(_shuffled(value, rng)) == effect_input_digest(value)
    assert identity_json(_shuffled(value, rng)) == identity_json(value)


@given(json_with_floats)
def test_effect_input_digest_has_one_number_form(value: object) -> None:
    assert effect_input_digest(_floated(value)) == effect_input_digest(value)


@given(json_with_floats, json_with_floats)
def test_effect_input_digest_tells_different_values_apart(one: object, two: object) -> None:
    if identity_json(one) != identity_json(two):
        assert effect_input_digest(one) != effect_input_digest(two)
    assert identity_json(one) == canonical_json(json.loads(identity_json(one)))
