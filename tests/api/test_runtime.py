"""agentctl.Runtime for real: SQLite files in tmp_path, the fake provider, real processes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import agentctl

REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "reference"

GREETING = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: greeting}
spec:
  inputs: {service: web, replicas: 1}
  providers:
    scripted: {kind: fake}
  policy: {approval: never, writableRoots: [out]}
  agents:
    writer:
      provider: scripted
      model: scripted
      instructions: say hello
  actions:
    save: {kind: builtin.write}
  tasks:
    - id: hello
      uses: agent:writer
      with: {prompt: "hello ${{ inputs.service }}"}
    - id: record
      uses: action:save
      needs: [hello]
      with:
        path: out/greeting.txt
        content: "${{ tasks.hello.output.text }} x${{ inputs.replicas }}"
"""

SLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: slow}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    work:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "if [ -f marker ]; then echo second; else touch marker; sleep 20; fi"]
      timeoutSeconds: 1
  tasks:
    - id: step
      uses: action:work
"""

ASK = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: asking}
spec:
  actions:
    ask: {kind: builtin.ask}
    set: {kind: builtin.assign}
  tasks:
    - id: env
      uses: action:ask
      with: {prompt: "Deploy where?", choices: [staging, production]}
    - id: use
      uses: action:set
      needs: [env]
      with: {target: "${{ tasks.env.output.answer }}"}
"""

ROLLOUT = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: rollout}
spec:
  compensation: {onFailure: automatic}
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


def _triage_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "triage"
    (ws / "notes").mkdir(parents=True)
    (ws / "notes" / "incident.txt").write_text("db-2: disk full\n")
    shutil.copy(REFERENCE / "25_2.yaml", ws / "wf.yaml")
    return ws / "wf.yaml"


