"""Rendering templates into values (docs/templates.md, docs/workflow-language.md)."""

from __future__ import annotations

from typing import Any

import pytest

from agentctl.spec.template_values import json_text
from agentctl.spec.templates import (
    TemplateContext,
    TemplateValueError,
    UndefinedValueError,
    parse_template,
    render,
)

LIMITS = {"maxRetries": 3, "nested": {"flag": True}}
CTX = TemplateContext(
    inputs={
        "team": "infra",
        "limits": LIMITS,
        "count": 3,
        "ratio": 1.0,
        "big": 1e20,
        "flag": False,
        "nothing": None,
        "list": [1, "a"],
        "text": "${{ inputs.team }}",
    },
    vars={"matrix": {"arch": "arm64", "python": "3.12"}, "matrixIndex": 0},
    memory={"owner": "ops"},
    tasks={"compose": {"output": {"banner": "hi"}}, "skipped": {"reason": "x"}, "nulled": None},
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${{ inputs.limits }}", LIMITS),
        ("${{ inputs.count }}", 3),
        ("${{ inputs.ratio }}", 1.0),
        ("${{ inputs.flag }}", False),
        ("${{ inputs.nothing }}", None),
        ("${{ inputs.list }}", [1, "a"]),
        ("${{ inputs.team }}", "infra"),
        ("${{ vars.matrixIndex }}", 0),
        ("${{ memory.owner }}", "ops"),
        ("${{ tasks.compose.output }}", {"output": {"banner": "hi"}}),
        ("${{ tasks.compose.output.output.banner }}", "hi"),
        ("${{ tasks.nulled.output }}", None),
        ("${{ inputs.limits.nested.flag }}", True),
    ],
)
def test_exact_template_keeps_json_type(text: str, expected: Any) -> None:
    result = render(text, CTX)
    assert result == expected
    assert type(result) is type(expected)


def test_exact_template_result_is_a_copy() -> None:
    result = render({"l": "${{ inputs.limits }}"}, CTX)
    result["l"]["nested"]["flag"] = False
    assert LIMITS["nested"] == {"flag": True}


def test_exact_condition_renders_a_boolean() -> None:
    assert render("${{ inputs.count >= 1 }}", CTX) is True
    assert render("${{ not inputs.flag }}", CTX) is True
    assert render("${{ inputs.team == 'infra' }}", CTX) is True


def test_leading_whitespace_makes_interpolation() -> None:
    assert render(" ${{ inputs.count }}", CTX) == " 3"
    assert render("${{ inputs.count }}\n", CTX) == "3\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Release ready for ${{ inputs.team }}", "Release ready for infra"),
        ("${{ vars.matrix.arch }}-py${{ vars.matrix.python }}", "arm64-py3.12"),
        ("n=${{ inputs.count }}", "n=3"),
        ("r=${{ inputs.ratio }}", "r=1.0"),
        ("b=${{ inputs.big }}", "b=1e20"),
        ("f=${{ inputs.flag }}", "f=false"),
        ("t=${{ inputs.limits.nested.flag }}", "t=true"),
        ("z=${{ inputs.nothing }}", "z=null"),
        ("${{ inputs.team }}${{ inputs.team }}", "infrainfra"),
        ("x ${{ inputs.text }} y", "x ${{ inputs.team }} y"),  # values are not re-rendered
        ("no templates here", "no templates here"),
    ],
)
def test_interpolation_writes_scalars_as_text(text: str, expected: str) -> None:
    assert render(text, CTX) == expected


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0, "0"),
        (-7, "-7"),
        (2**70, str(2**70)),
        (1.0, "1.0"),
        (-2.5, "-2.5"),
        (0.1, "0.1"),
        (100.0, "100.0"),
        (1e15, "1000000000000000.0"),
        (1e16, "1e16"),
        (1.2345e16, "1.2345e16"),
        (1e20, "1e20"),
        (1e-5, "0.00001"),
        (1.5e-5, "0.000015"),
        (1e-6, "1e-6"),
        (1.5e-7, "1.5e-7"),
        (123456.789, "123456.789"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e308"),
        (float("inf"), "null"),
    ],
)
def test_number_text_form_follows_the_reference(number: float, text: str) -> None:
    assert json_text(number) == text


def test_object_or_array_inside_text_is_an_error() -> None:
    with pytest.raises(TemplateValueError, match="embedded object or array `inputs.limits`"):
        render("config=${{ inputs.limits }}", CTX)
    with pytest.raises(TemplateValueError, match="embedded object or array"):
        render("${{ inputs.list }} ", CTX)


def test_condition_inside_interpolation_is_not_evaluated() -> None:
    with pytest.raises(TemplateValueError, match="condition is evaluated only when"):
        render("ok: ${{ inputs.count == 3 }}", CTX)
    with pytest.raises(TemplateValueError):
        render(" ${{ not inputs.flag }}", CTX)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("${{ inputs.missing }}", "`inputs` has no key `missing`"),
        ("${{ inputs.limits.other }}", "no key `other`"),
        ("${{ inputs.team.length }}", "cannot read `length` from a non-object value"),
        ("${{ inputs.list.0 }}", "cannot read `0` from a non-object value"),
        ("${{ tasks.failed.output }}", "task `failed` has no recorded output"),
        ("${{ tasks.nulled.output.x }}", "cannot read `x`"),
        ("x ${{ vars.anything }}", "`vars` has no key `anything`"),
    ],
)
def test_missing_path_is_undefined_not_null(text: str, message: str) -> None:
    with pytest.raises(UndefinedValueError, match=message):
        render(text, CTX)


def test_outputs_render_with_empty_vars_fails_on_vars() -> None:
    outputs_context = TemplateContext(inputs=CTX.inputs, memory=CTX.memory, tasks=CTX.tasks)
    with pytest.raises(UndefinedValueError, match="undefined value `vars.matrixIndex`"):
        render({"slot": "${{ vars.matrixIndex }}"}, outputs_context)


def test_render_walks_lists_and_objects_but_not_keys() -> None:
    value = {
        "${{ inputs.team }}": "${{ inputs.team }}",
        "items": ["${{ inputs.count }}", 2, None, True, {"deep": "v=${{ inputs.count }}"}],
        "n": 1.5,
    }
    assert render(value, CTX) == {
        "${{ inputs.team }}": "infra",
        "items": [3, 2, None, True, {"deep": "v=3"}],
        "n": 1.5,
    }


def test_render_errors_carry_the_location() -> None:
    with pytest.raises(UndefinedValueError) as caught:
        render({"steps": [{"cmd": "ok"}, {"cmd": "${{ inputs.nope }}"}]}, CTX)
    assert caught.value.location == ".steps[1].cmd"
    assert caught.value.offset == 4
    with pytest.raises(UndefinedValueError) as caught:
        render({"a b": "${{ inputs.nope }}"}, CTX)
    assert caught.value.location == '["a b"]'


def test_template_object_renders_repeatedly() -> None:
    template = parse_template("${{ inputs.count }}")
    assert template.render(CTX) == 3
    assert template.render(TemplateContext(inputs={"count": 4})) == 4


def test_context_as_json_has_the_reference_field_order() -> None:
    as_json = CTX.as_json()
    assert list(as_json) == ["inputs", "vars", "memory", "tasks"]
    assert list(as_json["inputs"]) == sorted(CTX.inputs)
    assert list(as_json["inputs"]["limits"]) == ["maxRetries", "nested"]
