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


TYPED_INPUTS = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: typed}
spec:
  inputs: {version: "3.9", count: 1, label: none}
  inputSchema:
    type: object
    properties:
      version: {type: string}
      count: {type: integer}
  actions: {set: {kind: builtin.assign}}
  tasks:
    - {id: one, uses: 'action:set', with: {value: "${{ inputs.version }}"}}
  outputs:
    version: "${{ inputs.version }}"
    count: "${{ inputs.count }}"
    label: "${{ inputs.label }}"
"""


def test_an_input_typed_string_keeps_its_text_and_plan_says_how_each_was_read(
    cli: Any, tmp_path: Path
) -> None:
    path = _workflow(tmp_path, TYPED_INPUTS)
    pairs = ["--input", "version=3.10", "--input", "count=7", "--input", "label=3.10"]
    rolled = cli("--output", "json", "roll", path, *pairs, "--db", tmp_path / "r.db")
    assert rolled.exit_code == 0, rolled.stderr
    # Declared a string: the text as given. Undeclared: JSON when it parses.
    assert rolled.json()["data"]["output"] == {"version": "3.10", "count": 7, "label": 3.1}
    planned = cli("--output", "json", "plan", path, *pairs)
    assert planned.exit_code == 0, planned.stderr
    data = planned.json()["data"]
    assert data["inputOverrides"] == {"version": "3.10", "count": 7, "label": 3.1}
    assert data["inputsReadAs"] == {
        "version": "text (declared string)",
        "count": "json",
        "label": "json",
    }
    human = cli("plan", path, *pairs)
    assert 'input version = "3.10"  (text (declared string))' in human.stdout


def test_inputs_that_break_the_input_schema_are_refused_before_a_run(
    cli: Any, tmp_path: Path
) -> None:
    path = _workflow(tmp_path, TYPED_INPUTS)
    db = tmp_path / "r.db"
    for line in (["--input", "count=many"], ["--inputs", '{"version": 3}']):
        refused = cli("--output", "json", "roll", path, *line, "--db", db)
        assert refused.exit_code == 2, refused.stdout
        error = refused.error_json()["error"]
        assert error["code"] == "input.schema_violation"
        assert "spec.inputSchema" in error["message"]
    assert not db.exists()
    planned = cli("--output", "json", "plan", path, "--input", "count=many")
    assert planned.exit_code == 2
    assert planned.error_json()["error"]["code"] == "input.schema_violation"


def test_check_warns_on_a_default_outside_the_input_schema(cli: Any, tmp_path: Path) -> None:
    text = TYPED_INPUTS.replace('version: "3.9"', "version: null")
    checked = cli("--output", "json", "check", _workflow(tmp_path, text))
    assert checked.exit_code == 0, checked.stderr
    (warning,) = checked.json()["diagnostics"]
    assert (warning["code"], warning["severity"], warning["path"]) == (
        "schema_violation",
        "warning",
        "spec.inputs",
    )
    bad = TYPED_INPUTS.replace("type: object\n", "type: objekt\n")
    refused = cli("--output", "json", "check", _workflow(tmp_path, bad, "bad.yaml"))
    assert refused.exit_code == 2
    assert refused.error_json()["diagnostics"][0]["path"].startswith("spec.inputSchema")


LITERAL = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: literal}
spec:
  inputs: {file: notes.txt}
  policy: {processAllowlist: [cat]}
  actions:
    show:
      kind: builtin.shell.exec
      command: cat
      args: ["${{ inputs.file }}"]
      cwd: "out/${{ inputs.file }}"
  tasks:
    - {id: show, uses: 'action:show', with: {file: "${{ inputs.file }}"}}
"""


def test_check_warns_on_a_template_nothing_renders(cli: Any, tmp_path: Path) -> None:
    checked = cli("--output", "json", "check", _workflow(tmp_path, LITERAL))
    assert checked.exit_code == 0, checked.stderr
    found = [(d["code"], d["severity"], d["path"]) for d in checked.json()["diagnostics"]]
    assert found == [
        ("invalid_template", "warning", "spec.actions.show.args[0]"),
        ("invalid_template", "warning", "spec.actions.show.cwd"),
    ]
    first = checked.json()["diagnostics"][0]
    assert "never rendered" in first["message"] and "docs/templates.md" in first["help"]
    assert first["line"] == 11


def test_a_retry_reuses_the_source_runs_inputs_without_rechecking_the_defaults(
    cli: Any, tmp_path: Path
) -> None:
    text = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: checked}
spec:
  inputs: {version: null, ok: true}
  inputSchema: {type: object, properties: {version: {type: string}}}
  actions: {check: {kind: builtin.assert}}
  tasks:
    - {id: check, uses: 'action:check', with: {that: "${{ inputs.ok }}"}}
"""
    path = _workflow(tmp_path, text)
    db = tmp_path / "r.db"
    # The default (null) does not satisfy the schema: a run must give the version.
    assert cli("--output", "json", "roll", path, "--db", db).exit_code == 2
    failed = cli("roll", path, "--input", "version=3.10", "--input", "ok=false", "--db", db)
    assert failed.exit_code == 4, failed.stderr
    run_id = cli("--output", "json", "runs", "list", "--db", db).json()["data"]["runs"][0]["runId"]
    retried = cli("--output", "json", "retry", path, run_id, "--failed", "--db", db)
    # The source run's inputs (version "3.10", ok false) are reused: the assertion fails
    # again, rather than the retry being refused for the workflow's defaults.
    assert retried.exit_code == 4, retried.stderr


def test_a_schedule_records_its_inputs_as_the_run_will_read_them(cli: Any, tmp_path: Path) -> None:
    path = _workflow(tmp_path, TYPED_INPUTS)
    db = tmp_path / "r.db"
    added = cli(
        "--output", "json", "schedule", "add", "nightly", path, "--every", "1h",
        "--input", "version=3.10", "--input", "count=7", "--db", db,
    )  # fmt: skip
    assert added.exit_code == 0, added.stderr
    shown = cli("--output", "json", "schedule", "show", "nightly", "--db", db).json()["data"]
    assert shown["inputs"] == {"version": "3.10", "count": 7}
