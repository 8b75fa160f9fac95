"""An effect keeps its identity across a crash whatever order its request's keys came in.

The first attempt renders a task's ``with:`` in the order the file wrote it; a resumed
attempt renders it from the stored copy of the workflow. Identity is taken over the
canonical form (docs/durable-execution.md), so both attempts name the same effect: a kill
after an at-most-once extension applied its change makes ``resume`` stop at the uncertain
effect instead of applying the change a second time, and an approved request is not asked
for again after the approval.

The key orders are generated: any permutation of keys, at any depth, must give the same
outcome as the sorted one.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.crash.cli import cli, result_json

pytestmark = pytest.mark.crash

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "protocol_servers"


def _workflow(with_text: str, approval: str) -> str:
    python = Path(sys.executable).name
    return textwrap.dedent(f"""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {{name: unsorted-with}}
        spec:
          policy: {{approval: {approval}, processAllowlist: [{python}]}}
          actions:
            apply:
              kind: extension.process
              command: "{sys.executable}"
              args: ["{FIXTURES / "extension.py"}", ledger]
              idempotency: at_most_once
              protocolVersion: agentctl.dev/process-extension/v1
              inputSchema: {{type: object}}
              outputSchema: {{type: object}}
              capabilities: [math]
          tasks:
            - id: change
              uses: action:apply
              with: {with_text}
    """)


def _flow(value: Any) -> str:
    """YAML flow text of ``value`` keeping the dict's own key order."""
    return json.dumps(value)


def _ledger(workspace: Path) -> list[str]:
    path = workspace / "ledger.txt"
    return path.read_text().splitlines() if path.exists() else []


# Nested objects whose keys are not in sorted order at every level.
UNSORTED = [
    {"zeta": 1, "alpha": 2},
    {"zeta": {"y": 1, "b": [{"k": 1, "a": 2}]}, "alpha": "x"},
]


@pytest.mark.parametrize("with_value", UNSORTED, ids=["flat", "nested"])
def test_kill_after_an_at_most_once_dispatch_stops_at_uncertain(
    tmp_path: Path, with_value: dict[str, Any]
) -> None:
    _kill_after_dispatch_then_resume(tmp_path, with_value)


def _kill_after_dispatch_then_resume(tmp_path: Path, with_value: dict[str, Any]) -> None:
    workspace = tmp_path
    workflow = workspace / "wf.yaml"
    workflow.write_text(_workflow(_flow(with_value), "never"))
    db = str(workspace / "state.db")
    killed = cli(
        ["roll", str(workflow), "--db", db], workspace, {"AGENTCTL_FAULT": "effect.dispatched"}
    )
    assert killed.returncode == -9, killed.stderr
    assert len(_ledger(workspace)) == 1
    run_id = _only_run(db, workspace)

    resumed = cli(["resume", run_id, "--db", db], workspace)
    # The change was applied once and its outcome is unknown: resume must stop there.
    assert resumed.returncode == 3, resumed.stdout + resumed.stderr
    assert len(_ledger(workspace)) == 1
    listed = result_json(cli(["effects", "list", run_id, "--db", db], workspace))
    effects = listed["data"]["effects"] if isinstance(listed["data"], dict) else listed["data"]
    assert [e["status"] for e in effects] == ["uncertain"]


@settings(
    # AGENTCTL_IDENTITY_EXAMPLES raises it for a soak.
    max_examples=int(os.environ.get("AGENTCTL_IDENTITY_EXAMPLES", 3)),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.permutations(["zeta", "alpha", "mid", "beta"]),
    st.permutations(["q", "b", "x"]),
)
def test_any_key_order_is_one_effect_after_an_approval(
    tmp_path_factory: pytest.TempPathFactory, top: list[str], nested: list[str]
) -> None:
    workspace = tmp_path_factory.mktemp("approval")
    with_value: dict[str, Any] = {key: index for index, key in enumerate(top)}
    with_value[top[0]] = {key: [index, {"z": 1, "a": 2}] for index, key in enumerate(nested)}
    workflow = workspace / "wf.yaml"
    workflow.write_text(_workflow(_flow(with_value), "mutations"))
    db = str(workspace / "state.db")
    parked = cli(["roll", str(workflow), "--db", db], workspace)
    assert parked.returncode == 3, parked.stdout + parked.stderr
    run_id = _only_run(db, workspace)
    pending = result_json(cli(["approvals", "list", "--db", db], workspace))["data"]
    approvals = pending["approvals"] if isinstance(pending, dict) else pending
    assert len(approvals) == 1
    approved = cli(
        [
            "approvals",
            "approve",
            approvals[0].get("id") or approvals[0]["approvalId"],
            "--reason",
            "ok",
            "--db",
            db,
        ],
        workspace,
    )
    assert approved.returncode == 0, approved.stdout + approved.stderr
    resumed = cli(["resume", run_id, "--db", db], workspace)
    # One request, one approval: resume dispatches the approved effect and finishes.
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert len(_ledger(workspace)) == 1
    listed = result_json(cli(["effects", "list", run_id, "--db", db], workspace))
    effects = listed["data"]["effects"] if isinstance(listed["data"], dict) else listed["data"]
    assert [e["status"] for e in effects] == ["succeeded"]


def _only_run(db: str, workspace: Path) -> str:
    listed = result_json(cli(["runs", "list", "--db", db], workspace))["data"]
    runs = listed["runs"] if isinstance(listed, dict) else listed
    assert len(runs) == 1
    return str(runs[0]["id"] if "id" in runs[0] else runs[0]["runId"])
