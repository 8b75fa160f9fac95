"""retry, repair, fork and replay from the CLI: reuse is proven with external counters."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

PIPELINE = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: pipeline}}
spec:
  inputs: {{target: prod}}
  policy: {{approval: never, processAllowlist: [sh]}}
  actions:
    expensive:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "echo run >> counter.txt; echo built"]
    gate: {{kind: builtin.shell.exec, command: sh, args: ["-c", "test -f ready"]}}
    set: {{kind: builtin.assign}}
  tasks:
    - {{id: build, uses: "action:expensive"}}
    - {{id: check, uses: "action:gate", needs: [build]}}
    - id: publish
      uses: action:set
      needs: [build, check]
      with: {{artifact: "${{{{ tasks.build.output.stdout }}}}", label: "{label}"}}
"""


def _write(workspace: Path, label: str = "v1") -> Path:
    path = workspace / "wf.yaml"
    path.write_text(PIPELINE.format(label=label))
    return path


def _count(workspace: Path) -> int:
    counter = workspace / "counter.txt"
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def _failed_run(cli: Any, workspace: Path, db: Path) -> str:
    result = cli("--output", "json", "roll", _write(workspace), "--db", db)
    assert result.exit_code == 4, result.stderr
    return str(result.error_json()["error"]["runId"])


