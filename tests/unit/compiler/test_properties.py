"""Property tests: compiling is deterministic, key order is irrelevant, and mutated
documents only ever produce diagnostics (never an exception)."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pydantic
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctl.compiler import CompileResult, compile_workflow
from agentctl.spec import Workflow
from agentctl.spec.loader import parse_workflow_text

REFERENCE = Path(__file__).parents[2] / "fixtures" / "reference"
ACTIONS = {
    "set": {"kind": "builtin.assign"},
    "check": {"kind": "builtin.assert", "with": {"that": True}},
    "remember": {"kind": "builtin.memory.write"},
}
SCALARS = st.one_of(st.integers(-5, 5), st.text("abcxyz", max_size=4), st.booleans(), st.none())


@st.composite
def workflows(draw: st.DrawFn) -> dict[str, Any]:
    """A random valid DAG of assign/assert/memory tasks with foreach, matrix, loop, when."""
    count = draw(st.integers(1, 7))
    tasks: list[dict[str, Any]] = []
    for index in range(count):
        earlier = [f"t{i}" for i in range(index)]
        needs = draw(st.lists(st.sampled_from(earlier), unique=True, max_size=3)) if earlier else []
        task: dict[str, Any] = {"id": f"t{index}", "uses": "action:set", "needs": needs}
        with_: dict[str, Any] = {"n": draw(SCALARS)}
        if needs:
            with_["from"] = f"${{{{ tasks.{needs[0]}.output.output }}}}"
        shape = draw(st.sampled_from(["plain", "foreach", "matrix", "loop", "memory"]))
        if shape == "foreach":
            task["foreach"] = {"items": draw(st.lists(SCALARS, max_size=4))}
            with_["item"] = "${{ vars.item }}"
        elif shape == "matrix":
            task["matrix"] = {
                "axes": {
                    "b": draw(st.lists(SCALARS, min_size=1, max_size=2)),
                    "a": draw(st.lists(SCALARS, min_size=1, max_size=2)),
                }
            }
        elif shape == "loop":
            task["loop"] = {
                "maxIterations": draw(st.integers(1, 4)),
                "while": "${{ vars.loopIndex < 2 }}",
                "initial": {"seed": draw(SCALARS)},
            }
        elif shape == "memory":
            task["uses"] = "action:remember"
            with_ = {"key": f"k{index}", "value": draw(SCALARS)}
        if shape != "loop" and draw(st.booleans()):
            task["when"] = "${{ inputs.go == true }}"
        task["with"] = with_
        tasks.append(task)
    return {
        "apiVersion": "agentctl.dev/v1",
        "kind": "Workflow",
        "metadata": {"name": "prop"},
        "spec": {
            "inputs": {"go": True},
            "runtime": {"maxConcurrency": draw(st.integers(1, 4))},
            "actions": copy.deepcopy(ACTIONS),
            "tasks": tasks,
        },
    }


def _shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {key: _shuffled(value[key], rng) for key in keys}
    if isinstance(value, list):
        return [_shuffled(item, rng) for item in value]
    return value


def _compile_dict(data: dict[str, Any]) -> CompileResult:
    return compile_workflow(Workflow.model_validate(data))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workflows(), st.randoms(use_true_random=False))
def test_deterministic_and_key_order_independent(data: dict[str, Any], rng: random.Random) -> None:
    first = _compile_dict(data)
    assert first.ok, [d.to_json() for d in first.diagnostics]
    assert first.plan is not None
    again = _compile_dict(copy.deepcopy(data))
    assert again.plan is not None and again.plan.plan_digest == first.plan.plan_digest
    text = yaml.safe_dump(_shuffled(data, rng), sort_keys=False)
    loaded = parse_workflow_text(text, "shuffled.yaml")
    assert loaded.document is not None, [d.to_json() for d in loaded.diagnostics]
    shuffled = compile_workflow(loaded.document, source=loaded.source)
    assert shuffled.plan is not None
    assert shuffled.plan.plan_digest == first.plan.plan_digest
    assert shuffled.plan.workflow_digest == first.plan.workflow_digest
    assert shuffled.plan.order == first.plan.order


MUTATIONS = [
    "drop_key",
    "bad_need",
    "self_need",
    "bad_template",
    "bad_uses",
    "dup_id",
    "swap_value",
]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out.extend(_paths(item, (*prefix, index)))
    return out


def _mutate(data: dict[str, Any], rng: random.Random, kind: str) -> None:
    spec = data.get("spec")
    tasks = spec.get("tasks") if isinstance(spec, dict) else None
    if not isinstance(tasks, list) or not tasks or not isinstance(tasks[-1], dict):
        return  # an earlier mutation already broke the document's shape
    task = rng.choice(tasks)
    if not isinstance(task, dict):
        return
    if kind == "drop_key":
        path = rng.choice([p for p in _paths(data) if p and isinstance(p[-1], str)])
        parent: Any = data
        for segment in path[:-1]:
            parent = parent[segment]
        parent.pop(path[-1], None)
    elif kind == "bad_need":
        task["needs"] = [*list(task.get("needs") or []), rng.choice(["ghost", tasks[-1].get("id")])]
    elif kind == "self_need":
        task["needs"] = [task.get("id", "t0")]
    elif kind == "bad_template":
        base = task.get("with")
        task["with"] = dict(base) if isinstance(base, dict) else {}
        task["with"]["bad"] = rng.choice(
            ["${{ env.HOME }}", "${{", "${{ tasks.ghost.output }}", "${{ tasks.t0.output.x }}"]
        )
    elif kind == "bad_uses":
        task["uses"] = rng.choice(["action:ghost", "agent:ghost", "workflow:ghost", "router"])
    elif kind == "dup_id":
        tasks.append(copy.deepcopy(task))
    else:
        path = rng.choice([p for p in _paths(data) if p])
        parent = data
        for segment in path[:-1]:
            parent = parent[segment]
        parent[path[-1]] = rng.choice([None, 0, "x", [], {}, "${{ inputs.go }}"])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    workflows(),
    st.randoms(use_true_random=False),
    st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=3),
)
def test_mutated_documents_only_produce_diagnostics(
    data: dict[str, Any], rng: random.Random, kinds: list[str]
) -> None:
    for kind in kinds:
        _mutate(data, rng, kind)
    try:
        document = Workflow.model_validate(data)
    except pydantic.ValidationError:
        return
    result = compile_workflow(document)
    assert (result.plan is None) == any(d.is_error for d in result.diagnostics)
    for diagnostic in result.diagnostics:
        assert diagnostic.code and diagnostic.message and diagnostic.path is not None


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(["25_1.yaml", "25_2.yaml", "25_3.yaml", "25_4.yaml"]),
    st.randoms(use_true_random=False),
    st.sampled_from(MUTATIONS),
)
def test_mutated_reference_examples_only_produce_diagnostics(
    name: str, rng: random.Random, kind: str
) -> None:
    data = yaml.safe_load((REFERENCE / name).read_text())
    _mutate(data, rng, kind)
    try:
        document = Workflow.model_validate(data)
    except pydantic.ValidationError:
        return
    result = compile_workflow(document)
    assert (result.plan is None) == any(d.is_error for d in result.diagnostics)
