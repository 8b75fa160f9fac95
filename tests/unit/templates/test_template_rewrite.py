"""Rewriting template paths for sub-workflows (docs/compiler.md) and the loop alias
(docs/workflow-language.md)."""

from __future__ import annotations

from agentctl.spec.template_rewrite import (
    alias_loop_output,
    rewrite_references,
    rewrite_template_roots,
)
from agentctl.spec.templates import TemplateContext, evaluate_condition, render

BOUNDARY = "left--inputs-4d45e657"
TASKS = {"write": "left--write", "prepare": "left--prepare"}


def rewrite(value: object, *, condition: bool = False) -> object:
    return rewrite_template_roots(
        value,
        inputs_to=BOUNDARY,
        memory_prefix="left__",
        task_ids=TASKS,
        condition=condition,
    )


def test_each_root_is_rewritten_inside_templates() -> None:
    assert rewrite("${{ inputs.service }}") == f"${{{{ tasks.{BOUNDARY}.output.service }}}}"
    assert rewrite("${{ memory.result }}") == "${{ memory.left__result }}"
    assert rewrite("${{ memory.result.deep }}") == "${{ memory.left__result.deep }}"
    assert rewrite("${{ tasks.prepare.output.text }}") == "${{ tasks.left--prepare.output.text }}"
    assert rewrite("${{ vars.loopIndex }}") == "${{ vars.loopIndex }}"


def test_non_local_tasks_and_bare_roots_are_kept() -> None:
    assert rewrite("${{ tasks.outer.output }}") == "${{ tasks.outer.output }}"
    assert rewrite("${{ inputs }}") == "${{ inputs }}"


def test_plain_text_and_literals_are_not_rewritten() -> None:
    text = "see inputs.txt and memory.md: ${{ inputs.a == 'memory.x' }} tasks.write.output"
    assert rewrite(text) == (
        f"see inputs.txt and memory.md: ${{{{ tasks.{BOUNDARY}.output.a == 'memory.x' }}}}"
        " tasks.write.output"
    )
    # A key called `inputs` deep in a path is not a root.
    assert rewrite("${{ tasks.outer.output.inputs.x }}") == "${{ tasks.outer.output.inputs.x }}"


def test_spacing_operator_and_literal_are_kept_byte_for_byte() -> None:
    text = 'x ${{not   memory.k  !=   "a" }}y${{inputs.b}}'
    assert rewrite(text) == (
        f'x ${{{{not   memory.left__k  !=   "a" }}}}y${{{{tasks.{BOUNDARY}.output.b}}}}'
    )


def test_walks_lists_and_objects_but_not_keys() -> None:
    value = {"${{ inputs.k }}": ["${{ inputs.a }}", 1, {"m": "${{ memory.k }}"}], "n": None}
    assert rewrite(value) == {
        "${{ inputs.k }}": [
            f"${{{{ tasks.{BOUNDARY}.output.a }}}}",
            1,
            {"m": "${{ memory.left__k }}"},
        ],
        "n": None,
    }


def test_invalid_templates_are_left_for_the_checker() -> None:
    assert rewrite("${{ inputs.a + 1 }} ${{ inputs.b }}") == (
        f"${{{{ inputs.a + 1 }}}} ${{{{ tasks.{BOUNDARY}.output.b }}}}"
    )
    assert rewrite("${{ inputs.a") == "${{ inputs.a"


def test_condition_mode_rewrites_bare_and_wrapped_conditions() -> None:
    assert rewrite("inputs.flag == true", condition=True) == (
        f"tasks.{BOUNDARY}.output.flag == true"
    )
    assert rewrite("  ${{ not tasks.write.output.changed }} ", condition=True) == (
        "  ${{ not tasks.left--write.output.changed }} "
    )
    assert rewrite("inputs.a + 1", condition=True) == "inputs.a + 1"


def test_rewritten_template_reads_the_namespaced_values() -> None:
    context = TemplateContext(
        memory={"left__result": "durable"},
        tasks={BOUNDARY: {"service": "api"}, "left--write": {"changed": True}},
    )
    assert render(rewrite("${{ inputs.service }}/${{ memory.result }}"), context) == "api/durable"
    assert evaluate_condition(str(rewrite("tasks.write.output.changed", condition=True)), context)


def test_none_leaves_a_root_alone() -> None:
    value = "${{ inputs.a }} ${{ memory.b }}"
    assert rewrite_template_roots(value, inputs_to=None, memory_prefix=None, task_ids={}) == value


def test_generic_mapper() -> None:
    def upper(path: tuple[str, ...]) -> tuple[str, ...]:
        return (path[0], *(p.upper() for p in path[1:]))

    assert rewrite_references(["${{ vars.a.b }}", "vars.c"], upper) == ["${{ vars.A.B }}", "vars.c"]


def test_loop_output_alias() -> None:
    assert alias_loop_output("${{ loop.output.value != 'done' }}") == (
        "${{ vars.loopPrevious.value != 'done' }}"
    )
    assert alias_loop_output("${{ loop.output }}") == "${{ vars.loopPrevious }}"
    assert alias_loop_output("${{ vars.loopIndex < 2 }}") == "${{ vars.loopIndex < 2 }}"
    assert alias_loop_output("${{ tasks.loop.output }}") == "${{ tasks.loop.output }}"
    context = TemplateContext(vars={"loopPrevious": {"value": "seed"}})
    assert evaluate_condition(alias_loop_output("${{ loop.output.value == seed }}"), context)


def test_many_templates_in_one_string_rewrite_in_linear_time() -> None:
    text = "${{ inputs.a }} " * 5000
    result = rewrite("${{ memory.k }}" + text)
    assert isinstance(result, str)
    assert result.count(f"tasks.{BOUNDARY}.output.a") == 5000
    assert result.startswith("${{ memory.left__k }}")
