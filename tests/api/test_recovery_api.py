"""Recovery through agentctl.Runtime: retry, repair, fork, replay and compensate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentctl
from agentctl import RecoveryRequest
from agentctl.engine.recovery.compensation import CompensationPlan
from agentctl.engine.recovery.planner import RecoveryPlan

FLAKY = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: flaky}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    count: {kind: builtin.shell.exec, command: sh, args: ["-c", "echo x >> runs.txt"]}
    check:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "if [ -f ready ]; then echo ready; else echo not yet >&2; exit 1; fi"]
  tasks:
    - id: first
      uses: action:count
    - id: gate
      uses: action:check
      needs: [first]
"""

ROLLOUT = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: rollout}
spec:
  policy: {approval: never, writableRoots: [conf]}
  actions:
    put: {kind: builtin.write}
    check: {kind: builtin.assert}
  tasks:
    - id: deploy
      uses: action:put
      with: {path: conf/app.conf, content: "version=2\\n"}
      compensate:
        uses: action:put
        with:
          path: conf/app.conf
          content: "${{ tasks.deploy.output.before }}"
    - id: verify
      uses: action:check
      needs: [deploy]
      with: {that: false, message: health check failed}
"""


def test_retry_reuses_what_succeeded(write_workflow: Any, workspace: Path, tmp_path: Path) -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    runtime = agentctl.Runtime(
        tmp_path / "runs.db", on_event=lambda kind, data: events.append((kind, data))
    )
    path = write_workflow(FLAKY)
    failed = runtime.roll(path)
    assert failed.state == "failed"
    with pytest.raises(agentctl.UsageError, match="--failed or --from"):
        runtime.plan(RecoveryRequest("retry", failed.run_id, path))
    retry = RecoveryRequest("retry", failed.run_id, path, failed=True, reason="ready now")
    planned = runtime.plan(retry)
    assert isinstance(planned, RecoveryPlan)
    assert planned.to_json()["counts"] == {"reuse": 1, "execute": 1, "blocked": 0}
    assert {d.task_id: d.action for d in planned.decisions} == {
        "first": "reuse",
        "gate": "execute",
    }
    (workspace / "ready").write_text("")
    retried = runtime.recover(retry)
    assert retried is not None
    assert retried.state == "succeeded", retried.error
    assert retried.run_id.startswith("retry-")
    # `first` was reused, not run again.
    assert (workspace / "runs.txt").read_text() == "x\n"
    created = [data for kind, data in events if kind == "created"][-1]
    assert created["mode"] == "retry" and created["reused"] == 1
    assert created["sourceRunId"] == failed.run_id
    # A repair of the same file reuses everything that still holds.
    repaired = runtime.recover(RecoveryRequest("repair", retried.run_id, path))
    assert (
        repaired is not None
        and repaired.state == "succeeded"
        and repaired.run_id.startswith("repair-")
    )
    assert (workspace / "runs.txt").read_text() == "x\n"
    # A fork runs every effect again.
    fork = RecoveryRequest("fork", retried.run_id)
    assert [d.action for d in runtime.plan(fork).decisions] == ["execute", "execute"]  # type: ignore[union-attr]
    forked = runtime.recover(fork)
    assert forked is not None and forked.state == "succeeded" and forked.run_id.startswith("fork-")
    assert (workspace / "runs.txt").read_text() == "x\nx\n"
    # A replay rebuilds the run from its records and runs nothing.
    replay = RecoveryRequest("replay", retried.run_id)
    with pytest.raises(agentctl.UsageError, match="has no plan"):
        runtime.plan(replay)
    replayed = runtime.recover(replay)
    assert (
        replayed is not None
        and replayed.state == "succeeded"
        and replayed.run_id.startswith("replay-")
    )
    assert replayed.output == runtime.resume(retried.run_id).output
    assert (workspace / "runs.txt").read_text() == "x\nx\n"


def test_compensate_undoes_a_failed_rollout(
    write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "conf").mkdir()
    (workspace / "conf" / "app.conf").write_text("version=1\n")
    runtime = agentctl.Runtime(tmp_path / "runs.db")
    failed = runtime.roll(write_workflow(ROLLOUT))
    assert failed.state == "failed" and failed.compensation is None
    compensate = RecoveryRequest("compensate", failed.run_id)
    planned = runtime.plan(compensate)
    assert isinstance(planned, CompensationPlan)
    assert planned.to_json()["complete"] is True
    assert [(s.compensation_task_id, s.action) for s in planned.steps] == [
        ("compensate--deploy", "compensate")
    ]
    assert (workspace / "conf" / "app.conf").read_text() == "version=2\n"
    undone = runtime.recover(compensate)
    assert undone is not None and undone.state == "succeeded"
    assert undone.run_id.startswith("compensate-")
    assert (workspace / "conf" / "app.conf").read_text() == "version=1\n"
    # Nothing is left to undo: no second compensation run.
    assert runtime.recover(compensate) is None
    with pytest.raises(agentctl.BlockedError) as running:
        runtime.plan(RecoveryRequest("compensate", runtime.roll(_paused(write_workflow)).run_id))
    assert running.value.code == "run.not_terminal"


def _paused(write_workflow: Any) -> Path:
    return write_workflow(
        """
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {name: parked}
        spec:
          actions:
            hold: {kind: builtin.pause}
          tasks:
            - id: hold
              uses: action:hold
        """,
        name="parked.yaml",
    )
