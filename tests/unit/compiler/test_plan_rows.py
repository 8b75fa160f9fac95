"""The compact per-task record a run stores gives back the identical compiled task.

Every workflow shipped in ``workflows/`` and every reference fixture is compiled; each
task's stored row (``PlanTask.to_row``, through canonical JSON) must read back equal to
the task, and the plan rebuilt from its header and rows must equal the plan.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentctl.compiler import CompileSettings, compile_workflow
from agentctl.compiler.plan import Plan, PlanTask
from agentctl.digest import canonical_json
from agentctl.spec import load_workflow

ROOT = Path(__file__).resolve().parents[3]
FILES = sorted(
    [*ROOT.glob("workflows/*.yaml"), *ROOT.glob("tests/fixtures/reference/*.yaml")],
    key=str,
)


def _plans() -> list[tuple[str, Plan]]:
    out = []
    for path in FILES:
        loaded = load_workflow(str(path))
        if not loaded.ok or loaded.document is None:
            continue
        compiled = compile_workflow(
            loaded.document, source=loaded.source, settings=CompileSettings()
        )
        if compiled.ok and compiled.plan is not None:
            out.append((path.name, compiled.plan))
    return out


PLANS = _plans()


def test_the_corpus_is_not_empty() -> None:
    assert len(PLANS) >= 5
    assert sum(len(plan.order) for _, plan in PLANS) >= 50


@pytest.mark.parametrize(("name", "plan"), PLANS, ids=[name for name, _ in PLANS])
def test_rows_read_back_as_the_plan(name: str, plan: Plan) -> None:
    rows = [(t, json.loads(canonical_json(plan.tasks[t].to_row()))) for t in plan.order]
    for task_id, row in rows:
        assert "id" not in row
        assert PlanTask.from_row(task_id, row) == plan.tasks[task_id], task_id
    header = json.loads(canonical_json(plan.header_json()))
    assert "tasks" not in header and header["taskCount"] == len(plan.order)
    rebuilt = Plan.from_parts(header, rows)
    assert rebuilt == plan
    assert canonical_json(rebuilt.to_json()) == canonical_json(plan.to_json())
