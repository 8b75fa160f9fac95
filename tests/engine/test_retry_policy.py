"""Task retry policies through the CLI: confirmed failures are retried, final ones are not,
and every retry (its failed attempt and its wait) is visible in `inspect`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

FLAKY = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: flaky-shell}}
spec:
  policy: {{approval: never, processAllowlist: [sh]}}
  actions:
    flaky:
      kind: builtin.shell.exec
      command: sh
      # Fails until it has run {fail_times} times before: the counter file remembers.
      args: ["-c", "n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; \\
        if [ $n -lt {fail_times} ]; then echo boom $n >&2; exit {exit_code}; fi; echo ok $n"]
  tasks:
    - id: build
      uses: action:flaky
      retry: {retry}
"""


def _roll(cli: Any, path: Path, db: Path) -> Any:
    return cli("--output", "json", "roll", path, "--db", db)


def test_non_zero_exit_is_retried_until_it_succeeds(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    path = write_workflow(FLAKY.format(fail_times=2, exit_code=1, retry="{maxAttempts: 3}"))
    db = tmp_path / "r.db"
    result = _roll(cli, path, db)
    assert result.exit_code == 0, result.stderr
    data = result.json()["data"]
    assert data["output"]["build"]["stdout"] == "ok 2\n"
    assert (workspace / "count").read_text() == "3\n"
    inspection = cli("--output", "json", "inspect", data["runId"], "--db", db).json()["data"]
    effects = [(e["attempt"], e["status"]) for e in inspection["effects"]]
    assert effects == [(1, "failed"), (2, "failed"), (3, "succeeded")]
    (task,) = inspection["tasks"]
    assert task["attempt"] == 3 and task["state"] == "succeeded"
    retries = inspection["retries"]
    assert [(r["failedAttempt"], r["nextAttempt"]) for r in retries] == [(1, 2), (2, 3)]
    assert {r["error"]["code"] for r in retries} == {"subprocess.failed"}
    assert [r["waitMs"] for r in retries] == [0, 0]
    human = cli("inspect", data["runId"], "--db", db)
    assert "retried build: attempt 1 failed (subprocess.failed), waited 0 ms" in human.stdout


def test_attempts_run_out(cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path) -> None:
    path = write_workflow(FLAKY.format(fail_times=5, exit_code=1, retry="{maxAttempts: 2}"))
    result = _roll(cli, path, tmp_path / "r.db")
    assert result.exit_code == 4
    assert (workspace / "count").read_text() == "2\n"


def test_exit_code_78_is_final(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    path = write_workflow(FLAKY.format(fail_times=5, exit_code=78, retry="{maxAttempts: 3}"))
    result = _roll(cli, path, tmp_path / "r.db")
    assert result.exit_code == 4
    assert (workspace / "count").read_text() == "1\n"


def test_retry_on_narrows_what_is_retried(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    narrowed = "{maxAttempts: 3, retryOn: [transient, 'provider.*']}"
    path = write_workflow(FLAKY.format(fail_times=1, exit_code=1, retry=narrowed))
    assert _roll(cli, path, tmp_path / "a.db").exit_code == 4
    assert (workspace / "count").read_text() == "1\n"
    (workspace / "count").unlink()
    listed = "{maxAttempts: 3, retryOn: ['subprocess.*']}"
    path = write_workflow(FLAKY.format(fail_times=1, exit_code=1, retry=listed))
    assert _roll(cli, path, tmp_path / "b.db").exit_code == 0
    assert (workspace / "count").read_text() == "2\n"


def test_exponential_backoff_waits_are_recorded(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    policy = "{maxAttempts: 4, backoff: {kind: exponential, initialMs: 1, multiplier: 3, maxMs: 5}}"
    path = write_workflow(FLAKY.format(fail_times=3, exit_code=1, retry=policy))
    db = tmp_path / "r.db"
    result = _roll(cli, path, db)
    assert result.exit_code == 0, result.stderr
    run_id = result.json()["data"]["runId"]
    retries = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]["retries"]
    assert [r["waitMs"] for r in retries] == [1, 3, 5]


def test_builtin_fail_with_retry_false_is_not_retried(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    path = write_workflow("""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {name: bail}
        spec:
          actions:
            stop: {kind: builtin.fail}
          tasks:
            - id: final
              uses: action:stop
              retry: {maxAttempts: 5}
              with: {message: "config is wrong", retry: false, code: config.invalid}
            - id: again
              uses: action:stop
              retry: {maxAttempts: 2}
              failure: continue
              with: {message: "try again"}
    """)
    db = tmp_path / "r.db"
    result = _roll(cli, path, db)
    assert result.exit_code == 4
    inspection = cli(
        "--output", "json", "inspect", result.error_json()["error"]["runId"], "--db", db
    ).json()["data"]
    tasks = {t["taskId"]: t for t in inspection["tasks"]}
    assert tasks["final"]["attempt"] == 1
    assert tasks["final"]["error"]["code"] == "config.invalid"
    assert tasks["final"]["error"]["message"] == "config is wrong"
    assert [r["taskId"] for r in inspection["retries"]] == []


def test_bad_retry_policies_are_refused(cli: Any, write_workflow: Any, tmp_path: Path) -> None:
    both = "{maxAttempts: 2, backoffMs: 10, backoff: {kind: fixed, initialMs: 5}}"
    path = write_workflow(FLAKY.format(fail_times=0, exit_code=1, retry=both))
    result = cli("--output", "json", "check", path)
    assert result.exit_code == 2
    assert "either `backoffMs`" in result.stderr
    inverted = "{maxAttempts: 2, backoff: {kind: exponential, initialMs: 500, maxMs: 100}}"
    path = write_workflow(FLAKY.format(fail_times=0, exit_code=1, retry=inverted))
    result = cli("--output", "json", "check", path)
    assert result.exit_code == 2 and "maxMs (100) must not be below initialMs" in result.stderr
