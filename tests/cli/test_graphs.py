"""Graphs label expanded children readably (`unit[1]`, not hashes) and a run's graph is
filled by task state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

FANNED = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: fanned}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    set: {kind: builtin.assign}
    boom: {kind: builtin.shell.exec, command: sh, args: ["-c", "exit 1"]}
  tasks:
    - id: unit
      uses: action:set
      foreach: {items: [a, b, c]}
      with: {value: "${{ vars.item }}"}
    - {id: after, uses: action:boom, needs: [unit]}
    - {id: never, uses: action:set, needs: [after], with: {x: 1}}
"""


def _workflow(tmp_path: Path) -> Path:
    path = tmp_path / "fan.yaml"
    path.write_text(FANNED)
    return path


def test_plan_graph_labels_children_readably(cli: Any, tmp_path: Path) -> None:
    mermaid = cli("plan", _workflow(tmp_path), "--graph", "mermaid").stdout
    assert '["unit[0]<br/>action:set"]' in mermaid and '["unit[2]<br/>action:set"]' in mermaid
    assert "--0000-" not in mermaid
    dot = cli("plan", _workflow(tmp_path), "--graph", "dot").stdout
    assert '[label="unit[1]\\naction:set"];' in dot


def test_run_graph_is_filled_by_task_state(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    failed = cli("--output", "json", "roll", _workflow(tmp_path), "--db", db)
    run_id = failed.error_json()["error"]["runId"]
    mermaid = cli("inspect", run_id, "--graph", "mermaid", "--db", db).stdout
    lines = mermaid.splitlines()
    assert lines[0] == "flowchart TD"
    node = {line.split("[", 1)[0].strip(): line for line in lines if '["' in line}
    by_label = {text.split('["')[1].split("<br/>")[0]: name for name, text in node.items()}
    assert f"  class {by_label['unit[1]']} succeeded" in lines
    assert f"  class {by_label['after']} failed" in lines
    assert f"  class {by_label['never']} pending" in lines  # never reached
    assert "  classDef failed fill:#ffcdd2" in lines
    dot = cli("inspect", run_id, "--graph", "dot", "--db", db).stdout
    assert 'failed", style=filled, fillcolor="#ffcdd2"];' in dot
    envelope = cli("--output", "json", "inspect", run_id, "--graph", "dot", "--db", db).json()
    assert envelope["kind"] == "RunGraph" and envelope["data"]["graph"] == dot
