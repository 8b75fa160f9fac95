"""The plan artifact: wire shape, storage round trip, digests and fingerprints."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentctl.compiler as compiler
from agentctl.compiler import Plan, compile_workflow
from agentctl.digest import canonical_json, digest_json
from agentctl.errors import NewerFormatError, PersistenceError
from agentctl.spec.loader import load_workflow

REFERENCE = Path(__file__).parents[2] / "fixtures" / "reference"


def _plan(name: str) -> Plan:
    loaded = load_workflow(REFERENCE / name)
    assert loaded.document is not None
    result = compile_workflow(loaded.document, source=loaded.source)
    assert result.plan is not None
    return result.plan


def test_public_api_is_pinned() -> None:
    assert compiler.__all__ == [
        "PLAN_FORMAT_VERSION",
        "CompileResult",
        "CompileSettings",
        "Plan",
        "PlanTask",
        "compile_document",
        "compile_workflow",
    ]


def test_wire_shape() -> None:
    data = _plan("25_4.yaml").to_json()
    assert list(data) == [
        "formatVersion",
        "workflowName",
        "workflowDigest",
        "planDigest",
        "order",
        "maxConcurrency",
        "tasks",
        "predictability",
        "requirements",
        "budget",
    ]
    assert data["formatVersion"] == 1
    assert data["workflowName"] == "provision-with-undo"
    assert data["maxConcurrency"] == 2
    assert data["budget"] == {
        "limits": {"maxTasks": 16, "maxArtifactBytes": 1048576},
        "plannedTasks": 7,
        "plannedExpansionItems": 0,
        "plannedLoopIterations": 0,
    }
    assert set(data["tasks"]["provision"]) >= {
        "id",
        "uses",
        "needs",
        "expansion",
        "routeGuards",
        "memoryWrites",
        "when",
        "vars",
        "input",
        "retry",
        "timeoutSeconds",
        "failure",
        "compensate",
        "outputSchema",
        "predictability",
        "definitionFingerprint",
        "outputContractFingerprint",
    }


@pytest.mark.parametrize("name", ["25_1.yaml", "25_2.yaml", "25_3.yaml", "25_4.yaml"])
def test_round_trip_through_storage(name: str) -> None:
    plan = _plan(name)
    stored = plan.to_json()
    again = Plan.from_json(stored)
    assert again.to_json() == stored
    assert digest_json(again.digest_material()) == plan.plan_digest


def test_fingerprints_are_digests_of_canonical_records() -> None:
    plan = _plan("25_3.yaml")
    for task in plan.tasks.values():
        assert task.definition_fingerprint == digest_json(task.definition_json())
        assert task.output_contract_fingerprint == digest_json(task.output_schema)
    assert canonical_json(plan.to_json())  # JSON-serialisable throughout


def test_plan_digest_covers_task_changes() -> None:
    plan = _plan("25_1.yaml")
    data = plan.to_json()
    data["tasks"]["verify"]["definitionFingerprint"] = "sha256:" + "0" * 64
    assert digest_json(Plan.from_json(data).digest_material()) != plan.plan_digest


def test_newer_format_is_refused() -> None:
    data = _plan("25_1.yaml").to_json()
    data["formatVersion"] = 2
    with pytest.raises(NewerFormatError):
        Plan.from_json(data)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.pop("tasks"),
        lambda d: d.update(order=["ghost"]),
        lambda d: d.update(formatVersion="1"),
        lambda d: d["tasks"]["compose"].update(failure="explode"),
        lambda d: d["tasks"]["compose"]["uses"].update(kind="team"),
    ],
)
def test_malformed_plan_is_a_persistence_error(mutate: object) -> None:
    data = _plan("25_1.yaml").to_json()
    mutate(data)  # type: ignore[operator]
    with pytest.raises(PersistenceError):
        Plan.from_json(data)


def test_plan_helpers() -> None:
    plan = _plan("25_3.yaml")
    assert [t.id for t in plan.ordered_tasks()] == list(plan.order)
    assert plan.task("builds").is_aggregate
    assert plan.task("builds").uses.children == list(plan.task("builds").needs)
    assert plan.task("soak").uses.children[0].startswith("soak--0000-")
    assert not plan.task("pick").is_aggregate and plan.task("pick").uses.children == []
