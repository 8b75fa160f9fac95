"""Cookbook-style DevOps workflows, in the shape upstream users write them.

Every workflow calls one stdlib Python helper (tests/fixtures/protocol_servers/
devops_helper.py) through ``extension.process`` with ``processAllowlist: [python3]``; the
helper serves several actions under the one name it announces. Around it: reports written
under ``artifacts/``, budgets, an approval-gated mutation, a failure fixed by
``retry --failed``, a policy-denial variant, a keyless replay, and a workflow that upstream
rejects, with each diagnostic's code, path and line.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.llm_servers.openai_wire import responses_body
from tests.fixtures.llm_servers.server import JsonReply, LoopbackServer
from tests.fixtures.protocol_servers.devops_helper import OPERATIONS

HELPER = Path(__file__).resolve().parents[1] / "fixtures" / "protocol_servers" / "devops_helper.py"

pytestmark = pytest.mark.skipif(shutil.which("python3") is None, reason="needs python3 on PATH")


def _action(operation: str) -> str:
    contract = OPERATIONS[operation]
    return (
        f'{{kind: extension.process, command: python3, args: ["{HELPER}", {operation}], '
        "idempotency: idempotent, protocolVersion: agentctl.dev/process-extension/v1, "
        f"inputSchema: {json.dumps(contract['inputSchema'])}, "
        f"outputSchema: {json.dumps(contract['outputSchema'])}, "
        f"capabilities: {json.dumps(contract['capabilities'])}}}"
    )


def _workflow(workspace: Path, name: str, body: str, policy: str = "") -> Path:
    """A cookbook workflow: the helper's actions, a report writer, and ``body``'s tasks."""
    path = workspace / f"{name}.workflow.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {{name: {name}}}
        spec:
          policy:
            approval: never
            processAllowlist: [python3]
            writableRoots: [artifacts]
            {policy}
          actions:
            inventory: {_action("inventory")}
            probe: {_action("flaky")}
            write: {{kind: builtin.write}}
        """)
        + textwrap.indent(textwrap.dedent(body), "  ")
    )
    return path


REPORT_TASKS = """\
tasks:
  - {id: hosts, uses: "action:inventory", with: {service: payments}}
  - id: report
    uses: action:write
    needs: [hosts]
    with:
      path: artifacts/payments-hosts.md
      content: "hosts of ${{ tasks.hosts.output.service }}: ${{ tasks.hosts.output.summary }}"
"""


def test_inventory_report_lands_under_artifacts(cli: Any, workspace: Path, tmp_path: Path) -> None:
    db = tmp_path / "state" / "r.db"
    path = _workflow(workspace, "inventory-report", REPORT_TASKS)
    assert cli("check", path).exit_code == 0
    rolled = cli("--output", "json", "roll", path, "--db", db)
    assert rolled.exit_code == 0, rolled.stderr
    report = (workspace / "artifacts" / "payments-hosts.md").read_text()
    assert report.startswith("hosts of payments: ") and "payments-1.internal" in report
    inspection = cli("--output", "json", "inspect", rolled.json()["data"]["runId"], "--db", db)
    (artifact,) = inspection.json()["data"]["artifacts"]
    assert (artifact["name"], artifact["taskId"]) == ("artifacts/payments-hosts.md", "report")


def test_budget_stops_the_second_model_request(cli: Any, workspace: Path, tmp_path: Path) -> None:
    path = _workflow(
        workspace,
        "budgeted-triage",
        """\
        runtime: {budgets: {maxProviderRequests: 1}}
        providers: {scripted: {kind: fake}}
        agents:
          triager: {provider: scripted, model: m, instructions: triage,
                    providerOptions: {finalText: looks fine}}
        tasks:
          - {id: hosts, uses: "action:inventory", with: {service: api}}
          - {id: first, uses: "agent:triager", needs: [hosts], with: {prompt: one}}
          - {id: second, uses: "agent:triager", needs: [first], with: {prompt: two}}
        """,
    )
    db = tmp_path / "r.db"
    failed = cli("--output", "json", "roll", path, "--db", db)
    assert failed.exit_code == 4
    error = failed.error_json()["error"]
    assert error["code"] == "budget.exceeded" and "providerRequests" in error["message"]
    inspection = cli("--output", "json", "inspect", error["runId"], "--db", db).json()["data"]
    states = {t["taskId"]: t["state"] for t in inspection["tasks"]}
    assert (states["hosts"], states["first"], states["second"]) == ("succeeded",) * 2 + ("failed",)


def test_approval_gated_mutation_pauses_then_writes(
    cli: Any, workspace: Path, tmp_path: Path
) -> None:
    path = _workflow(workspace, "gated-report", REPORT_TASKS)
    path.write_text(path.read_text().replace("approval: never", "approval: mutations"))
    db = tmp_path / "r.db"
    outcome = cli("--output", "json", "roll", path, "--db", db)
    approved: list[str] = []
    # The helper (a process) and the write (a workspace mutation) are both gated.
    while outcome.exit_code == 3:
        assert not (workspace / "artifacts").exists()
        data = outcome.json()["data"]
        (approval,) = data["pendingApprovals"]
        assert cli("approvals", "approve", approval, "--reason", "ok", "--db", db).exit_code == 0
        approved.append(approval)
        outcome = cli("--output", "json", "resume", data["runId"], "--db", db)
    assert outcome.exit_code == 0, outcome.stderr
    assert len(approved) == 2
    assert (workspace / "artifacts" / "payments-hosts.md").exists()


