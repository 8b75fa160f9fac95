"""Rolling and resuming runs through the CLI on real SQLite files and real processes."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "reference"

SHELL_WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: ledger}}
spec:
  policy:
    approval: never
    processAllowlist: [sh]
    writableRoots: [out]
  actions:
    append:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "echo $0 >> ledger.txt; echo appended $0", "{tag}"]
    save: {{kind: builtin.write}}
  tasks:
    - id: first
      uses: action:append
    - id: report
      uses: action:save
      needs: [first]
      with:
        path: out/report.txt
        content: "${{{{ tasks.first.output.stdout }}}}"
"""


def _ids(result: Any) -> str:
    return str(result.json()["data"]["runId"])


def test_reference_example_25_1(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    result = cli("--output", "json", "roll", REFERENCE / "25_1.yaml", "--db", db)
    assert result.exit_code == 0, result.stderr
    data = result.json()["data"]
    assert data["state"] == "succeeded"
    assert data["output"]["banner"] == "Release ready for platform"
    skipped = cli(
        "--output", "json", "roll", REFERENCE / "25_1.yaml", "--db", db, "--input", "notify=false"
    ).json()["data"]
    assert skipped["output"]["announcement"]["reason"] == "when condition was false"
    listed = cli("--output", "json", "runs", "list", "--db", db).json()["data"]["runs"]
    assert [r["state"] for r in listed] == ["succeeded", "succeeded"]


def test_matrix_router_loop_example_25_3(cli: Any, tmp_path: Path) -> None:
    result = cli("--output", "json", "roll", REFERENCE / "25_3.yaml", "--db", tmp_path / "r.db")
    assert result.exit_code == 0, result.stderr
    output = result.json()["data"]["output"]
    assert output["pick"] == {"selected": "nightly", "matched": True, "destinations": ["smoke"]}
    assert output["publish"]["reason"] == "route not selected"
    assert output["soak"]["iterations"] == 3
    assert output["builds--0003-fdb83aa6ee39"]["output"] == {"target": "arm64-py3.12", "slot": 3}


def test_subworkflow_memory_and_write_example_25_4(cli: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copy(REFERENCE / "25_4.yaml", ws / "wf.yaml")
    result = cli("--output", "json", "roll", ws / "wf.yaml", "--db", tmp_path / "r.db")
    assert result.exit_code == 0, result.stderr
    assert (ws / "state" / "api.conf").read_text() == "service=api replicas=2"
    output = result.json()["data"]["output"]
    assert output["config"] == {"text": "service=api replicas=2"}


def test_approval_pause_approve_resume(cli: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "notes").mkdir(parents=True)
    (ws / "notes" / "incident.txt").write_text("db-2: disk full\n")
    shutil.copy(REFERENCE / "25_2.yaml", ws / "wf.yaml")
    db = tmp_path / "r.db"
    paused = cli("--output", "json", "roll", ws / "wf.yaml", "--db", db)
    assert paused.exit_code == 3, paused.stderr
    data = paused.json()["data"]
    assert data["state"] == "paused" and not (ws / "out").exists()
    (approval,) = data["pendingApprovals"]
    listed = cli("--output", "json", "approvals", "list", "--db", db).json()["data"]
    assert [a["approvalId"] for a in listed["approvals"]] == [approval]
    assert cli("approvals", "approve", approval, "--reason", "ok", "--db", db).exit_code == 0
    resumed = cli("--output", "json", "resume", data["runId"], "--db", db)
    assert resumed.exit_code == 0, resumed.stderr
    assert (ws / "out" / "escalation.txt").read_text() == "disk full on db-2"
    inspection = cli("--output", "json", "inspect", data["runId"], "--db", db).json()["data"]
    operations = [e["operation"] for e in inspection["effects"]]
    # The model turns and the tool call ran once each, before the pause; resume reused them.
    assert operations == ["scripted", "tool.read_note", "scripted", "builtin.write"]
    (call,) = inspection["toolCalls"]
    assert call["tool"] == "read_note" and call["status"] == "succeeded"
    assert call["call"] == {"callId": "fake-call-1", "arguments": {"path": "notes/incident.txt"}}
    (session,) = inspection["providerSessions"]
    assert session["taskId"] == "triage" and session["state"]["turn"] == 2
    assert session["state"]["finishReason"] == "complete"
    assert inspection["audit"]["verified"] is True
    again = cli("approvals", "approve", approval, "--reason", "twice", "--db", db)
    assert again.exit_code == 0  # same decision twice is idempotent
    conflicting = cli("approvals", "reject", approval, "--reason", "no", "--db", db)
    assert conflicting.exit_code == 2


def test_rejected_approval_fails_the_run(cli: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "notes").mkdir(parents=True)
    (ws / "notes" / "incident.txt").write_text("x")
    shutil.copy(REFERENCE / "25_2.yaml", ws / "wf.yaml")
    db = tmp_path / "r.db"
    data = cli("--output", "json", "roll", ws / "wf.yaml", "--db", db).json()["data"]
    (approval,) = data["pendingApprovals"]
    assert cli("approvals", "reject", approval, "--reason", "no", "--db", db).exit_code == 0
    resumed = cli("--output", "json", "resume", data["runId"], "--db", db)
    assert resumed.exit_code == 4
    error = resumed.error_json()["error"]
    assert error["runId"] == data["runId"] and "approval rejected" in error["message"]
    assert not (ws / "out").exists()


def test_shell_effect_runs_once_and_resume_of_finished_run_is_a_no_op(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    path = write_workflow(SHELL_WORKFLOW.format(tag="one"))
    db = tmp_path / "r.db"
    result = cli("--output", "json", "roll", path, "--db", db)
    assert result.exit_code == 0, result.stderr
    assert (workspace / "ledger.txt").read_text() == "one\n"
    assert (workspace / "out" / "report.txt").read_text() == "appended one\n"
    run_id = _ids(result)
    again = cli("--output", "json", "resume", run_id, "--db", db)
    assert again.exit_code == 0 and again.json()["data"]["state"] == "succeeded"
    assert (workspace / "ledger.txt").read_text() == "one\n"
    effects = cli("--output", "json", "effects", "list", run_id, "--db", db).json()["data"]
    assert [e["status"] for e in effects["effects"]] == ["succeeded", "succeeded"]
    assert all(e["confirmed"] for e in effects["effects"])


def test_failing_process_and_failure_continue(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    path = write_workflow("""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {name: failing}
        spec:
          policy: {approval: never, processAllowlist: [sh]}
          actions:
            boom: {kind: builtin.shell.exec, command: sh, args: ["-c", "exit 7"]}
            set: {kind: builtin.assign}
          tasks:
            - {id: bad, uses: "action:boom", failure: continue}
            - {id: after, uses: "action:set", needs: [bad]}
            - {id: independent, uses: "action:set"}
    """)
    result = cli("--output", "json", "roll", path, "--db", tmp_path / "r.db")
    assert result.exit_code == 4
    error = result.error_json()["error"]
    assert "bad" in error["message"]
    inspection = cli(
        "--output", "json", "inspect", error["runId"], "--db", tmp_path / "r.db"
    ).json()["data"]
    states = {t["taskId"]: t["state"] for t in inspection["tasks"]}
    assert states == {"bad": "failed", "after": "skipped", "independent": "succeeded"}
    bad = next(t for t in inspection["tasks"] if t["taskId"] == "bad")
    assert "exit code 7" in bad["error"]["message"]


def test_retry_policy_creates_new_attempts(cli: Any, write_workflow: Any, tmp_path: Path) -> None:
    path = write_workflow("""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {name: flaky}
        spec:
          policy: {approval: never}
          providers: {scripted: {kind: fake}}
          agents:
            writer:
              provider: scripted
              model: scripted
              instructions: say hi
              providerOptions: {failFirst: 2, finalText: hello}
          tasks:
            - id: talk
              uses: agent:writer
              retry: {maxAttempts: 3}
              with: {prompt: hi}
    """)
    db = tmp_path / "r.db"
    result = cli("--output", "json", "roll", path, "--db", db)
    assert result.exit_code == 0, result.stderr
    assert result.json()["data"]["output"]["talk"]["text"] == "hello"
    effects = cli("--output", "json", "effects", "list", _ids(result), "--db", db).json()["data"][
        "effects"
    ]
    assert [(e["attempt"], e["status"]) for e in effects] == [
        (1, "failed"),
        (2, "failed"),
        (3, "succeeded"),
    ]
    assert len({e["effectId"] for e in effects}) == 3


def test_questions_park_and_answer(cli: Any, write_workflow: Any, tmp_path: Path) -> None:
    path = write_workflow("""
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
    """)
    db = tmp_path / "r.db"
    paused = cli("--output", "json", "roll", path, "--db", db)
    assert paused.exit_code == 3
    data = paused.json()["data"]
    (question,) = data["pendingApprovals"]
    wrong = cli("approvals", "answer", question, "moon", "--db", db)
    assert wrong.exit_code == 2 and "choices" in wrong.stderr
    assert cli("approvals", "approve", question, "--reason", "x", "--db", db).exit_code == 2
    assert cli("approvals", "answer", question, '"staging"', "--db", db).exit_code == 0
    done = cli("--output", "json", "resume", data["runId"], "--db", db)
    assert done.exit_code == 0, done.stderr
    assert done.json()["data"]["output"]["use"]["output"] == {"target": "staging"}


def test_dry_run_and_check_leave_no_database(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    path = write_workflow(SHELL_WORKFLOW.format(tag="dry"))
    db = tmp_path / "never.db"
    dry = cli("--output", "json", "roll", path, "--db", db, "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert not db.exists()
    # The effects ran in a throwaway copy of the workspace; the summary says what changed.
    assert not (workspace / "ledger.txt").exists()
    assert [(c["path"], c["change"]) for c in dry.json()["data"]["changedFiles"]] == [
        ("ledger.txt", "added"),
        ("out/report.txt", "added"),
    ]
    (workspace / "out").mkdir()
    (workspace / "out" / "report.txt").write_text("old\n")
    checked = write_workflow(
        SHELL_WORKFLOW.format(tag="check").replace("${{ tasks.first.output.stdout }}", "new"),
        "check.yaml",
    )
    predicted = cli("--output", "json", "roll", checked, "--db", db, "--check", "--diff")
    assert predicted.exit_code == 0, predicted.stderr
    output = predicted.json()["data"]["output"]
    assert output["first"]["status"] == "requires_execution"
    assert output["report"]["diff"] == "--- before\n+++ after\n-old\n-\n+new"
    assert output["report"]["changed"] is True
    assert not (workspace / "ledger.txt").exists() and not db.exists()
    assert (workspace / "out" / "report.txt").read_text() == "old\n"


def test_jsonl_streams_run_events(cli: Any, tmp_path: Path) -> None:
    result = cli("--output", "jsonl", "roll", REFERENCE / "25_1.yaml", "--db", tmp_path / "r.db")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["kind"] for line in lines[:-1]] == ["RunEvent"] * (len(lines) - 1)
    task_events = [line["data"]["taskId"] for line in lines if "taskId" in line["data"]]
    assert task_events == ["compose", "verify", "announce"]
    assert lines[-1]["kind"] == "RunOutcome"


def test_audit_verify_detects_tampering(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    run_id = _ids(cli("--output", "json", "roll", REFERENCE / "25_1.yaml", "--db", db))
    assert cli("audit", run_id, "--verify", "--db", db).exit_code == 0
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE audit_events SET payload_json = '{}' WHERE seq = 2")
    conn.close()
    broken = cli("--output", "json", "audit", run_id, "--verify", "--db", db)
    assert broken.exit_code == 5
    assert "broken at event 2" in broken.error_json()["error"]["message"]


def test_unknown_ids_exit_5(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    for args in (
        ("resume", "run-nope"),
        ("inspect", "run-nope"),
        ("cancel", "run-nope"),
        ("effects", "inspect", "ab" * 32),
        ("approvals", "approve", "approval-x", "--reason", "r"),
    ):
        result = cli("--output", "json", *args, "--db", db)
        assert result.exit_code == 5, args
        assert result.error_json()["error"]["hint"]


def test_invalid_workflow_exit_2_with_diagnostics(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    path = write_workflow("""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {name: broken}
        spec:
          tasks:
            - {id: a, uses: "action:missing"}
    """)
    result = cli("--output", "json", "roll", path, "--db", tmp_path / "r.db")
    assert result.exit_code == 2
    diagnostics = result.error_json()["diagnostics"]
    assert diagnostics and diagnostics[0]["code"] == "missing_reference"
    assert diagnostics[0]["line"] == 7
    assert not (tmp_path / "r.db").exists()
