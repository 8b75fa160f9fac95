"""Small contract points a user's script or habit depends on (issue 36's small print)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ASSIGN = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: small}
spec:
  actions: {set: {kind: builtin.assign}}
  tasks:
    - {id: one, uses: 'action:set', with: {value: 1}}
"""


def _workflow(tmp_path: Path, text: str = ASSIGN, name: str = "w.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_db_before_the_command_name_is_the_commands_database(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "early.db"
    rolled = cli("--output", "json", "--db", db, "roll", _workflow(tmp_path))
    assert rolled.exit_code == 0, rolled.stderr
    run_id = rolled.json()["data"]["runId"]
    assert db.is_file() and not (Path.cwd() / ".agentctl").exists()
    listed = cli("--db", db, "--output", "json", "runs", "list")
    assert listed.exit_code == 0, listed.stderr
    assert [run["runId"] for run in listed.json()["data"]["runs"]] == [run_id]
    for command in (["inspect", run_id], ["effects", "list", run_id], ["gc", "--dry-run"]):
        shown = cli("--output", "json", f"--db={db}", *command)
        assert shown.exit_code == 0, (command, shown.stderr)
    # The group's or the command's own --db wins over the one before the name.
    other = tmp_path / "other.db"
    cli("--output", "json", "roll", _workflow(tmp_path), "--db", other)
    for line in (
        ["--db", db, "runs", "--db", other, "list"],
        ["--db", db, "runs", "list", "--db", other],
    ):
        listed = cli("--output", "json", *line)
        assert listed.exit_code == 0, listed.stderr
        assert run_id not in {run["runId"] for run in listed.json()["data"]["runs"]}


ECHO_WITH_APPROVAL = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: shouting}
spec:
  providers: {fake: {kind: fake}}
  tools:
    shout:
      kind: builtin.echo
      description: Echo the input back.
      inputSchema:
        type: object
        properties: {text: {type: string}}
        required: [text]
        additionalProperties: false
      outputSchema: {type: object}
      capability: internal
      risk: low
      effectClass: pure
      idempotency: pure
      retrySafe: true
      timeoutSeconds: 5
      approval: always
  agents:
    crier:
      provider: fake
      model: scripted
      instructions: shout
      tools: [shout]
      maxTurns: 2
      maxToolCalls: 1
      maxOutputTokens: 64
      providerOptions: {toolInput: {text: hello}, finalText: shouted}
  tasks:
    - {id: cry, uses: 'agent:crier', with: {prompt: go}}
"""


def test_approval_always_on_an_echo_tool_asks_and_records_the_call(
    cli: Any, tmp_path: Path
) -> None:
    db = tmp_path / "r.db"
    parked = cli("--output", "json", "roll", _workflow(tmp_path, ECHO_WITH_APPROVAL), "--db", db)
    assert parked.exit_code == 3, parked.stderr
    run_id = parked.json()["data"]["runId"]
    pending = cli("--output", "json", "approvals", "list", run_id, "--db", db).json()["data"]
    (approval,) = pending["approvals"]
    assert "shout" in approval["prompt"]
    decided = cli("approvals", "approve", approval["approvalId"], "--reason", "ok", "--db", db)
    assert decided.exit_code == 0, decided.stderr
    resumed = cli("--output", "json", "resume", run_id, "--db", db)
    assert resumed.exit_code == 0, resumed.stderr
    shown = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]
    (call,) = shown["toolCalls"]
    assert (call["tool"], call["status"], call["call"]["arguments"]) == (
        "shout",
        "succeeded",
        {"text": "hello"},
    )
