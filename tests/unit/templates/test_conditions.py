"""The condition language: ``when``, loop ``while`` and exact-template booleans
(docs/templates.md)."""

from __future__ import annotations

from typing import Any

import pytest

from agentctl.spec.templates import (
    TemplateContext,
    TemplateSyntaxError,
    TemplateValueError,
    UndefinedValueError,
    evaluate_condition,
    is_truthy,
    json_equal,
    parse_condition,
    render,
)

CTX = TemplateContext(
    inputs={
        "one": 1,
        "one_float": 1.0,
        "two": 2,
        "half": 0.5,
        "yes": True,
        "no": False,
        "name": "ship",
        "quoted": "'x'",
        "eqs": "a==b",
        "empty": "",
        "nothing": None,
        "list": [1, 2],
        "obj": {"b": 1, "a": 2},
        "zero": 0,
        "neg_zero": -0.0,
        "big": 2**63,
        "huge": 10**400,
    },
    vars={"loopIndex": 2, "loopPrevious": {"value": "seed"}},
    memory={"owner": "ops"},
    tasks={"triage": {"severity": "high", "score": 7}, "nulled": None},
)


def cond(text: str) -> bool:
    return evaluate_condition(text, CTX)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("inputs.one == 1", True),
        ("inputs.one == 2", False),
        ("inputs.one != 2", True),
        ("inputs.one != 1", False),
        ("inputs.one < 2", True),
        ("inputs.one < 1", False),
        ("inputs.one <= 1", True),
        ("inputs.one <= 0.5", False),
        ("inputs.two > 1.5", True),
        ("inputs.two > 2", False),
        ("inputs.two >= 2", True),
        ("inputs.two >= 2.5", False),
        ("inputs.half < 1", True),
        ("inputs.one_float <= 1", True),
        ("vars.loopIndex < 3", True),
        ("tasks.triage.output.severity == 'high'", True),
        ('tasks.triage.output.severity == "high"', True),
        ("tasks.triage.output.severity == high", True),
        ("tasks.triage.output.score >= 7", True),
        ("memory.owner == ops", True),
        ("inputs.yes == true", True),
        ("inputs.no == false", True),
        ("inputs.nothing == null", True),
        ("inputs.list == [1, 2]", True),
        ("inputs.list == [2, 1]", False),
        ('inputs.obj == {"a": 2, "b": 1}', True),
        ("tasks.nulled.output == null", True),
    ],
)
def test_each_operator(text: str, expected: bool) -> None:
    assert cond(text) is expected
    assert cond(f"${{{{ {text} }}}}") is expected
    assert render(f"${{{{ {text} }}}}", CTX) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, False),
        (False, False),
        (True, True),
        (0, False),
        (0.0, False),
        (-0.0, False),
        (1, True),
        (-1, True),
        (0.1, True),
        ("", False),
        ("false", True),
        ("0", True),
        ([], False),
        ([0], True),
        ({}, False),
        ({"a": None}, True),
    ],
)
def test_truthiness_without_operator(value: Any, expected: bool) -> None:
    assert is_truthy(value) is expected
    context = TemplateContext(inputs={"v": value})
    assert evaluate_condition("${{ inputs.v }}", context) is expected
    assert evaluate_condition("not inputs.v", context) is (not expected)


def test_not_negates_the_whole_comparison() -> None:
    assert cond("not inputs.one == 2") is True
    assert cond("${{ not inputs.one == 1 }}") is False
    assert cond("${{ not   inputs.name }}") is False
    assert render("${{ not inputs.empty }}", CTX) is True


def test_not_requires_a_following_space() -> None:
    with pytest.raises(TemplateSyntaxError, match="unknown root `notinputs`"):
        cond("notinputs.one")
    with pytest.raises(TemplateSyntaxError):
        cond("not")


def test_when_may_be_bare_or_wrapped_and_whitespace_is_harmless() -> None:
    assert cond("  ${{   inputs.yes }}  \n") is True
    assert cond("inputs.yes") is True
    assert cond("\t${{inputs.one==1}}") is True


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # JSON literal first, then a bare string with leading/trailing quotes stripped.
        ("inputs.name == 'ship'", True),
        ('inputs.name == "ship"', True),
        ("inputs.name == ''ship''", True),
        ("inputs.name == 'ship\"", True),
        ("inputs.quoted == \"'x'\"", True),
        ("inputs.quoted == 'x'", False),
        ("inputs.name == inputs.name", False),  # no path-to-path comparison
        ('inputs.one == "1"', False),
        ("inputs.one == '1'", False),
        ("inputs.empty == ''", True),
        ('inputs.empty == ""', True),
        ("inputs.name == ship ", True),
    ],
)
def test_quoting_and_literals(text: str, expected: bool) -> None:
    assert cond(text) is expected


def test_right_side_that_looks_like_a_path_is_a_string() -> None:
    context = TemplateContext(inputs={"a": "inputs.b", "b": "x"})
    assert evaluate_condition("inputs.a == inputs.b", context) is True