def test_failed_run_is_fixed_by_retry_failed(cli: Any, workspace: Path, tmp_path: Path) -> None:
    path = _workflow(
        workspace,
        "flaky-deploy",
        """\
        tasks:
          - {id: hosts, uses: "action:inventory", with: {service: web}}
          - {id: probe, uses: "action:probe", needs: [hosts], with: {marker: deploy.ready}}
        """,
    )
    db = tmp_path / "r.db"
    failed = cli("--output", "json", "roll", path, "--db", db)
    assert failed.exit_code == 4
    source = failed.error_json()["error"]["runId"]
    (workspace / "deploy.ready").write_text("")
    retried = cli("--output", "json", "retry", path, source, "--failed", "--db", db)
    assert retried.exit_code == 0, retried.stderr
    run_id = retried.json()["data"]["runId"]
    assert run_id.startswith("retry-")
    inspection = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]
    dispositions = {t["taskId"]: t["disposition"] for t in inspection["tasks"]}
    assert dispositions == {"hosts": "reused", "probe": "executed"}


def test_policy_denial_exits_4_and_leaves_no_artifact(
    cli: Any, workspace: Path, tmp_path: Path
) -> None:
    path = _workflow(workspace, "denied-report", REPORT_TASKS)
    path.write_text(path.read_text().replace("processAllowlist: [python3]", "processAllowlist: []"))
    db = tmp_path / "r.db"
    denied = cli("--output", "json", "roll", path, "--db", db)
    assert denied.exit_code == 4
    error = denied.error_json()["error"]
    assert "processAllowlist" in error["message"]
    assert not (workspace / "artifacts").exists()
    inspection = cli("--output", "json", "inspect", error["runId"], "--db", db).json()["data"]
    assert inspection["artifacts"] == []


def test_keyless_replay_dispatches_no_fresh_effect(
    cli: Any, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "r.db"
    with LoopbackServer() as server:
        server.script(JsonReply(responses_body(text="all healthy", response_id="r1")))
        path = _workflow(
            workspace,
            "summarize-hosts",
            f"""\
            providers:
              model: {{kind: openai, endpoint: "{server.url("/v1/responses")}",
                       credential: {{env: OPENAI_API_KEY}}}}
            agents:
              summarizer: {{provider: model, model: small, instructions: summarize}}
            tasks:
              - {{id: hosts, uses: "action:inventory", with: {{service: api}}}}
              - id: summary
                uses: agent:summarizer
                needs: [hosts]
                with: {{prompt: "${{{{ tasks.hosts.output.summary }}}}"}}
            """,
            policy="networkAllowlist: [127.0.0.1]",
        )
        monkeypatch.setenv("OPENAI_API_KEY", "sk-cookbook")
        rolled = cli("--output", "json", "roll", path, "--db", db)
        assert rolled.exit_code == 0, rolled.stderr
    monkeypatch.delenv("OPENAI_API_KEY")  # and the server is gone
    first = rolled.json()["data"]
    replayed = cli("--output", "json", "replay", first["runId"], "--db", db)
    assert replayed.exit_code == 0, replayed.stderr
    data = replayed.json()["data"]
    assert data["output"] == first["output"]
    effects = cli("--output", "json", "effects", "list", data["runId"], "--db", db)
    assert effects.json()["data"]["effects"] == []
    assert len(server.requests) == 1


def test_upstream_rejections_are_located(cli: Any, workspace: Path) -> None:
    path = _workflow(
        workspace,
        "typos",
        """\
        tasks:
          - id: hosts
            uses: action:inventory
            timeout_seconds: 30
            with: {service: api}
          - {id: probe, uses: "action:probe", needs: [hsts], with: {marker: m}}
        """,
    )
    result = cli("--output", "json", "check", path)
    assert result.exit_code == 2
    found = [
        (d["code"], d["path"], d["line"], d.get("help")) for d in result.error_json()["diagnostics"]
    ]
    assert found == [
        (
            "schema_violation",
            "spec.tasks[0].timeout_seconds",
            17,
            "rename `timeout_seconds` to `timeoutSeconds`",
        )
    ]
    fixed = path.read_text().replace("timeout_seconds", "timeoutSeconds")
    path.write_text(fixed)
    missing = cli("--output", "json", "check", path)
    assert missing.exit_code == 2
    (diagnostic,) = missing.error_json()["diagnostics"]
    assert (diagnostic["code"], diagnostic["path"], diagnostic["line"]) == (
        "missing_reference",
        "spec.tasks[1].needs[0]",
        19,
    )
