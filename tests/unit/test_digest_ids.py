from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentctl.digest import canonical_json, digest_json, effect_id, effect_input_digest
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
