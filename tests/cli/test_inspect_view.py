"""The human view of `inspect`: tasks as a tree with state, attempt and duration; outputs;
the budget ledger; approvals; uncertain effects with the exact reconcile command; what
to do next. Colours follow --color and add no width."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.cli.sample_workflows import FANNED

HANGS = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: hangs}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    work: {kind: builtin.shell.exec, command: sh, args: ["-c", "sleep 30"], timeoutSeconds: 1}
  tasks:
    - {id: step, uses: action:work}
"""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _roll(cli: Any, tmp_path: Path, text: str, db: Path) -> str:
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(text)
    result = cli("--output", "json", "roll", workflow, "--db", db)
    body = result.json()["data"] if result.exit_code in (0, 3) else result.error_json()["error"]
    return str(body["runId"])


def test_tree_outputs_and_budget(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    run_id = _roll(cli, tmp_path, FANNED, db)
    text = cli("--color", "never", "inspect", run_id, "--db", db).stdout
    lines = text.splitlines()
    assert lines[0].startswith(f"{run_id} succeeded  workflow fanned  started ")
    assert re.search(r"started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC, \d", lines[0])
    tasks = lines[lines.index("tasks:") + 1 : lines.index("outputs:")]
    assert tasks[0].split() == ["TASK", "STATE", "ATTEMPT", "RAN", "WAITED"]
    children = [line for line in tasks if "unit--" in line]
    assert len(children) == 2
    parent = next(line for line in tasks if line.split()[0] == "unit")
    # Children sit under their source task, indented one level deeper.
    indent = len(parent) - len(parent.lstrip())
    assert all(len(c) - len(c.lstrip()) == indent + 2 for c in children)
    assert all(c.split()[1:3] == ["succeeded", "1"] for c in children)
    assert "  said: done" in lines
    budget = lines[lines.index("budget:") + 1 :]
    assert budget[0].split() == ["RESOURCE", "LIMIT", "RESERVED", "USED"]
    requests = next(line for line in budget if line.split()[0] == "providerRequests")
    # Amounts in their units (one formatter: agentctl.amounts.amount).
    assert requests.split() == [
        "providerRequests",
        "5",
        "requests",
        "0",
        "requests",
        "1",
        "request",
    ]
    assert "next:" not in lines  # a succeeded run has nothing left to do


def test_uncertain_effect_shows_the_exact_reconcile_command(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    run_id = _roll(cli, tmp_path, HANGS, db)
    effect_id = cli("--output", "json", "effects", "list", run_id, "--db", db).json()["data"][
        "effects"
    ][0]["effectId"]
    plain = cli("--color", "never", "inspect", run_id, "--db", db).stdout
    command = f"agentctl reconcile {effect_id} --status applied|not-applied --reason TEXT --db {db}"
    assert f"uncertain: check the outside world, then {command}" in plain
    assert f"  {command}  # say whether builtin.shell.exec took effect" in plain
    assert f"agentctl resume {run_id} --db {db}" in plain
    assert f"agentctl inspect {run_id}" not in plain  # not suggested from inspect itself
    coloured = cli("--color", "always", "inspect", run_id, "--db", db).stdout
    assert "\x1b[1;31muncertain" in coloured
    assert _ANSI.sub("", coloured) == plain


NOISY = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: noisy}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    work:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo line $i >&2; done; exit 3"]
  tasks:
    - {id: step, uses: action:work}
"""


def test_effects_inspect_shows_exit_code_and_stderr_tail(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    run_id = _roll(cli, tmp_path, NOISY, db)
    listed = cli("--output", "json", "effects", "list", run_id, "--db", db)
    effect_id = listed.json()["data"]["effects"][0]["effectId"]
    text = cli("effects", "inspect", effect_id, "--db", db).stdout
    lines = text.splitlines()
    assert lines[0] == effect_id
    assert "  exit code  3" in lines
    tail = lines[lines.index("  stderr (last 10 lines):") + 1 :]
    assert tail == [f"    line {i}" for i in range(3, 13)]
    assert "  command    sh -c 'for i in" in text
