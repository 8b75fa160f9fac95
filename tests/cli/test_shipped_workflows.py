"""Every example shipped in workflows/ passes ``roll --check``: a prediction run that
reads placeholders of unpredictable tasks must not fail on them."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
SHIPPED = sorted(
    p for p in WORKFLOWS.rglob("*") if p.suffix in (".yaml", ".yml") or p.suffix == ".py"
)


def test_the_examples_are_found() -> None:
    names = {p.name for p in SHIPPED}
    assert {"hello.yaml", "agent-with-tools.yaml"} <= names


@pytest.mark.parametrize("workflow", SHIPPED, ids=lambda p: str(p.relative_to(WORKFLOWS)))
def test_shipped_workflow_passes_check(cli: Any, tmp_path: Path, workflow: Path) -> None:
    copy = tmp_path / "workflows"
    shutil.copytree(WORKFLOWS, copy)
    target = copy / workflow.relative_to(WORKFLOWS)
    result = cli("--output", "json", "roll", "--check", target, "--db", tmp_path / "r.db")
    assert result.exit_code == 0, result.stderr
    assert result.json()["data"]["state"] == "succeeded"


def test_a_real_template_mistake_still_fails_in_check_mode(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "wf.yaml"
    path.write_text(
        """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: mistake}
spec:
  actions:
    set: {kind: builtin.assign}
  tasks:
    - {id: first, uses: "action:set", with: {value: 1}}
    - id: second
      uses: action:set
      needs: [first]
      with: {value: "${{ tasks.first.output.nothing }}"}
"""
    )
    result = cli("--output", "json", "roll", "--check", path, "--db", tmp_path / "r.db")
    assert result.exit_code == 4
    assert "nothing" in result.error_json()["error"]["message"]