def _runs(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        (count,) = conn.execute("SELECT COUNT(*) FROM runs").fetchone()
    conn.close()
    return int(count)


def test_retry_failed_reuses_the_expensive_task(cli: Any, workspace: Path, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    source = _failed_run(cli, workspace, db)
    assert _count(workspace) == 1
    planned = cli(
        "--output", "json", "retry", workspace / "wf.yaml", source, "--failed", "--plan", "--db", db
    )
    assert planned.exit_code == 0, planned.stderr
    actions = {t["taskId"]: t["action"] for t in planned.json()["data"]["tasks"]}
    assert actions == {"build": "reuse", "check": "execute", "publish": "execute"}
    assert _runs(db) == 1  # --plan created nothing
    (workspace / "ready").write_text("")
    retried = cli(
        "--output",
        "json",
        "retry",
        workspace / "wf.yaml",
        source,
        "--failed",
        "--reason",
        "gate fixed",
        "--db",
        db,
    )
    assert retried.exit_code == 0, retried.stderr
    data = retried.json()["data"]
    assert data["runId"].startswith("retry-")
    assert data["output"]["publish"]["output"]["artifact"] == "built\n"
    assert _count(workspace) == 1  # the expensive step was reused, not run again
    inspection = cli("--output", "json", "inspect", data["runId"], "--db", db).json()["data"]
    assert inspection["run"]["sourceRunId"] == source
    dispositions = {t["taskId"]: t["disposition"] for t in inspection["tasks"]}
    assert dispositions["build"] == "reused"
    assert [e["operation"] for e in inspection["effects"]] == ["builtin.shell.exec"]


def test_retry_refuses_a_changed_workflow(cli: Any, workspace: Path, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    source = _failed_run(cli, workspace, db)
    _write(workspace, label="v2")
    result = cli("--output", "json", "retry", workspace / "wf.yaml", source, "--failed", "--db", db)
    assert result.exit_code == 3
    error = result.error_json()["error"]
    assert error["code"] == "retry.workflow_changed" and "agentctl repair" in error["hint"]
    assert cli("retry", workspace / "wf.yaml", source, "--db", db).exit_code == 2


def test_repair_reuses_what_is_still_compatible(cli: Any, workspace: Path, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    source = _failed_run(cli, workspace, db)
    (workspace / "ready").write_text("")
    _write(workspace, label="v2")  # publish's definition changes; build's does not
    planned = cli(
        "--output", "json", "repair", workspace / "wf.yaml", source, "--plan", "--db", db
    ).json()["data"]
    decisions = {t["taskId"]: (t["action"], t["reason"]) for t in planned["tasks"]}
    assert decisions["build"][0] == "reuse"
    assert decisions["check"] == ("execute", "it was failed in the source run")
    assert decisions["publish"][0] == "execute"
    repaired = cli("--output", "json", "repair", workspace / "wf.yaml", source, "--db", db)
    assert repaired.exit_code == 0, repaired.stderr
    assert repaired.json()["data"]["output"]["publish"]["output"]["label"] == "v2"
    assert _count(workspace) == 1
    forced = cli(
        "--output",
        "json",
        "repair",
        workspace / "wf.yaml",
        source,
        "--from",
        "build",
        "--plan",
        "--db",
        db,
    ).json()["data"]
    assert {t["taskId"]: t["action"] for t in forced["tasks"]}["build"] == "execute"
    unknown = cli("repair", workspace / "wf.yaml", source, "--from", "nope", "--db", db)
    assert unknown.exit_code == 2 and "nope" in unknown.stderr


def test_fork_runs_every_effect_again(cli: Any, workspace: Path, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    (workspace / "ready").write_text("")
    first = cli("--output", "json", "roll", _write(workspace), "--db", db).json()["data"]
    forked = cli("--output", "json", "fork", first["runId"], "--reason", "again", "--db", db)
    assert forked.exit_code == 0, forked.stderr
    assert forked.json()["data"]["runId"].startswith("fork-")
    assert _count(workspace) == 2


def test_replay_calls_no_executor_and_survives_source_deletion(
    cli: Any, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "r.db"
    (workspace / "ready").write_text("")
    first = cli("--output", "json", "roll", _write(workspace), "--db", db).json()["data"]

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("replay must not call any executor")

    monkeypatch.setattr("agentctl.engine.run.tasks.run_action", forbidden)
    monkeypatch.setattr("agentctl.engine.run.tasks.run_agent", forbidden)
    monkeypatch.setattr("agentctl.process.run_process", forbidden)
    replayed = cli("--output", "json", "replay", first["runId"], "--db", db)
    assert replayed.exit_code == 0, replayed.stderr
    data = replayed.json()["data"]
    assert data["runId"].startswith("replay-") and data["output"] == first["output"]
    assert _count(workspace) == 1
    effects = cli("--output", "json", "effects", "list", data["runId"], "--db", db)
    assert effects.json()["data"]["effects"] == []
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM runs WHERE id = ?", (first["runId"],))
    conn.close()
    inspection = cli("--output", "json", "inspect", data["runId"], "--db", db).json()["data"]
    assert inspection["run"]["output"] == first["output"]
    assert {t["state"] for t in inspection["tasks"]} == {"succeeded"}
    assert inspection["audit"]["verified"] is True


def test_recovery_refuses_unfinished_sources_and_uncertain_effects(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    db = tmp_path / "r.db"
    path = write_workflow("""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {name: hanging}
        spec:
          policy: {approval: never, processAllowlist: [sleep]}
          actions:
            wait: {kind: builtin.shell.exec, command: sleep, args: ["20"], timeoutSeconds: 1}
          tasks:
            - {id: slow, uses: "action:wait"}
    """)
    blocked = cli("--output", "json", "roll", path, "--db", db).json()["data"]
    paused = cli("--output", "json", "retry", path, blocked["runId"], "--failed", "--db", db)
    assert paused.exit_code == 3
    assert paused.error_json()["error"]["code"] == "run.not_terminal"
    assert cli("cancel", blocked["runId"], "--db", db).exit_code == 0
    refused = cli("--output", "json", "retry", path, blocked["runId"], "--from", "slow", "--db", db)
    assert refused.exit_code == 3
    assert "uncertain" in refused.error_json()["error"]["message"]


CHANGED_BODIES = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: bodies}}
spec:
  policy: {{approval: never, processAllowlist: [sh]}}
  providers:
    scripted: {{kind: fake}}
  agents:
    writer:
      provider: scripted
      model: {model}
      instructions: {instructions}
      providerOptions: {{finalText: written}}
  actions:
    count:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "echo {word} >> counter.txt; echo {word}"]
    gate: {{kind: builtin.shell.exec, command: sh, args: ["-c", "test -f ready"]}}
  tasks:
    - {{id: a, uses: "action:count"}}
    - {{id: w, uses: "agent:writer", with: {{prompt: go}}}}
    - {{id: check, uses: "action:gate", needs: [a, w]}}
"""


def _bodies(
    workspace: Path, word: str = "one", model: str = "m", instructions: str = "Write."
) -> Path:
    path = workspace / "wf.yaml"
    path.write_text(CHANGED_BODIES.format(word=word, model=model, instructions=instructions))
    return path


@pytest.mark.parametrize(
    ("change", "executes"),
    [
        ({"word": "two"}, "a"),  # a shell action's args changed
        ({"model": "m2"}, "w"),  # the agent's model changed
        ({"instructions": "Write briefly."}, "w"),  # the agent's system prompt changed
        ({}, None),  # nothing changed: both are reused
    ],
)
def test_repair_re_executes_a_task_whose_action_or_agent_changed(
    cli: Any, workspace: Path, tmp_path: Path, change: dict[str, str], executes: str | None
) -> None:
    # The defect: the fingerprint covered `uses: action:count` but not the action itself,
    # so repair reused `a` after its command changed and kept the old output.
    db = tmp_path / "r.db"
    failed = cli("--output", "json", "roll", _bodies(workspace), "--db", db)
    assert failed.exit_code == 4, failed.stderr
    source = str(failed.error_json()["error"]["runId"])
    (workspace / "ready").write_text("")
    path = _bodies(workspace, **change)
    planned = cli("--output", "json", "repair", path, source, "--plan", "--db", db)
    assert planned.exit_code == 0, planned.stderr
    actions = {t["taskId"]: t["action"] for t in planned.json()["data"]["tasks"]}
    expected = {"a": "reuse", "w": "reuse", "check": "execute"}
    if executes is not None:
        expected[executes] = "execute"
    assert actions == expected
    repaired = cli("--output", "json", "repair", path, source, "--db", db)
    assert repaired.exit_code == 0, repaired.stderr
    if executes == "a":
        assert repaired.json()["data"]["output"]["a"]["stdout"] == "two\n"
