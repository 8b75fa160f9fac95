"""The resource ledger: reservations before dispatch, refusals, races, pricing, deadlines."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentctl.engine.core.faults import Faults
from agentctl.engine.run.creation import create_run, prepare_run
from agentctl.engine.run.executor import ExecutionOptions, RunExecutor
from agentctl.ids import FixedClock, IdGenerator
from agentctl.store.engine import open_store

TWO_AGENTS = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: budgeted}}
spec:
  runtime:
    maxConcurrency: {concurrency}
    budgets: {{maxProviderRequests: 1}}
  policy: {{approval: never}}
  providers: {{scripted: {{kind: fake}}}}
  agents:
    talker:
      provider: scripted
      model: scripted
      instructions: answer
      maxOutputTokens: 32
      providerOptions: {{finalText: done}}
  tasks:
{tasks}
"""


def _effects(cli: Any, db: Path, run_id: str) -> list[dict[str, Any]]:
    return list(
        cli("--output", "json", "effects", "list", run_id, "--db", db).json()["data"]["effects"]
    )


def test_second_request_over_the_limit_fails_before_dispatch(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    tasks = (
        "    - {id: first, uses: 'agent:talker', with: {prompt: one}}\n"
        "    - {id: second, uses: 'agent:talker', needs: [first], with: {prompt: two}}"
    )
    path = write_workflow(TWO_AGENTS.format(concurrency=1, tasks=tasks))
    db = tmp_path / "r.db"
    result = cli("--output", "json", "roll", path, "--db", db)
    assert result.exit_code == 4
    error = result.error_json()["error"]
    assert error["code"] == "budget.exceeded" and "providerRequests" in error["message"]
    effects = _effects(cli, db, error["runId"])
    assert [(e["taskId"], e["status"]) for e in effects] == [
        ("first", "succeeded"),
        ("second", "failed"),
    ]
    assert effects[1]["startedAt"] is None  # refused before dispatch
    assert effects[1]["error"]["code"] == "budget.exceeded"
    inspection = cli("--output", "json", "inspect", error["runId"], "--db", db).json()["data"]
    ledger = {row["resource"]: row for row in inspection["budget"]}
    assert ledger["providerRequests"] == {
        "resource": "providerRequests",
        "limit": 1,
        "reserved": 0,
        "used": 1,
    }
    assert ledger["unpricedProviderRequests"]["used"] == 1
    audit = cli("--output", "json", "audit", error["runId"], "--db", db).json()["data"]
    assert "budget.exceeded" in [event["kind"] for event in audit["events"]]


def test_parallel_tasks_racing_for_the_last_unit(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    tasks = (
        "    - {id: left, uses: 'agent:talker', with: {prompt: l}}\n"
        "    - {id: right, uses: 'agent:talker', with: {prompt: r}}"
    )
    path = write_workflow(TWO_AGENTS.format(concurrency=2, tasks=tasks))
    db = tmp_path / "r.db"
    result = cli("--output", "json", "roll", path, "--db", db)
    assert result.exit_code == 4
    effects = _effects(cli, db, result.error_json()["error"]["runId"])
    assert sorted(e["status"] for e in effects) == ["failed", "succeeded"]
    assert sum(1 for e in effects if e["startedAt"] is not None) == 1


def test_priced_requests_report_cost_and_enforce_the_limit(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    path = write_workflow("""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {name: priced}
        spec:
          runtime:
            budgets: {maxCostMicrousd: 1000000}
            pricing:
              version: "2026-11"
              models:
                scripted/scripted:
                  inputMicrousdPerMillionTokens: 3000000
                  outputMicrousdPerMillionTokens: 15000000
          policy: {approval: never}
          providers: {scripted: {kind: fake}}
          agents:
            talker:
              provider: scripted
              model: scripted
              instructions: answer
              maxOutputTokens: 16
              providerOptions: {finalText: done}
          tasks:
            - {id: ask, uses: "agent:talker", with: {prompt: hello}}
    """)
    db = tmp_path / "r.db"
    result = cli("--output", "json", "roll", path, "--db", db)
    assert result.exit_code == 0, result.stderr
    usage = result.json()["data"]["output"]["ask"]["usage"]
    # fake usage is 1 input + 1 output token: ceil(3) + ceil(15) micro-USD
    assert usage["costMicrousd"] == 18
    inspection = cli(
        "--output", "json", "inspect", result.json()["data"]["runId"], "--db", db
    ).json()["data"]
    ledger = {row["resource"]: row for row in inspection["budget"]}
    assert ledger["costMicrousd"]["used"] == 18 and ledger["costMicrousd"]["reserved"] == 0


def test_pause_and_resume_do_not_reset_the_wall_time_budget(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "notes").mkdir(parents=True)
    (workspace / "notes" / "incident.txt").write_text("x")
    reference = Path(__file__).resolve().parents[1] / "fixtures" / "reference" / "25_2.yaml"
    text = reference.read_text().replace(
        "  providers:", "  runtime:\n    budgets: {maxWallTimeSeconds: 60}\n  providers:", 1
    )
    (workspace / "wf.yaml").write_text(text)
    clock = FixedClock(datetime(2026, 3, 1, tzinfo=UTC))
    store = open_store(str(tmp_path / "r.db"))
    run_id = create_run(
        store, prepare_run(str(workspace / "wf.yaml")), clock=clock, ids=IdGenerator(clock)
    )

    def execute() -> Any:
        options = ExecutionOptions(faults=Faults(""), cancel_poll_seconds=3600)
        return asyncio.run(RunExecutor(store, run_id, clock=clock, options=options).execute())

    assert execute().state == "paused"
    clock.advance(30)
    assert execute().state == "paused"  # 30 s in: still within the budget
    clock.advance(31)  # 61 s after creation, although the run was paused most of the time
    outcome = execute()
    assert outcome.state == "failed"
    assert outcome.error is not None and outcome.error["code"] == "budget.wall_time_exceeded"
    store.close()


def test_derived_runs_own_their_ledgers_and_reuse_costs_nothing(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    path = write_workflow("""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {name: ledgers}
        spec:
          runtime: {budgets: {maxProviderRequests: 1}}
          policy: {approval: never, processAllowlist: [sh]}
          providers: {scripted: {kind: fake}}
          agents:
            talker: {provider: scripted, model: scripted, instructions: answer,
                     providerOptions: {finalText: done}}
          actions:
            gate: {kind: builtin.shell.exec, command: sh, args: ["-c", "test -f ready"]}
          tasks:
            - {id: ask, uses: "agent:talker", with: {prompt: hi}}
            - {id: check, uses: "action:gate", needs: [ask]}
    """)
    db = tmp_path / "r.db"
    source = cli("--output", "json", "roll", path, "--db", db).error_json()["error"]["runId"]
    (path.parent / "ready").write_text("")
    retried = cli("--output", "json", "retry", path, source, "--failed", "--db", db)
    assert retried.exit_code == 0, retried.stderr
    replayed = cli("--output", "json", "replay", retried.json()["data"]["runId"], "--db", db)
    assert replayed.exit_code == 0, replayed.stderr

    def used(run_id: str) -> float:
        inspection = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]
        return {r["resource"]: r for r in inspection["budget"]}["providerRequests"]["used"]

    assert used(source) == 1
    assert used(retried.json()["data"]["runId"]) == 0  # the agent's answer was reused
    assert used(replayed.json()["data"]["runId"]) == 0


# The step's worst case (its combined output limit) is reserved before it runs; two of
# them do not fit the run's limit at once.
RECONCILED = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: budgeted-process}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  runtime:
    budgets: {maxProcessOutputBytes: 1500000}
  actions:
    work:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "echo ran >> counter"]
      combinedOutputLimitBytes: 1000000
  tasks:
    - {id: step, uses: "action:work"}
    - {id: later, uses: "action:work", needs: [step]}
"""


def _uncertain_after_a_crash(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> tuple[Path, str, str]:
    """Roll, SIGKILLed right after the step's dispatch; resume finds it uncertain."""
    from tests.crash.cli import cli as crash_cli

    path = write_workflow(RECONCILED)
    db = tmp_path / "r.db"
    killed = crash_cli(
        ["roll", str(path), "--db", str(db)],
        path.parent,
        env_extra={"AGENTCTL_FAULT": "effect.dispatched"},
    )
    assert killed.returncode == -9, killed.stderr
    runs = cli("--output", "json", "runs", "list", "--db", db).json()["data"]["runs"]
    run_id = runs[0]["runId"]
    assert cli("resume", run_id, "--db", db).exit_code == 3
    (effect,) = _effects(cli, db, run_id)
    assert effect["status"] == "uncertain"
    return db, run_id, effect["effectId"]


def _ledger(cli: Any, db: Path, run_id: str) -> dict[str, Any]:
    inspection = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]
    return dict({row["resource"]: row for row in inspection["budget"]}["processOutputBytes"])


