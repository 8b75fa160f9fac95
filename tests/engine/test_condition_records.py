"""Every condition decision is kept: ``when`` true or false and each loop guard, shown by
``inspect`` and copied by ``replay`` and ``retry`` (real SQLite files, the real CLI)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: decisions}
spec:
  inputs: {go: true}
  policy: {approval: never}
  actions:
    set: {kind: builtin.assign}
  tasks:
    - id: gated
      uses: action:set
      when: "${{ inputs.go }}"
      with: {ran: yes}
    - id: opposite
      uses: action:set
      when: "${{ inputs.go == false }}"
      with: {ran: yes}
    - id: counter
      uses: action:set
      loop:
        maxIterations: 4
        while: "${{ vars.loopIndex < 2 }}"
        initial: 0
      with: {round: "${{ vars.loopIndex }}"}
    - id: runaway
      uses: action:set
      failure: continue
      loop:
        maxIterations: 2
        while: "${{ vars.loopIndex < 10 }}"
      with: {round: "${{ vars.loopIndex }}"}
"""


def _inspect(cli: Any, db: Path, run_id: str) -> dict[str, dict[str, Any]]:
    result = cli("--output", "json", "inspect", run_id, "--db", db)
    assert result.exit_code == 0, result.stderr
    return {task["taskId"]: task for task in result.json()["data"]["tasks"]}


def _roll(cli: Any, db: Path, workflow: Path) -> str:
    result = cli("--output", "json", "roll", workflow, "--db", db)
    assert result.exit_code == 4, result.stderr  # `runaway` fails at its maxIterations
    return str(result.error_json()["error"]["runId"])


def test_every_when_and_loop_guard_is_recorded_and_shown(
    cli: Any, tmp_path: Path, write_workflow: Any
) -> None:
    db = tmp_path / "r.db"
    run_id = _roll(cli, db, write_workflow(WORKFLOW))
    tasks = _inspect(cli, db, run_id)

    gated = tasks["gated"]
    assert gated["state"] == "succeeded"
    assert gated["condition"]["kind"] == "when"
    assert gated["condition"]["expression"] == "${{ inputs.go }}"
    assert gated["condition"]["result"] is True
    # The digest is over the canonical {inputs, vars, memory, tasks} the condition saw.
    context = {"inputs": {"go": True}, "memory": {}, "tasks": {}, "vars": {}}
    canonical = json.dumps(context, sort_keys=True, separators=(",", ":"))
    expected = "sha256:v1:" + hashlib.sha256(canonical.encode()).hexdigest()
    assert gated["condition"]["contextDigest"] == expected

    opposite = tasks["opposite"]
    assert opposite["state"] == "skipped"
    assert opposite["condition"]["result"] is False
    # Its skip record (the output) and its condition record agree.
    assert (
        opposite["output"]["condition"]["contextDigest"] == (opposite["condition"]["contextDigest"])
    )

    iterations = sorted(t for t in tasks if t.startswith("counter--"))
    guards = [tasks[t]["condition"] for t in iterations]
    assert [g["kind"] for g in guards[:3]] == ["loopGuard"] * 3
    assert [g["result"] for g in guards[:3]] == [True, True, False]
    # The fourth iteration never evaluated its guard: it was skipped by its dependency.
    assert guards[3] is None
    assert len({g["contextDigest"] for g in guards[:3]}) == 3
    # The loop that ran out of iterations: the guard after the last one is recorded too.
    runaway = tasks["runaway"]
    assert runaway["state"] == "failed"
    assert runaway["condition"]["kind"] == "loopGuard"
    assert runaway["condition"]["result"] is True
    assert tasks["counter"]["condition"] is None  # its last iteration was skipped

    human = cli("inspect", run_id, "--db", db)
    assert "when ${{ inputs.go }} -> true" in human.stdout
    assert "loopGuard ${{ vars.loopIndex < 2 }} -> false" in human.stdout

    # The transition's audit event carries the same decision.
    with sqlite3.connect(db) as conn:
        payloads = [
            json.loads(row[0])
            for row in conn.execute(
                "SELECT payload_json FROM audit_events WHERE run_id = ? AND task_id = 'gated'",
                (run_id,),
            )
        ]
    assert {"condition": gated["condition"]}.items() <= payloads[-1].items()


def test_replay_and_retry_copy_the_decisions(cli: Any, tmp_path: Path, write_workflow: Any) -> None:
    db = tmp_path / "r.db"
    workflow = write_workflow(WORKFLOW)
    source_id = _roll(cli, db, workflow)
    source = _inspect(cli, db, source_id)

    replay = cli("--output", "json", "replay", source_id, "--db", db)
    assert replay.exit_code == 4, replay.stderr  # the source run failed, so does its replay
    replayed = _inspect(cli, db, replay.error_json()["error"]["runId"])
    for task_id, task in source.items():
        assert replayed[task_id]["condition"] == task["condition"], task_id

    retry = cli("--output", "json", "retry", workflow, source_id, "--failed", "--db", db)
    assert retry.exit_code == 4, retry.stderr
    retried = _inspect(cli, db, retry.error_json()["error"]["runId"])
    assert retried["gated"]["disposition"] == "reused"
    assert retried["gated"]["condition"] == source["gated"]["condition"]
    assert retried["opposite"]["condition"] == source["opposite"]["condition"]
