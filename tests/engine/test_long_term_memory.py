"""Long-term memory actions in a real run: write, read, search, promote; replay reuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: remember}
spec:
  policy: {approval: never}
  memory:
    longTerm: {namespace: notes, retentionDays: 30}
  actions:
    store: {kind: builtin.long_term_memory.write}
    fetch: {kind: builtin.long_term_memory.read}
    find: {kind: builtin.long_term_memory.search}
    promote: {kind: builtin.long_term_memory.promote}
    set: {kind: builtin.assign}
  tasks:
    - id: save-a
      uses: action:store
      with: {key: disk, content: {type: text, text: "db-2 ran out of disk space"}}
    - id: save-b
      uses: action:store
      needs: [save-a]
      with: {key: cert, content: {type: json, value: {days: 3}, text: "certificate expires soon"}}
    - id: read
      uses: action:fetch
      needs: [save-b]
      with: {key: cert}
    - id: search
      uses: action:find
      needs: [save-b]
      with: {query: "disk space", mode: hybrid, limit: 2}
    - id: keep
      uses: action:promote
      needs: [search]
      with: {key: topHit, value: "${{ tasks.search.output.count }}"}
    - id: report
      uses: action:set
      needs: [keep, read]
      with: {top: "${{ memory.topHit }}", days: "${{ tasks.read.output.value.days }}"}
"""


def test_long_term_memory_in_a_run_and_replay(
    cli: Any, write_workflow: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_workflow(WORKFLOW)
    db = tmp_path / "r.db"
    result = cli("--output", "json", "roll", path, "--db", db)
    assert result.exit_code == 0, result.stderr
    data = result.json()["data"]
    assert data["output"]["report"]["output"] == {"top": 2, "days": 3}
    assert data["output"]["search"]["results"][0]["key"] == "disk"
    assert data["output"]["save-a"]["changed"] is True
    effects = cli("--output", "json", "effects", "list", data["runId"], "--db", db).json()["data"][
        "effects"
    ]
    classes = {e["operation"]: e["effectClass"] for e in effects}
    assert classes == {
        "builtin.long_term_memory.write": "external_mutate",
        "builtin.long_term_memory.read": "observe",
        "builtin.long_term_memory.search": "observe",
        "builtin.long_term_memory.promote": "internal_state",
    }
    stored = cli("--output", "json", "memory", "get", "notes", "disk", "--db", db)
    assert stored.exit_code == 0, stored.stderr

    def no_embedding(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("replay must not embed or search")

    monkeypatch.setattr("agentctl.memory.LongTermMemory.retrieve", no_embedding)
    replayed = cli("--output", "json", "replay", data["runId"], "--db", db)
    assert replayed.exit_code == 0, replayed.stderr
    assert replayed.json()["data"]["output"] == data["output"]


def test_long_term_memory_check_mode_predicts(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    path = write_workflow(
        WORKFLOW.replace("      needs: [keep, read]\n", "      needs: [keep]\n")
        .replace('days: "${{ tasks.read.output.value.days }}"', "days: 0")
        .replace('value: "${{ tasks.search.output.count }}"', "value: predicted")
    )
    result = cli("--output", "json", "roll", path, "--db", tmp_path / "r.db", "--check")
    assert result.exit_code == 0, result.stderr
    output = result.json()["data"]["output"]
    assert output["save-a"]["status"] == "requires_execution"
    assert output["search"]["query"]["mode"] == "hybrid"
    assert not (tmp_path / "r.db").exists()
