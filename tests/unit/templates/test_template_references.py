"""Static checks: references and syntax errors with locations (docs/templates.md)."""

from __future__ import annotations

import pytest

from agentctl.spec.templates import (
    Reference,
    TemplateSyntaxError,
    find_references,
    template_errors,
    walk_strings,
)


def test_references_in_document_order_with_locations() -> None:
    value = {
        "cmd": "deploy ${{ inputs.service }} as ${{ memory.owner }}",
        "args": ["${{ tasks.build.output.digest }}", 3, None],
        "opts": {"when": "${{ tasks.gate.output.ok == true }}", "v": "${{ vars.loopIndex }}"},
        "plain": "inputs.not_a_reference",
    }
    refs = find_references(value)
    assert [(r.root, r.path, r.location, r.offset) for r in refs] == [
        ("inputs", ("service",), ".cmd", 11),
        ("memory", ("owner",), ".cmd", 36),
        ("tasks", ("build", "output", "digest"), ".args[0]", 4),
        ("tasks", ("gate", "output", "ok"), ".opts.when", 4),
        ("vars", ("loopIndex",), ".opts.v", 4),
    ]
    assert refs[2].task_id == "build"
    assert refs[0].task_id is None
    assert refs[0].key == "service"
    assert refs[3].text == "tasks.gate.output.ok"
    assert refs[3].expression == "tasks.gate.output.ok == true"


def test_reference_of_a_plain_string() -> None:
    assert find_references("${{ inputs.a }}") == [
        Reference("inputs", ("a",), "inputs.a", "inputs.a", "", 4)
    ]


def test_conditions_inside_interpolation_still_report_their_path() -> None:
    refs = find_references("x ${{ tasks.a.output == 1 }}")
    assert [r.task_id for r in refs] == ["a"]


def test_right_hand_literals_are_not_references() -> None:
    refs = find_references("${{ inputs.a == 'tasks.b.output' }}")
    assert [r.text for r in refs] == ["inputs.a"]


def test_keys_are_never_checked() -> None:
    assert find_references({"${{ tasks.k.output }}": 1}) == []
    assert template_errors({"${{ bad }}": 1}) == []


def test_find_references_raises_located_syntax_errors() -> None:
    with pytest.raises(TemplateSyntaxError) as caught:
        find_references({"with": {"list": ["ok", "${{ env.HOME }}"]}})
    assert caught.value.location == ".with.list[1]"
    assert caught.value.offset == 4
    assert "unknown root `env`" in str(caught.value)


def test_template_errors_collects_all_and_never_raises() -> None:
    value = {
        "a": "${{ inputs.x + 1 }} and ${{ inputs.ok }} and ${{ }}",
        "b": ["${{ tasks.a.items }}", "${{ inputs.y"],
        "c": "fine ${{ inputs.z }}",
        "d": 5,
    }
    errors = template_errors(value)
    assert [(loc, type(err).__name__, err.offset) for loc, err in errors] == [
        (".a", "TemplateSyntaxError", 13),
        (".a", "TemplateSyntaxError", 45),
        (".b[0]", "TemplateSyntaxError", 4),
        (".b[1]", "TemplateSyntaxError", 0),
    ]
    assert "empty template expression" in str(errors[1][1])
    assert "unclosed" in str(errors[3][1])
    assert all(err.location == loc for loc, err in errors)


def test_template_errors_of_clean_values_is_empty() -> None:
    assert template_errors({"a": ["x", "${{ inputs.a }}"], "b": None}) == []
    assert template_errors(42) == []


def test_bare_when_text_is_not_a_template() -> None:
    # Only text inside `${{ }}` is checked statically; a bare `when` is not.
    assert find_references("env.HOME == 1") == []
    assert template_errors("env.HOME == 1") == []


def test_walk_strings_locations() -> None:
    value = {"a": [{"b c": "x", "d": ["y"]}], "e": "z", "f": 1}
    assert list(walk_strings(value, "spec.outputs")) == [
        ('spec.outputs.a[0]["b c"]', "x"),
        ("spec.outputs.a[0].d[0]", "y"),
        ("spec.outputs.e", "z"),
    ]
