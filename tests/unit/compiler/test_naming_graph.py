"""Naming (docs/compiler.md) and stable order / cycles (docs/compiler.md)."""

from __future__ import annotations

import itertools

import pytest

from agentctl.compiler.graph import CycleError, ancestor_masks, find_cycle, stable_order
from agentctl.compiler.naming import (
    expansion_child_id,
    foreach_bindings,
    loop_bindings,
    loop_previous_template,
    matrix_bindings,
    subworkflow_child_id,
    subworkflow_input_id,
    subworkflow_prefix,
)


def test_matrix_child_ids_match_reference_examples() -> None:
    axes = {"arch": ["amd64", "arm64"], "python": ["3.11", "3.12"]}
    combos = itertools.product(*(axes[name] for name in sorted(axes)))
    ids = [
        expansion_child_id("builds", i, matrix_bindings(dict(zip(sorted(axes), c, strict=True)), i))
        for i, c in enumerate(combos)
    ]
    assert ids == [
        "builds--0000-f8f3437c091e",
        "builds--0001-9df013d0f907",
        "builds--0002-f710ed5770d3",
        "builds--0003-fdb83aa6ee39",
    ]


def test_bindings_sort_top_level_keys_only() -> None:
    bindings = foreach_bindings("item", {"z": 1, "a": 2}, 0)
    assert list(bindings) == ["foreachIndex", "item"]
    assert list(bindings["item"]) == ["z", "a"]
    # A nested object in document order gives a different id than the sorted one would.
    assert expansion_child_id("t", 0, bindings) != expansion_child_id(
        "t", 0, foreach_bindings("item", {"a": 2, "z": 1}, 0)
    )
    # An uppercase binding sorts before foreachIndex (code point order).
    assert list(foreach_bindings("Zed", 1, 0)) == ["Zed", "foreachIndex"]


def test_loop_bindings_chain_previous_iteration() -> None:
    first = loop_bindings(0, {"value": "seed"})
    first_id = expansion_child_id("soak", 0, first)
    assert first_id.startswith("soak--0000-") and len(first_id) == len("soak--0000-") + 12
    second = loop_bindings(1, loop_previous_template(first_id))
    assert second["loopPrevious"] == "${{ tasks." + first_id + ".output }}"


def test_subworkflow_names() -> None:
    assert subworkflow_input_id("summary", "summarize", "1.0.0") == "summary--inputs-4d45e657"
    assert subworkflow_input_id("config", "render-config", "1.2.0") == "config--inputs-5ad08453"
    assert subworkflow_child_id("left", "write") == "left--write"
    assert subworkflow_prefix("my-call") == "my_call__"


def test_stable_order_reference_example() -> None:
    assert stable_order(["b", "a", "c"], {"c": ["a", "b"]}) == ["b", "a", "c"]


def test_ready_task_goes_before_later_declared_queued_tasks() -> None:
    # x and z are ready at once; y becomes ready after x and is declared before z.
    assert stable_order(["x", "y", "z"], {"y": ["x"]}) == ["x", "y", "z"]
    assert stable_order(["y", "x", "z"], {"y": ["x"]}) == ["x", "y", "z"]
    assert stable_order(["late", "x", "y"], {"late": ["y"]}) == ["x", "y", "late"]


def test_cycle_reports_path() -> None:
    with pytest.raises(CycleError) as caught:
        stable_order(["a", "b", "c"], {"a": ["b"], "b": ["a"], "c": ["a"]})
    assert caught.value.cycle == ["a", "b", "a"]
    assert str(caught.value) == "task dependency cycle: a -> b -> a"


def test_find_cycle_on_longer_loop_and_self_need() -> None:
    assert find_cycle(["a", "b", "c"], {"a": ["c"], "b": ["a"], "c": ["b"]}) == [
        "a",
        "c",
        "b",
        "a",
    ]
    assert find_cycle(["s"], {"s": ["s"]}) == ["s", "s"]


def test_ancestor_masks_are_transitive() -> None:
    order = ["a", "b", "c", "d"]
    masks = ancestor_masks(order, {"b": ["a"], "c": ["b"]})
    assert masks["c"] & 1  # a is an ancestor of c through b
    assert masks["d"] == 0
