"""Texts an attempt writes without running the encoder over the whole value: a foreach or
loop aggregate's output around its children's recorded texts (engine/run/tasks.py), and a
part of a recorded output read by a template (``part_text``, engine/run/attempts.py). Each
must be byte for byte ``canonical_json`` of the value it stands for, or stored outputs and
their digests would stop being the canonical ones."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentctl.compiler.plan import TaskUses
from agentctl.digest import canonical_json
from agentctl.engine.core.records import TaskRow
from agentctl.engine.run.attempts import part_text
from agentctl.engine.run.tasks import aggregate_result, loop_result
from agentctl.spec.expressions import TemplateContext
from agentctl.spec.templates import render

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)
STATES = st.sampled_from(["succeeded", "failed", "skipped", "cancelled", "pending", "running"])
ERRORS = st.none() | st.fixed_dictionaries({"message": st.text()}) | VALUES
# A child: no row yet, or a row with or without an output (its text held or not).
CHILDREN = st.none() | st.tuples(STATES, st.booleans(), VALUES, ERRORS, st.booleans())


def _rows(children: list[Any]) -> tuple[list[str], dict[str, TaskRow]]:
    ids = [f"unit[{index}]" for index in range(len(children))]
    rows = {}
    for index, (task_id, child) in enumerate(zip(ids, children, strict=True)):
        if child is None:
            continue
        state, has_output, output, error, text_held = child
        rows[task_id] = TaskRow(
            task_id=task_id,
            ordinal=index,
            status=state,
            attempt=1,
            disposition=None,
            output=output if has_output else None,
            has_output=has_output,
            error=error,
            output_json=canonical_json(output) if has_output and text_held else None,
        )
    return ids, rows


@given(st.lists(CHILDREN, max_size=8))
def test_a_foreach_aggregate_text_is_the_canonical_one(children: list[Any]) -> None:
    ids, rows = _rows(children)
    result = aggregate_result(ids, rows)
    assert result.output_json == canonical_json(result.output)


@given(st.lists(CHILDREN, min_size=1, max_size=8))
def test_a_loop_aggregate_text_is_the_canonical_one(children: list[Any]) -> None:
    ids, rows = _rows(children)
    task: Any = type("Loop", (), {"uses": TaskUses("loop_aggregate", {"children": ids})})()
    result = loop_result(task, rows, None)  # no guard: the loop ended on its own
    assert result.output_json == canonical_json(result.output)


@st.composite
def _nested(draw: st.DrawFn) -> tuple[Any, tuple[str, ...], Any]:
    """A value, a path of keys into it, and what sits there."""
    inner = draw(VALUES)
    keys = tuple(draw(st.lists(st.text(), max_size=3)))
    whole = inner
    for key in reversed(keys):
        siblings = draw(st.dictionaries(st.text(), VALUES, max_size=2))
        siblings.pop(key, None)
        whole = {key: whole, **siblings}
    return whole, keys, inner


@given(_nested())
def test_a_part_text_is_the_canonical_text_of_the_part_or_none(
    case: tuple[Any, tuple[str, ...], Any],
) -> None:
    whole, keys, inner = case
    found = part_text(whole, canonical_json(whole), keys, inner)
    if found is not None:
        assert found == canonical_json(inner)
    else:  # only an object with other members on the way is passed over
        part = whole
        for key in keys:
            assert len(part) > 1 or part is not inner
            part = part[key]


def test_a_part_is_taken_only_when_it_is_the_same_object() -> None:
    whole = {"items": [1, 2]}
    assert part_text(whole, '{"items":[1,2]}', ("items",), whole["items"]) == "[1,2]"
    assert part_text(whole, '{"items":[1,2]}', ("items",), [1, 2]) is None
    assert part_text({"a": 1, "items": [1]}, '{"a":1,"items":[1]}', ("items",), [1]) is None


def test_render_notes_each_object_read_whole_with_the_one_it_copies() -> None:
    items = [{"i": 1}]
    context = TemplateContext(vars={"n": 3}, tasks={"unit": {"items": items}})
    copies: list[Any] = []
    value = {"a": "${{ tasks.unit.output.items }}", "b": "${{ vars.n }}", "c": "n=${{ vars.n }}"}
    rendered = render(value, context, copies)
    assert rendered == {"a": items, "b": 3, "c": "n=3"} and rendered["a"] is not items
    assert [(copy, original) for copy, original, _ in copies] == [(rendered["a"], items)]
    assert copies[0][0] is rendered["a"] and copies[0][1] is items
    assert copies[0][2].path == ("tasks", "unit", "output", "items")
