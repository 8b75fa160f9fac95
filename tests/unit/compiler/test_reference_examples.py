"""The reference's four examples (docs/workflow-language.md) compile as the reference predicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentctl.compiler import compile_workflow
from agentctl.spec.loader import load_workflow

REFERENCE = Path(__file__).parents[2] / "fixtures" / "reference"


def _compile(name: str):  # type: ignore[no-untyped-def]
    loaded = load_workflow(REFERENCE / name)
    assert loaded.document is not None, [d.to_json() for d in loaded.diagnostics]
    return compile_workflow(loaded.document, source=loaded.source)


@pytest.mark.parametrize("name", ["25_1.yaml", "25_2.yaml", "25_3.yaml", "25_4.yaml"])
def test_compiles_without_diagnostics(name: str) -> None:
    result = _compile(name)
    assert result.ok and result.diagnostics == []


def test_25_3_matrix_router_loop() -> None:
    plan = _compile("25_3.yaml").plan
    assert plan is not None
    assert plan.order[:5] == (
        "builds--0000-f8f3437c091e",
        "builds--0001-9df013d0f907",
        "builds--0002-f710ed5770d3",
        "builds--0003-fdb83aa6ee39",
        "builds",
    )
    assert [g.router for g in plan.task("smoke").route_guards] == ["pick"]
    assert plan.task("soak").uses.kind == "loop_aggregate"
    assert len(plan.task("soak").uses.children) == 5
    assert plan.task(plan.task("soak").uses.children[0]).needs == ("smoke",)


def test_25_4_order_and_memory_keys() -> None:
    plan = _compile("25_4.yaml").plan
    assert plan is not None
    assert plan.order == (
        "config--inputs-5ad08453",
        "config--format",
        "config",
        "note-service",
        "note-owner",
        "provision",
        "smoke",
    )
    assert plan.task("note-service").memory_writes == ("lastService",)
    assert plan.task("note-owner").memory_writes == ("lastOwner",)
    assert plan.task("provision").compensate is not None
    assert plan.predictability == "partially_predictable"


def test_25_2_agent_plan() -> None:
    plan = _compile("25_2.yaml").plan
    assert plan is not None
    assert plan.task("triage").predictability == "requires_execution"
    assert plan.task("triage").output_schema is not None
    assert plan.requirements.providers[0].name == "scripted"
    ops = [(e.task, e.operation) for e in plan.requirements.effects]
    assert ops == [
        ("triage", "scripted"),
        ("triage", "tool.read_note"),
        ("record", "builtin.write"),
    ]
