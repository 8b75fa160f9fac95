"""``{process: …}`` secret references in an action's ``env`` work as documented: the
allow-listed program's stdout becomes the variable, and anything else is refused with a
named error (real runs through the CLI, real processes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: process-secret}}
spec:
  policy:
    approval: never
    processAllowlist: [sh]
    environmentAllowlist: [TOKEN]
    secretProcessAllowlist: {allow}
  actions:
    use:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "echo token=$TOKEN length=${{#TOKEN}}"]
      env:
        TOKEN: {{process: {{command: sh, args: ["-c", "{script}"], timeoutSeconds: 5}}}}
  tasks:
    - {{id: use, uses: "action:use"}}
"""


def _roll(cli: Any, write_workflow: Any, tmp_path: Path, allow: str, script: str) -> Any:
    path = write_workflow(WORKFLOW.format(allow=allow, script=script))
    return cli("--output", "json", "roll", path, "--db", tmp_path / "r.db")


def test_process_secret_reaches_the_action_and_is_redacted(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    result = _roll(cli, write_workflow, tmp_path, "[sh]", "printf 's3cret-value\\n'")
    assert result.exit_code == 0, result.stderr
    stdout = result.json()["data"]["output"]["use"]["stdout"]
    # One trailing newline stripped; the value itself never appears in the output.
    assert stdout == "token=[REDACTED] length=12\n"
    assert "s3cret" not in result.stdout


def test_process_not_allow_listed_is_denied(cli: Any, write_workflow: Any, tmp_path: Path) -> None:
    # Refused before any run exists: check and roll share the one resolver's rules.
    result = _roll(cli, write_workflow, tmp_path, "[]", "echo x")
    assert result.exit_code == 2
    (diagnostic,) = result.error_json()["diagnostics"]
    assert diagnostic["path"].endswith("env.TOKEN.process.command")
    assert "secretProcessAllowlist" in diagnostic["help"]


def test_failing_or_silent_process_is_a_named_error(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    failed = _roll(cli, write_workflow, tmp_path, "[sh]", "echo leaked; exit 3")
    assert failed.exit_code == 4
    assert "exited with code 3" in failed.error_json()["error"]["message"]
    assert "leaked" not in failed.stderr
    silent = _roll(cli, write_workflow, tmp_path, "[sh]", "true")
    assert silent.exit_code == 4
    assert "printed nothing" in silent.error_json()["error"]["message"]