def test_reconciled_not_applied_gives_the_reservation_back(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    db, run_id, effect_id = _uncertain_after_a_crash(cli, write_workflow, tmp_path)
    assert _ledger(cli, db, run_id)["reserved"] == 1_000_000
    reconciled = cli(
        "reconcile", effect_id, "--status", "not-applied", "--reason", "no", "--db", db
    )
    assert reconciled.exit_code == 0, reconciled.stderr
    assert _ledger(cli, db, run_id) == {
        "resource": "processOutputBytes",
        "limit": 1_500_000,
        "reserved": 0,
        "used": 0,
    }
    # The fresh attempt of `step` and then `later` each fit (it failed "used 0" before).
    resumed = cli("--output", "json", "resume", run_id, "--db", db)
    assert resumed.exit_code == 0, resumed.stderr
    ledger = _ledger(cli, db, run_id)
    assert ledger["reserved"] == 0 and ledger["used"] == 0  # `echo >> file` prints nothing


def test_reconciled_applied_counts_the_reservation_as_used(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    db, run_id, effect_id = _uncertain_after_a_crash(cli, write_workflow, tmp_path)
    result = tmp_path / "result.json"
    result.write_text('{"status": "changed", "changed": true, "exitCode": 0, "stdout": ""}')
    applied = cli(
        "reconcile", effect_id, "--status", "applied", "--reason", "ran",
        "--result-file", result, "--db", db,
    )  # fmt: skip
    assert applied.exit_code == 0, applied.stderr
    assert _ledger(cli, db, run_id)["reserved"] == 0
    assert _ledger(cli, db, run_id)["used"] == 1_000_000
    # `later` reserves its own worst case on top: 2,000,000 of 1,500,000, said in bytes.
    resumed = cli("--output", "json", "resume", run_id, "--db", db)
    assert resumed.exit_code == 4
    message = resumed.error_json()["error"]["message"]
    assert (
        "processOutputBytes would reach 2,000,000 bytes of 1,500,000 bytes "
        "(used 1,000,000 bytes, reserved 0 bytes; limit runtime.budgets.maxProcessOutputBytes)"
    ) in message
    assert "e+" not in message
    # An operator who finds it did not apply after all gets the units back.
    overturned = cli(
        "reconcile", effect_id, "--status", "not-applied", "--reason", "it did not", "--db", db
    )
    assert overturned.exit_code == 0, overturned.stderr
    assert _ledger(cli, db, run_id)["used"] == 0
