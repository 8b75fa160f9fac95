"""``effects continue-remote``: an A2A delegation whose owner died while the peer worked is
picked up by the peer's task id, never by a second ``SendMessage`` (docs/protocols.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.crash.cli import cli as subprocess_cli
from tests.fixtures.protocol_servers.a2a_peer import A2APeer

WORKFLOW = """
    apiVersion: agentctl.dev/v1
    kind: Workflow
    metadata: {{name: remote}}
    spec:
      policy: {{approval: never, networkAllowlist: [127.0.0.1]}}
      a2aPeers:
        helper: {{cardUrl: "{card}", pollIntervalMs: 20, maxPolls: 1000}}
      actions:
        delegate: {{kind: a2a.delegate}}
        set: {{kind: builtin.assign}}
      tasks:
        - id: ask
          uses: action:delegate
          with: {{peer: helper, messageId: m-1, message: {message}}}
        - id: after
          uses: action:set
          needs: [ask]
          with: {{task: "${{{{ tasks.ask.output.id }}}}"}}
"""


def _effects(cli: Any, run_id: str, db: Path) -> list[dict[str, Any]]:
    listed = cli("--output", "json", "effects", "list", run_id, "--db", db)
    return list(listed.json()["data"]["effects"])


def test_a_killed_delegation_is_continued_without_a_second_send(
    cli: Any, write_workflow: Any, workspace: Path
) -> None:
    db = workspace / "state.db"
    with A2APeer() as peer:
        write_workflow(WORKFLOW.format(card=peer.card_url, message="hold"))
        # The owner dies right after the peer's task id committed, while the peer works.
        killed = subprocess_cli(
            ["roll", "wf.yaml", "--db", str(db)],
            workspace,
            {"AGENTCTL_FAULT": "effect.remote_noted"},
        )
        assert killed.returncode == -9, killed.stderr
        assert peer.methods() == ["SendMessage"]
        runs = cli("--output", "json", "runs", "list", "--db", db).json()["data"]
        run_id = (runs["runs"] if isinstance(runs, dict) else runs)[0]["runId"]
        (effect,) = _effects(cli, run_id, db)
        assert (effect["operation"], effect["status"]) == ("a2a.delegate", "started")
        effect_id = effect["effectId"]
        shown = cli("--output", "json", "effects", "inspect", effect_id, "--db", db).json()
        assert shown["data"]["remoteTask"]["taskId"] == "task-hold"

        continue_args = ("effects", "continue-remote", effect_id, "--reason", "owner died")
        # Still working when the time is up: exit 3, nothing recorded.
        waiting = cli("--output", "json", *continue_args, "--timeout-seconds", "0.2", "--db", db)
        assert waiting.exit_code == 3, waiting.stdout + waiting.stderr
        assert waiting.error_json()["error"]["code"] == "a2a.task_running"
        shown = cli("--output", "json", "effects", "inspect", effect_id, "--db", db).json()
        assert shown["data"]["reconciliations"] == []

        peer.release()
        continued = cli(
            "--output", "json", *continue_args, "--approved", "--actor", "ops", "--db", db
        )
        assert continued.exit_code == 0, continued.stdout + continued.stderr
        document = continued.json()
        assert document["kind"] == "RemoteContinuation"
        data = document["data"]
        assert data["status"] == "applied"
        assert data["remoteTask"] == {"peer": "helper", "taskId": "task-hold", "state": "completed"}
        assert data["reconciliation"]["status"] == "applied"
        assert data["reconciliation"]["actor"] == "ops"
        assert data["reconciliation"]["result"]["status"]["state"] == "TASK_STATE_COMPLETED"

        resumed = cli("--output", "json", "resume", run_id, "--db", db)
        assert resumed.exit_code == 0, resumed.stdout + resumed.stderr
        output = resumed.json()["data"]["output"]
        assert output["after"]["output"] == {"task": "task-hold"}
        # Followed by its task id only: one message ever reached the peer.
        assert peer.methods().count("SendMessage") == 1
        assert [e["effectId"] for e in _effects(cli, run_id, db)] == [effect_id]

        again = cli("--output", "json", *continue_args, "--db", db)
        assert again.exit_code == 2
        assert again.error_json()["error"]["code"] == "effect.not_in_flight"

    audit = cli("--output", "json", "audit", run_id, "--verify", "--db", db)
    assert audit.exit_code == 0, audit.stdout + audit.stderr
    kinds = [event["kind"] for event in audit.json()["data"]["events"]]
    assert kinds.index("effect.remote_task") < kinds.index("effect.remote_continued")


def test_only_an_unfinished_a2a_delegation_can_be_continued(
    cli: Any, write_workflow: Any, workspace: Path
) -> None:
    db = workspace / "state.db"
    with A2APeer() as peer:
        path = write_workflow(WORKFLOW.format(card=peer.card_url, message="task"))
        rolled = cli("--output", "json", "roll", path, "--db", db)
        assert rolled.exit_code == 0, rolled.stdout + rolled.stderr
        run_id = rolled.json()["data"]["runId"]
    (effect,) = _effects(cli, run_id, db)
    done = cli(
        "--output",
        "json",
        "effects",
        "continue-remote",
        effect["effectId"],
        "--reason",
        "x",
        "--db",
        db,
    )
    assert done.exit_code == 2
    assert done.error_json()["error"]["code"] == "effect.not_in_flight"
    unknown = cli(
        "--output", "json", "effects", "continue-remote", "f" * 64, "--reason", "x", "--db", db
    )
    assert unknown.exit_code == 5
    assert "unknown effect" in unknown.error_json()["error"]["message"]


def test_a_delegation_whose_polls_failed_is_continued_once_the_peer_answers(
    cli: Any, write_workflow: Any, workspace: Path
) -> None:
    db = workspace / "state.db"
    with A2APeer() as peer:
        path = write_workflow(WORKFLOW.format(card=peer.card_url, message="hold"))
        peer.unavailable_polls = True
        stopped = cli("--output", "json", "roll", path, "--db", db)
        # The message was accepted, then its task could not be polled: uncertain, exit 3.
        assert stopped.exit_code == 3, stopped.stdout + stopped.stderr
        run_id = stopped.json()["data"]["runId"]
        (effect,) = _effects(cli, run_id, db)
        assert effect["status"] == "uncertain"
        peer.unavailable_polls = False
        peer.release()
        continued = cli(
            "--output",
            "json",
            "effects",
            "continue-remote",
            effect["effectId"],
            "--reason",
            "the gateway is back",
            "--approved",
            "--db",
            db,
        )
        assert continued.exit_code == 0, continued.stdout + continued.stderr
        resumed = cli("--output", "json", "resume", run_id, "--db", db)
        assert resumed.exit_code == 0, resumed.stdout + resumed.stderr
        assert resumed.json()["data"]["output"]["after"]["output"] == {"task": "task-hold"}
        assert peer.methods().count("SendMessage") == 1
