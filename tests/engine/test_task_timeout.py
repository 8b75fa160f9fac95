"""A task's timeoutSeconds bounds every attempt of every task kind: the in-flight call is
cancelled, a dispatched effect becomes uncertain, the attempt fails with `task.timeout`,
and the retry policy repeats only what is safe to repeat."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.llm_servers.server import Hang, LoopbackServer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "protocol_servers"

AGENT = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: slow-model}}
spec:
  policy: {{approval: never, networkAllowlist: [127.0.0.1]}}
  providers:
    remote: {{kind: openai, endpoint: "{endpoint}", credential: {{env: MODEL_KEY}}}}
  agents:
    helper: {{provider: remote, model: small, instructions: answer briefly}}
  tasks:
    - id: ask
      uses: agent:helper
      timeoutSeconds: 1
      retry: {{maxAttempts: 3}}
      with: {{prompt: hello}}
"""


def test_agent_task_is_bounded_and_its_model_call_not_repeated(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MODEL_KEY", "k")
    db = tmp_path / "r.db"
    with LoopbackServer() as server:
        # The server reads the request and answers nothing until the test ends.
        server.script(Hang(), Hang(), Hang())
        path = tmp_path / "wf.yaml"
        path.write_text(AGENT.format(endpoint=server.url("/v1/responses")))
        result = cli("--output", "json", "roll", path, "--db", db)
        requests = len(server.requests)
    assert result.exit_code == 4, result.stderr
    error = result.error_json()["error"]
    assert "timed out after 1s" in error["message"]
    # A model call is at-most-once: its uncertain effect is not dispatched again.
    assert requests == 1
    inspection = cli("--output", "json", "inspect", error["runId"], "--db", db).json()["data"]
    (task,) = inspection["tasks"]
    assert task["state"] == "failed" and task["error"]["code"] == "task.timeout"
    assert task["error"]["details"]["retrySafe"] is False
    (effect,) = inspection["effects"]
    assert effect["status"] == "uncertain" and effect["operation"] == "remote"
    assert task["error"]["details"]["uncertainEffects"] == [
        {"effectId": effect["effectId"], "operation": "remote"}
    ]
    assert f"agentctl reconcile {effect['effectId']}" in task["error"]["message"]
    assert inspection["retries"] == []


def test_shell_task_bounded_by_task_timeout_is_not_run_twice(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    path = write_workflow("""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {name: slow-shell}
        spec:
          policy: {approval: never, processAllowlist: [sh]}
          actions:
            work: {kind: builtin.shell.exec, command: sh, args: ["-c", "echo x >> runs; sleep 30"]}
          tasks:
            - {id: step, uses: "action:work", timeoutSeconds: 1, retry: {maxAttempts: 3}}
    """)
    db = tmp_path / "r.db"
    result = cli("--output", "json", "roll", path, "--db", db)
    assert result.exit_code == 4, result.stderr
    assert (workspace / "runs").read_text() == "x\n"
    run_id = result.error_json()["error"]["runId"]
    inspection = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]
    (task,) = inspection["tasks"]
    assert task["error"]["code"] == "task.timeout" and task["attempt"] == 1
    (effect,) = inspection["effects"]
    assert effect["status"] == "uncertain" and effect["operation"] == "builtin.shell.exec"


def test_idempotent_effect_left_uncertain_is_retried(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    python = Path(sys.executable).name
    path = write_workflow(f"""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {{name: slow-once}}
        spec:
          policy: {{approval: never, processAllowlist: [{python}]}}
          actions:
            doubler:
              kind: extension.process
              command: "{sys.executable}"
              args: ["{FIXTURES / "extension.py"}", slowonce]
              idempotency: idempotent
              protocolVersion: agentctl.dev/process-extension/v1
              inputSchema:
                type: object
                properties: {{n: {{type: integer, maximum: 1000}}}}
                required: [n]
                additionalProperties: false
              outputSchema:
                type: object
                properties: {{doubled: {{type: integer}}}}
                required: [doubled]
              capabilities: [math]
          tasks:
            - id: double
              uses: action:doubler
              timeoutSeconds: 2
              retry: {{maxAttempts: 2, retryOn: [timeout]}}
              with: {{n: 21}}
    """)
    db = tmp_path / "r.db"
    result = cli("--output", "json", "roll", path, "--db", db)
    assert result.exit_code == 0, result.stderr
    assert result.json()["data"]["output"]["double"] == {"doubled": 42}
    assert (workspace / "slowonce.marker").exists()
    run_id = result.json()["data"]["runId"]
    inspection = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]
    assert [(e["attempt"], e["status"]) for e in inspection["effects"]] == [
        (1, "uncertain"),
        (2, "succeeded"),
    ]
    (retry,) = inspection["retries"]
    assert retry["error"]["code"] == "task.timeout"
    assert retry["error"]["details"]["retrySafe"] is True


def test_time_a_person_takes_to_approve_is_not_the_tasks_time(
    write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    import asyncio

    from agentctl.engine.run.creation import create_run, prepare_run
    from agentctl.engine.run.executor import ExecutionOptions, RunExecutor
    from agentctl.ids import IdGenerator, SystemClock
    from agentctl.store.engine import open_store

    path = write_workflow("""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {name: approved-write}
        spec:
          policy: {approval: always, writableRoots: [out]}
          actions:
            save: {kind: builtin.write}
          tasks:
            - {id: save, uses: "action:save", timeoutSeconds: 1,
               with: {path: out/a.txt, content: hi}}
    """)
    asked: list[str] = []

    async def slow_person(request: dict[str, Any]) -> bool:
        asked.append(request["operation"])
        # Longer than the task's whole timeout: a person reading the prompt.
        await asyncio.sleep(1.5)
        return True

    clock = SystemClock()
    with open_store(tmp_path / "r.db") as store:
        run_id = create_run(store, prepare_run(str(path)), clock=clock, ids=IdGenerator(clock))
        options = ExecutionOptions(approver=slow_person)
        outcome = asyncio.run(RunExecutor(store, run_id, clock=clock, options=options).execute())
    assert asked == ["builtin.write"]
    assert outcome.state == "succeeded", outcome.error
    assert (workspace / "out" / "a.txt").read_text() == "hi"
