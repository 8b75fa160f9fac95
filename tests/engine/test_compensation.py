"""compensate: a failed rollout's confirmed write is undone; repeated plans skip it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

ROLLOUT = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: rollout}
spec:
  policy: {approval: never, writableRoots: [conf], processAllowlist: [sh]}
  actions:
    put: {kind: builtin.write}
    check: {kind: builtin.assert}
    probe: {kind: builtin.shell.exec, command: sh, args: ["-c", "echo probing"]}
  tasks:
    - id: deploy
      uses: action:put
      with: {path: conf/app.conf, content: "version=2\\n"}
      compensate:
        uses: action:put
        with:
          path: conf/app.conf
          content: "${{ tasks.deploy.output.before }}"
    - id: smoke
      uses: action:probe
      needs: [deploy]
    - id: verify
      uses: action:check
      needs: [smoke]
      with: {that: false, message: health check failed}
"""


def test_failed_rollout_is_compensated_and_not_twice(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "conf").mkdir()
    (workspace / "conf" / "app.conf").write_text("version=1\n")
    path = write_workflow(ROLLOUT)
    db = tmp_path / "r.db"
    failed = cli("--output", "json", "roll", path, "--db", db)
    assert failed.exit_code == 4
    source = failed.error_json()["error"]["runId"]
    assert (workspace / "conf" / "app.conf").read_text() == "version=2\n"

    planned = cli("--output", "json", "compensate", source, "--plan", "--db", db)
    assert planned.exit_code == 0, planned.stderr
    (step,) = planned.json()["data"]["steps"]
    assert step["compensationTaskId"] == "compensate--deploy"
    assert step["action"] == "compensate" and len(step["effects"]) == 1
    assert step["input"] == {"path": "conf/app.conf", "content": "version=1\n"}
    assert (workspace / "conf" / "app.conf").read_text() == "version=2\n"  # plan did nothing

    done = cli("--output", "json", "compensate", source, "--db", db)
    assert done.exit_code == 0, done.stderr
    run_id = done.json()["data"]["runId"]
    assert run_id.startswith("compensate-")
    assert (workspace / "conf" / "app.conf").read_text() == "version=1\n"

    source_effects = cli("--output", "json", "inspect", source, "--db", db).json()["data"][
        "effects"
    ]
    write = next(e for e in source_effects if e["operation"] == "builtin.write")
    assert [r["status"] for r in write["reconciliations"]] == ["compensated"]
    inverse = cli("--output", "json", "effects", "list", run_id, "--db", db).json()["data"]
    assert write["reconciliations"][0]["compensationEffectId"] == inverse["effects"][0]["effectId"]

    again = cli("--output", "json", "compensate", source, "--plan", "--db", db).json()["data"]
    assert [s["action"] for s in again["steps"]] == ["skip"]
    nothing = cli("compensate", source, "--db", db)
    assert nothing.exit_code == 0 and "nothing to compensate" in nothing.stdout
    verified = cli("audit", source, "--verify", "--db", db)
    assert verified.exit_code == 0, verified.stderr


def test_uncertain_effects_block_compensation(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    path = write_workflow("""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {name: stuck}
        spec:
          policy: {approval: never, processAllowlist: [sh], writableRoots: [out]}
          actions:
            run: {kind: builtin.shell.exec, command: sh, args: ["-c", "sleep 20"],
                  timeoutSeconds: 1}
            put: {kind: builtin.write}
          tasks:
            - id: job
              uses: action:run
              compensate: {uses: "action:put", with: {path: out/undo.txt, content: undo}}
    """)
    db = tmp_path / "r.db"
    run_id = cli("--output", "json", "roll", path, "--db", db).json()["data"]["runId"]
    assert cli("cancel", run_id, "--db", db).exit_code == 0
    planned = cli("--output", "json", "compensate", run_id, "--plan", "--db", db)
    assert planned.exit_code == 3
    assert planned.json()["data"]["steps"][0]["action"] == "blocked"
    refused = cli("--output", "json", "compensate", run_id, "--db", db)
    assert refused.exit_code == 3
    assert refused.error_json()["error"]["code"] == "compensation.blocked"
    assert not (workspace / "out").exists()


def test_on_failure_automatic_compensates_right_away(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "conf").mkdir()
    (workspace / "conf" / "app.conf").write_text("version=1\n")
    path = write_workflow(
        ROLLOUT.replace("spec:\n", "spec:\n  compensation: {onFailure: automatic}\n", 1)
    )
    result = cli("--output", "json", "roll", path, "--db", tmp_path / "r.db")
    assert result.exit_code == 4
    message = result.error_json()["error"]["message"]
    assert "compensation run compensate-" in message and "succeeded" in message
    assert (workspace / "conf" / "app.conf").read_text() == "version=1\n"


UNDO_COUNTED = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: counted}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    do: {kind: builtin.shell.exec, command: sh, args: ["-c", "echo do >> counter"]}
    undo:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "echo undo >> counter; sleep 0.3"]
    check: {kind: builtin.assert}
  tasks:
    - id: one
      uses: action:do
      compensate: {uses: "action:undo"}
    - id: two
      uses: action:do
      needs: [one]
      compensate: {uses: "action:undo"}
    - id: verify
      uses: action:check
      needs: [two]
      with: {that: false, message: failed on purpose}
"""


@pytest.mark.slow
def test_two_concurrent_compensations_run_each_inverse_once(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    import subprocess

    from tests.forkserver import start_agentctl

    path = write_workflow(UNDO_COUNTED)
    db = tmp_path / "r.db"
    failed = cli("--output", "json", "roll", path, "--db", db)
    assert failed.exit_code == 4, failed.stdout + failed.stderr
    source = failed.error_json()["error"]["runId"]
    command = ["compensate", source, "--db", str(db)]
    for _ in range(3):
        racers = [
            start_agentctl(command, cwd=workspace, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for _ in range(2)
        ]
        results = [(p.wait(timeout=120), *p.communicate()) for p in racers]
        codes = sorted(code for code, _, _ in results)
        assert codes in ([0, 0], [0, 3]), results
        for code, _, err in results:
            if code == 3:
                assert "compensat" in err and source in err
    lines = (workspace / "counter").read_text().split()
    assert lines.count("do") == 2 and lines.count("undo") == 2, lines