# Number equality: compare the JSON type first (docs/templates.md).
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("inputs.one == 1.0", False),
        ("inputs.one_float == 1", False),
        ("inputs.one_float == 1.0", True),
        ("inputs.one_float == 1e0", True),
        ("inputs.yes == 1", False),
        ("inputs.one == true", False),
        ("inputs.no == 0", False),
        ("inputs.zero == false", False),
        ("inputs.zero == null", False),
        ('inputs.one == "1"', False),
        ("inputs.one != 1.0", True),
        ("inputs.yes != 1", True),
        ("inputs.neg_zero == 0.0", True),
        ("inputs.zero == -0", False),  # `-0` is a float literal in the reference
    ],
)
def test_type_sensitive_equality(text: str, expected: bool) -> None:
    assert cond(text) is expected


@pytest.mark.parametrize(
    ("left", "right", "equal"),
    [
        (1, 1, True),
        (1, 1.0, False),
        (True, 1, False),
        (False, 0, False),
        (True, True, True),
        (None, None, True),
        (None, False, False),
        ("a", "a", True),
        ([1, [True]], [1, [True]], True),
        ([1, [True]], [1, [1]], False),
        ({"a": 1, "b": [1]}, {"b": [1], "a": 1}, True),
        ({"a": 1}, {"a": 1.0}, False),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ([1], (1,), False),
    ],
)
def test_json_equal(left: Any, right: Any, equal: bool) -> None:
    assert json_equal(left, right) is equal
    assert json_equal(right, left) is equal


def test_out_of_range_integer_literals_are_floats_like_the_reference() -> None:
    assert cond(f"inputs.big == {2**63}") is True
    assert cond(f"inputs.big == {2**64}") is False  # 2**64 is read as a float
    assert cond(f"inputs.big < {2**64}") is True


def test_ordering_compares_as_floats() -> None:
    assert cond("inputs.huge > 1e308") is True
    context = TemplateContext(inputs={"n": 2**53 + 1})
    assert evaluate_condition(f"inputs.n <= {2**53}", context) is True


@pytest.mark.parametrize(
    "text",
    ["inputs.name < 3", "inputs.yes > 0", "inputs.nothing >= 0", "inputs.list < 1"],
)
def test_ordering_on_a_non_number_is_an_error_not_false(text: str) -> None:
    with pytest.raises(TemplateValueError, match="needs a number"):
        cond(text)
    with pytest.raises(TemplateValueError):
        render(f"${{{{ {text} }}}}", CTX)


@pytest.mark.parametrize("literal", ["'3'", "x", "true", "null", "[1]", "NaN", "Infinity", "1e400"])
def test_ordering_needs_a_numeric_literal(literal: str) -> None:
    with pytest.raises(TemplateSyntaxError, match="compares numbers"):
        cond(f"inputs.one < {literal}")


def test_nan_and_infinity_literals_are_strings() -> None:
    context = TemplateContext(inputs={"s": "NaN", "t": "Infinity"})
    assert evaluate_condition("inputs.s == NaN", context) is True
    assert evaluate_condition("inputs.t == Infinity", context) is True


def test_missing_path_is_an_error_not_false() -> None:
    with pytest.raises(UndefinedValueError, match="undefined value `inputs.missing`"):
        cond("${{ inputs.missing == 1 }}")
    with pytest.raises(UndefinedValueError, match="task `later` has no recorded output"):
        cond("not tasks.later.output")


def test_empty_right_side_is_an_error() -> None:
    with pytest.raises(TemplateSyntaxError, match="needs a right-hand side"):
        cond("inputs.one ==")


def test_condition_offsets_point_into_the_original_text() -> None:
    expression = parse_condition("  ${{  inputs.one == 1 }}")
    assert expression.offset == 7
    assert expression.path_offset == 7
    assert parse_condition("inputs.one").path_offset == 0
    with pytest.raises(TemplateSyntaxError) as caught:
        parse_condition("  ${{ env.x }}")
    assert caught.value.offset == 6


# Operator parsing (docs/templates.md): the reference picks the operator by priority and
# splits at its first occurrence; here the operator right after the path is used.
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("inputs.name != 'a==b'", True),
        ("inputs.eqs == 'a==b'", True),
        ("inputs.eqs != 'a==b'", False),
        ("inputs.name < 3 == 3", None),  # still an error: `3 == 3` is no number
        ("inputs.one < 2 ", True),
        ("inputs.one <= 1", True),
        ("inputs.name == '<'", False),
        ("inputs.name != '>='", True),
        ("inputs.one !== 1", True),  # literal `= 1` (a string) is not 1
    ],
)
def test_operator_after_the_path_wins(text: str, expected: bool | None) -> None:
    if expected is None:
        with pytest.raises(TemplateSyntaxError):
            cond(text)
    else:
        assert cond(text) is expected


def test_unchecked_expression_cannot_be_evaluated_with_an_unknown_root() -> None:
    from agentctl.spec.expressions import evaluate_value, parse_expression

    for text in ("loop.output", "inputs"):
        with pytest.raises(TemplateSyntaxError):
            evaluate_value(parse_expression(text, check_roots=False), CTX)
