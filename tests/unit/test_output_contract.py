"""Output contracts: a structural contract (types, properties, required, items) is met
without a validator pass, and every other case is decided (and worded) by the validator."""

from __future__ import annotations

from typing import Any

import pytest

from agentctl.compiler.plan import PlanTask
from agentctl.engine.run.tasks import check_contract
from agentctl.signals import TaskFailure


def _task(schema: dict[str, Any] | None) -> PlanTask:
    return PlanTask.from_row(
        "t",
        {
            "uses": {"kind": "action", "name": "step"},
            "timeoutSeconds": 60,
            "predictability": "fully_predictable",
            "outputSchema": schema,
        },
    )


def test_an_object_meets_the_plain_object_contract() -> None:
    check_contract(_task({"type": "object"}), {"any": ["thing"]})
    check_contract(_task(None), [1, 2])


@pytest.mark.parametrize("output", [[1], "text", 5, None])
def test_a_non_object_fails_the_plain_object_contract_in_the_validators_words(
    output: Any,
) -> None:
    with pytest.raises(TaskFailure) as info:
        check_contract(_task({"type": "object"}), output)
    assert info.value.code == "output.contract"
    assert f"{output!r} is not of type 'object' at (root)" in info.value.message


def test_a_richer_object_contract_is_still_validated() -> None:
    with pytest.raises(TaskFailure) as info:
        check_contract(_task({"type": "object", "required": ["a"]}), {"b": 1})
    assert "'a' is a required property" in info.value.message


# Contracts with outputs on both sides of them. The fast path may only ever accept what the
# JSON Schema validator accepts; with the keywords it knows (``known``) it accepts every
# valid output itself, and it hands every contract with another keyword to the validator.
_CASES: list[tuple[dict[str, Any], list[Any], bool]] = [
    (
        {
            "type": "object",
            "properties": {"items": {"type": "array"}},
            "required": ["items"],
            "additionalProperties": False,
        },
        [{"items": []}, {"items": [1]}, {}, {"items": 1}, {"items": [], "x": 1}, []],
        True,
    ),
    (
        {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}}},
        [{"n": 1}, {"n": 1.0}, {"n": 1.5}, {"n": True}, {"x": 2.5}, {"x": False}, {"x": "1"}],
        True,
    ),
    ({"type": ["string", "null"], "description": "a name"}, ["a", None, 1, True, {}], True),
    (
        {"type": "array", "items": {"type": "object", "required": ["id"]}},
        [[], [{"id": 1}], [{"id": 1}, {}], [1], {"id": 1}],
        True,
    ),
    (
        {"type": "object", "additionalProperties": {"type": "boolean"}},
        [{}, {"a": True}, {"a": 1}, {"a": None}],
        True,
    ),
    ({"type": "object", "minProperties": 1}, [{}, {"a": 1}], False),
    ({"type": "integer", "minimum": 3}, [1, 5], False),
    ({"enum": [1, 2]}, [1, 3], False),
    ({"type": "object", "properties": {"a": {"const": 1}}}, [{"a": 1}, {"a": 2}], False),
]


@pytest.mark.parametrize(("schema", "outputs", "known"), _CASES)
def test_the_fast_path_accepts_only_what_the_validator_accepts(
    schema: dict[str, Any], outputs: list[Any], known: bool
) -> None:
    import jsonschema

    from agentctl.engine.run.contracts import plainly_valid

    validator = jsonschema.Draft202012Validator(schema)
    for output in outputs:
        valid = validator.is_valid(output)
        assert plainly_valid(schema, output) == (valid and known), (schema, output)
        try:
            check_contract(_task(schema), output)
        except TaskFailure as failure:
            assert not valid and failure.code == "output.contract"
        else:
            assert valid


def test_a_structural_violation_is_still_worded_by_the_validator() -> None:
    schema = {"type": "object", "properties": {"items": {"type": "array"}}, "required": ["items"]}
    with pytest.raises(TaskFailure) as info:
        check_contract(_task(schema), {"items": "x"})
    assert "'x' is not of type 'array' at items" in info.value.message


@pytest.mark.parametrize(
    ("schema", "plain"),
    [
        ({"type": "object"}, True),
        ({"type": ["object"], "title": "t", "description": "d", "$comment": "c"}, True),
        ({"type": "object", "required": ["a"]}, False),
        ({"type": "object", "properties": {"a": {"type": "string"}}}, False),
        ({"type": "object", "additionalProperties": False}, False),
        ({"type": "object", "minProperties": 1}, False),
        ({"type": ["object", "null"]}, False),
        ({"type": "array"}, False),
        ({}, False),
    ],
)
def test_a_contract_accepting_any_object_is_told_apart(schema: dict[str, Any], plain: bool) -> None:
    """``any_object`` (the fast check of the plain action contract) says yes only where the
    validator accepts every object, and is remembered per contract object."""
    import jsonschema

    from agentctl.engine.run.contracts import any_object

    assert any_object(schema) == plain and any_object(schema) == plain
    if plain:
        validator = jsonschema.Draft202012Validator(schema)
        assert all(validator.is_valid(o) for o in ({}, {"a": 1}, {"a": {"b": [None]}}))
    assert any_object(dict(schema)) == plain  # an equal object is looked at on its own
