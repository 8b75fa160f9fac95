"""``canonical_json_reusing`` (agentctl/digest.py) takes the texts of parts it is given
instead of encoding them again; what it writes must be byte for byte ``canonical_json`` of
the whole value, for any value and any choice of known parts, or the stored outputs and
their digests would no longer be the canonical ones."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentctl.digest import canonical_json, canonical_json_reusing, scalar_json


class Text(str):
    """A str subclass: the encoder writes it as a string, keys included."""


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
    | st.text().map(Text)
)
KEYS = st.text() | st.text().map(Text)
VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(KEYS, children, max_size=5)
        | st.lists(children, max_size=3).map(tuple)
    ),
    max_leaves=30,
)


def _parts(value: Any) -> list[Any]:
    """Every container in ``value`` (the objects a caller could know the text of)."""
    found: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            found.append(item)
            stack.extend(item)
    return found


@given(VALUES, st.randoms(use_true_random=False))
def test_reusing_known_parts_writes_the_canonical_text(value: Any, rng: random.Random) -> None:
    parts = _parts(value)
    known = [(part, canonical_json(part)) for part in parts if rng.random() < 0.5]
    assert canonical_json_reusing(value, known, worth=0) == canonical_json(value)


@given(VALUES, VALUES)
def test_an_output_holding_its_input_twice_like_assign(input_value: Any, other: Any) -> None:
    output = {"after": input_value, "before": None, "output": input_value, "x": other}
    known = [(input_value, canonical_json(input_value))]
    assert canonical_json_reusing(output, known, worth=0) == canonical_json(output)
    assert canonical_json_reusing([output, [output]], known, worth=0) == canonical_json(
        [output, [output]]
    )


@given(st.lists(VALUES, max_size=8))
def test_an_aggregate_of_known_child_outputs(outputs: list[Any]) -> None:
    items = [
        {"index": i, "taskId": f"c{i}", "state": "succeeded", "output": out, "error": None}
        for i, out in enumerate(outputs)
    ]
    aggregate = {"items": items}
    known = [(out, canonical_json(out)) for out in outputs]
    assert canonical_json_reusing(aggregate, known, worth=0) == canonical_json(aggregate)


def test_an_equal_but_different_object_is_encoded_not_taken() -> None:
    # Identity, not equality: a stale text for an equal-looking object must not be used.
    part = {"a": 1}
    assert canonical_json_reusing({"k": {"a": 1}}, [(part, '{"a":2}')], worth=0) == '{"k":{"a":1}}'
    assert canonical_json_reusing({"k": part}, [(part, '{"a":1}')], worth=0) == '{"k":{"a":1}}'


@pytest.mark.parametrize(
    "value",
    [
        {1: "int key", 2: [1]},  # keys that are not strings: the encoder's own rules
        {"a": float("nan")},
        {"a": {"b": object()}},
    ],
)
def test_values_the_encoder_treats_specially_match_it(value: Any) -> None:
    # An unrelated known part, so the value is walked rather than handed on whole.
    known: list[tuple[Any, str]] = [([], "[]")]
    try:
        expected: Any = canonical_json(value)
    except (TypeError, ValueError) as error:
        expected = type(error)
    try:
        got: Any = canonical_json_reusing(value, known, worth=0)
    except (TypeError, ValueError) as error:
        got = type(error)
    assert got == expected


def test_a_value_that_contains_itself_is_refused_like_canonical_json() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ValueError):
        canonical_json(loop)
    with pytest.raises(ValueError):
        canonical_json_reusing(loop, [([], "[]")], worth=0)


def test_short_known_texts_are_not_worth_the_walk() -> None:
    part = {"a": 1}
    # A wrong text for a short part is not even looked at (the encoder writes it).
    assert canonical_json_reusing({"k": part}, [(part, "WRONG")]) == '{"k":{"a":1}}'
    big = {"a": "x" * 600}
    assert (
        canonical_json_reusing({"k": big}, [(big, "TAKEN" * 120)]) == '{"k":' + "TAKEN" * 120 + "}"
    )


class Count(int):
    """An int subclass (an IntEnum's kind): left to the encoder, never written by hand."""


@given(SCALARS | st.integers().map(Count) | VALUES)
def test_a_scalar_written_by_hand_is_what_the_encoder_writes(value: Any) -> None:
    # The one rule every walking encoder (this module's and the compiler's fingerprints)
    # writes its leaves by: either the encoder's exact text, or "not mine" (None).
    text = scalar_json(value)
    assert text is None or text == canonical_json(value)
    if type(value) in (str, bool, int) or value is None:
        assert text is not None
