"""`policy.minimumIsolation` refuses at `check` every step that would start a process with
less isolation than it asks for (docs/isolation.md); no sandbox is needed to check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: floors}}
spec:
  policy:
    approval: never
    processAllowlist: [sh, cat]
    minimumIsolation: {minimum}
  providers:
    cli: {{kind: command, command: cat}}
    boxedcli: {{kind: command, command: cat, isolation: sandbox}}
  agents:
    writer: {{provider: cli, model: any, instructions: say hi}}
    boxedwriter: {{provider: boxedcli, model: any, instructions: say hi}}
  actions:
    bare: {{kind: builtin.shell.exec, command: sh, args: ["-c", "true"]}}
    boxed: {{kind: builtin.shell.exec, command: sh, args: ["-c", "true"], isolation: sandbox}}
  tasks:
    - {{id: a, uses: "action:bare"}}
    - {{id: b, uses: "action:boxed"}}
    - {{id: c, uses: "agent:writer"}}
    - {{id: d, uses: "action:bare"}}
    - {{id: e, uses: "agent:boxedwriter"}}
"""


def _findings(cli: Any, path: Path) -> tuple[int, list[tuple[str, str]]]:
    result = cli("--output", "json", "check", path)
    body = result.json() if result.exit_code == 0 else result.error_json()
    diagnostics = body.get("diagnostics") or body.get("error", {}).get("diagnostics") or []
    return result.exit_code, [
        (d["path"], d["message"]) for d in diagnostics if d["code"] == "policy_denied"
    ]


@pytest.mark.parametrize(
    ("minimum", "refused"),
    [
        ("process", []),
        ("sandbox", ["spec.actions.bare.isolation", "spec.agents.writer.provider"]),
        (
            "container",
            [
                "spec.actions.bare.isolation",
                "spec.actions.boxed.isolation",
                "spec.agents.boxedwriter.provider",
                "spec.agents.writer.provider",
            ],
        ),
    ],
)
def test_check_refuses_steps_below_the_minimum(
    cli: Any, write_workflow: Any, minimum: str, refused: list[str]
) -> None:
    path = write_workflow(WORKFLOW.format(minimum=minimum))
    code, findings = _findings(cli, path)
    assert sorted(p for p, _ in findings) == refused  # once per definition, not per task
    assert code == (2 if refused else 0)
    if minimum == "sandbox":
        messages = dict(findings)
        assert (
            "less than policy.minimumIsolation `sandbox`" in messages["spec.actions.bare.isolation"]
        )
        assert "kind command" in messages["spec.agents.writer.provider"]