def test_roll_merges_inputs_and_the_run_is_durable(
    write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    events: list[tuple[str, dict[str, Any]]] = []
    runtime = agentctl.Runtime(db, on_event=lambda kind, data: events.append((kind, data)))
    result = runtime.roll(write_workflow(GREETING), inputs={"service": "api"})
    assert isinstance(result, agentctl.RunResult)
    assert result.ok and result.state == "succeeded", result.error
    assert result.state is agentctl.RunState.SUCCEEDED
    # The override replaced one default and kept the other.
    assert (workspace / "out" / "greeting.txt").read_text() == "fake: hello api x1"
    assert result.output["hello"]["text"] == "fake: hello api"
    assert result.to_json()["runId"] == result.run_id
    assert events[0] == (
        "created",
        {
            "runId": result.run_id,
            "state": "running",
            "mode": "execute",
            "workflow": "greeting",
            "tasks": 2,
        },
    )
    assert {("task", "hello"), ("task", "record")} <= {
        (kind, data.get("taskId")) for kind, data in events
    }
    assert events[-1] == ("run", {"runId": result.run_id, "state": "succeeded"})
    # A second Runtime on the same file reads what the first one committed.
    again = agentctl.Runtime(str(db))
    (listed,) = again.runs()
    assert listed.run_id == result.run_id and listed.state == "succeeded" and listed.tasks.done == 2
    inspection = again.inspect(result.run_id)
    assert isinstance(inspection, agentctl.RunReport)
    assert inspection.run["inputs"] == {"service": "api", "replicas": 1}
    assert [t["state"] for t in inspection.tasks] == ["succeeded", "succeeded"]
    assert inspection.audit.verified is True and inspection.audit.broken_at is None
    # Resuming a finished run answers with its stored result and runs nothing.
    assert again.resume(result.run_id).state == "succeeded"
    assert len(again.inspect(result.run_id).effects) == len(inspection.effects)


def test_inputs_must_be_a_mapping(write_workflow: Any, tmp_path: Path) -> None:
    runtime = agentctl.Runtime(tmp_path / "runs.db")
    with pytest.raises(agentctl.UsageError, match="inputs must be a mapping"):
        runtime.roll(write_workflow(GREETING), inputs=[("service", "api")])  # type: ignore[arg-type]


def test_approve_then_resume(tmp_path: Path) -> None:
    path = _triage_workspace(tmp_path)
    runtime = agentctl.Runtime(tmp_path / "runs.db")
    paused = runtime.roll(path)
    assert paused.state == "paused" and not (path.parent / "out").exists()
    (approval,) = paused.pending_approvals
    assert [a.id for a in runtime.approvals()] == [approval]
    assert [a.id for a in runtime.approvals(paused.run_id)] == [approval]
    decided = runtime.approve(approval, reason="checked", actor="alice")
    assert isinstance(decided, agentctl.ApprovalDecision)
    assert decided.approval.status == agentctl.ApprovalState.APPROVED and not decided.unchanged
    assert decided.next[0].command == f"agentctl resume {paused.run_id}"
    assert runtime.approvals() == []
    assert [a.status for a in runtime.approvals(include_resolved=True)] == ["approved"]
    done = runtime.resume(paused.run_id)
    assert done.state == "succeeded", done.error
    assert (path.parent / "out" / "escalation.txt").read_text() == "disk full on db-2"


def test_reject_fails_the_run_as_a_result_not_an_exception(tmp_path: Path) -> None:
    runtime = agentctl.Runtime(tmp_path / "runs.db")
    paused = runtime.roll(_triage_workspace(tmp_path))
    (approval,) = paused.pending_approvals
    runtime.reject(approval, reason="not now")
    failed = runtime.resume(paused.run_id)
    assert failed.state == "failed" and not failed.ok
    assert failed.error is not None and failed.error["code"] == "approval.rejected"
    # Deciding the other way afterwards is refused with a named error.
    with pytest.raises(agentctl.UsageError) as refused:
        runtime.approve(approval, reason="changed my mind")
    assert refused.value.exit_code == 2


def test_answer_takes_a_python_value(write_workflow: Any, tmp_path: Path) -> None:
    runtime = agentctl.Runtime(tmp_path / "runs.db")
    paused = runtime.roll(write_workflow(ASK))
    (question,) = paused.pending_approvals
    with pytest.raises(agentctl.UsageError, match="choices"):
        runtime.answer(question, "moon")
    with pytest.raises(agentctl.UsageError, match="is a question"):
        runtime.approve(question, reason="x")
    runtime.answer(question, "staging")
    done = runtime.resume(paused.run_id)
    assert done.output["use"]["output"] == {"target": "staging"}


def test_reconcile_an_uncertain_effect(
    write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    runtime = agentctl.Runtime(tmp_path / "runs.db")
    blocked = runtime.roll(write_workflow(SLOW))
    (effect,) = blocked.uncertain_effects
    assert blocked.state == "paused"
    assert [e.id for e in runtime.needs_reconciliation()] == [effect["effectId"]]
    detail = runtime.effect(effect["effectId"])
    assert detail.effect.status == agentctl.EffectState.UNCERTAIN and detail.reconciliations == []
    # An `applied` result is validated against the schema given as a Python object.
    schema = {"type": "object", "properties": {"exitCode": {"const": 0}}}
    with pytest.raises(agentctl.UsageError, match="does not satisfy the schema"):
        runtime.reconcile(
            effect["effectId"],
            "applied",
            reason="looked",
            result={"exitCode": 1},
            result_schema=schema,
        )
    with pytest.raises(agentctl.UsageError, match="--status must be"):
        runtime.reconcile(effect["effectId"], "maybe", reason="unsure")
    concluded = runtime.reconcile(
        effect["effectId"], "not-applied", reason="the sleep was killed", evidence="ps showed none"
    )
    assert concluded.reconciliation.status == "not_applied"
    assert concluded.reconciliation.evidence == "ps showed none"
    assert concluded.effect.id == effect["effectId"]
    assert [r.id for r in runtime.effect(effect["effectId"]).reconciliations] == [
        concluded.reconciliation.id
    ]
    assert runtime.needs_reconciliation(blocked.run_id) == []
    done = runtime.resume(blocked.run_id)
    assert done.state == "succeeded", done.error
    assert done.output["step"]["stdout"] == "second\n"


def test_cancel_a_paused_run(tmp_path: Path) -> None:
    runtime = agentctl.Runtime(tmp_path / "runs.db")
    paused = runtime.roll(_triage_workspace(tmp_path))
    done = runtime.cancel(paused.run_id, "no longer needed")
    assert done.state == "cancelled" and done.cancel_requested is True and done.note is None
    assert done.to_json() == {"runId": paused.run_id, "state": "cancelled", "cancelRequested": True}
    assert runtime.resume(paused.run_id).state == "cancelled"
    assert runtime.cancel(paused.run_id).note == "run is already cancelled"


def test_dry_run_keeps_no_database_and_lists_changes(
    write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    db = tmp_path / "never.db"
    result = agentctl.Runtime(db).roll(write_workflow(GREETING), dry_run=True)
    assert result.state == "succeeded"
    assert not db.exists() and not (workspace / "out").exists()
    assert result.changed_files == [{"path": "out/greeting.txt", "change": "added"}]
    assert result.to_json()["changedFiles"] == result.changed_files


def test_failure_with_automatic_compensation(
    write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "conf").mkdir()
    (workspace / "conf" / "app.conf").write_text("version=1\n")
    events: list[tuple[str, dict[str, Any]]] = []
    runtime = agentctl.Runtime(
        tmp_path / "runs.db", on_event=lambda kind, data: events.append((kind, data))
    )
    failed = runtime.roll(write_workflow(ROLLOUT))
    assert failed.state == "failed"
    assert failed.compensation is not None and failed.compensation.state == "succeeded"
    assert failed.compensation.run_id.startswith("compensate-")
    assert (workspace / "conf" / "app.conf").read_text() == "version=1\n"
    created = [data for kind, data in events if kind == "created"]
    assert created[-1]["mode"] == "compensate" and created[-1]["sourceRunId"] == failed.run_id


def test_unknown_ids_raise_named_errors(tmp_path: Path) -> None:
    runtime = agentctl.Runtime(tmp_path / "runs.db")
    with pytest.raises(agentctl.PersistenceError) as no_database:
        runtime.inspect("run-nope")  # reading never creates a database
    assert no_database.value.code == "store.missing"
    assert not (tmp_path / "runs.db").exists()
    from agentctl.store.engine import open_store

    open_store(str(tmp_path / "runs.db")).close()
    with pytest.raises(agentctl.NotFoundError) as missing:
        runtime.inspect("run-nope")
    assert missing.value.exit_code == 5 and missing.value.code == "store.not_found"
    with pytest.raises(agentctl.AgentctlError):
        runtime.approve("approval-nope", reason="x")
    with pytest.raises(agentctl.AgentctlError) as invalid:
        runtime.roll(tmp_path / "missing.yaml")
    assert invalid.value.code == "workflow.missing_file" and invalid.value.exit_code == 2
