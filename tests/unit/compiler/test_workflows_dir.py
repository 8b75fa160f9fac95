"""Every example in workflows/*.yaml compiles without errors, and together they use every
construct the examples are meant to demonstrate."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentctl.compiler import Plan, compile_workflow
from agentctl.spec.loader import load_workflow

WORKFLOWS = Path(__file__).parents[3] / "workflows"
FILES = sorted(WORKFLOWS.glob("*.yaml"))


def _plan(path: Path) -> Plan:
    loaded = load_workflow(path)
    assert loaded.document is not None, [d.to_json() for d in loaded.diagnostics]
    result = compile_workflow(loaded.document, source=loaded.source)
    assert result.ok, [d.to_json() for d in result.diagnostics]
    assert not result.errors
    assert result.plan is not None
    return result.plan


def test_there_are_examples() -> None:
    assert 5 <= len(FILES) <= 8
    assert WORKFLOWS / "hello.yaml" in FILES


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_example_compiles(path: Path) -> None:
    _plan(path)


def test_examples_cover_every_construct() -> None:
    kinds: set[str] = set()
    actions: set[str] = set()
    features: set[str] = set()
    for path in FILES:
        loaded = load_workflow(path)
        assert loaded.document is not None
        spec = loaded.document.spec
        actions |= {action.kind for action in spec.actions.values()}
        if spec.subworkflows:
            features.add("subworkflow")
        if spec.runtime.budgets.max_tasks is not None:
            features.add("budgets")
        if spec.policy.approval in ("mutations", "high_risk", "always"):
            features.add("approvals")
        if any(t.approval == "always" for t in spec.tools.values()):
            features.add("tool-approval")
        if any(a.provider_options.get("toolInput") for a in spec.agents.values()):
            features.add("scripted-tool-call")
        plan = _plan(path)
        for task in plan.tasks.values():
            kinds.add(task.uses.kind)
            if task.when is not None and task.expansion is None:
                features.add("when")
            if task.compensate is not None:
                features.add("compensate")
            if task.memory_writes:
                features.add("memoryWrites")
            if task.expansion is not None and "matrix" in task.expansion.bindings:
                features.add("matrix")
            if task.expansion is not None and "foreachIndex" in task.expansion.bindings:
                features.add("foreach")
    assert kinds == {
        "action",
        "agent",
        "aggregate",
        "router",
        "loop_aggregate",
        "subworkflow_input",
        "subworkflow_aggregate",
    }
    assert {
        "builtin.assign",
        "builtin.assert",
        "builtin.read",
        "builtin.write",
        "builtin.shell.exec",
        "builtin.memory.read",
        "builtin.memory.write",
    } <= actions
    assert features == {
        "subworkflow",
        "budgets",
        "approvals",
        "tool-approval",
        "scripted-tool-call",
        "when",
        "compensate",
        "memoryWrites",
        "matrix",
        "foreach",
    }
