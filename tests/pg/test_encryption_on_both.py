"""State encrypted at rest (docs/encryption.md), on a SQLite file and on PostgreSQL.

A marker put in a run's input, a model's answer, a file the run writes and a question's
answer must not be found in the stored bytes once encryption is on; with the key every
command reads the run as before, without it listing still works and payload reads exit 5
naming the key; identities are the same with encryption on and off; ``enable`` killed
half-way and run again loses nothing; ``rotate`` lets the old key go.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.forkserver import run_agentctl
from tests.pg.backends import rows

MARKER = "MARKER-3d1f0c"

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: secretive}
spec:
  inputs: {secret: none}
  providers:
    fake: {kind: fake}
  agents:
    writer: {provider: fake, model: scripted, instructions: Answer.}
  policy: {approval: never, writableRoots: [out]}
  actions:
    ask: {kind: builtin.ask}
    save: {kind: builtin.write}
  tasks:
    - id: think
      uses: agent:writer
      with: {prompt: "the input is ${{ inputs.secret }}"}
    - id: write
      uses: action:save
      needs: [think]
      with: {path: out/file.txt, content: "${{ tasks.think.output.text }}"}
    - id: env
      uses: action:ask
      needs: [write]
      with: {prompt: "Where?"}
"""

# Every table that holds a payload column, and the one artifact ref the run writes.
_TABLES = (
    "runs",
    "tasks",
    "effects",
    "approvals",
    "checkpoints",
    "audit_events",
    "provider_sessions",
    "tool_calls",
    "reconciliations",
)


def _key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def _agentctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # A real process, forked from a server that imported agentctl once.
    return run_agentctl(args, env={**os.environ, **(env or {})})


def _roll(cli: Any, db: str, workflow: Path, marker: str, workspace: str = ".") -> str:
    """A run whose input, model answer, written file and question answer hold ``marker``."""
    paused = cli(
        "--output",
        "json",
        "roll",
        workflow,
        "--input",
        f"secret={marker}",
        "--db",
        db,
        "--workspace",
        workspace,
    )
    assert paused.exit_code == 3, paused.stderr
    data = paused.json()["data"]
    (question,) = data["pendingApprovals"]
    answered = cli("approvals", "answer", question, json.dumps(f"answer {marker}"), "--db", db)
    assert answered.exit_code == 0, answered.stderr
    done = cli("--output", "json", "resume", data["runId"], "--db", db)
    assert done.exit_code == 0, done.stderr
    return str(data["runId"])


def _stored_text(db: str) -> str:
    """Every value of every payload table as an operator's SQL client reads it."""
    return "\n".join(
        repr(row)
        for table in _TABLES
        for row in rows(db, f"SELECT * FROM {table}")  # noqa: S608
    )


@pytest.fixture
def workflow(tmp_path: Path) -> Path:
    path = tmp_path / "secretive.yaml"
    path.write_text(WORKFLOW)
    return path


def test_payloads_and_blobs_are_sealed_and_read_back_with_the_key_only(
    cli: Any, database: str, workflow: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("K1", _key())
    assert cli("db", "migrate", "--db", database).exit_code == 0
    enabled = cli(
        "db", "encryption", "enable", "--key-id", "k1", "--key-env", "K1", "--db", database
    )
    assert enabled.exit_code == 0, enabled.stderr
    run_id = _roll(cli, database, workflow, MARKER)

    assert MARKER not in _stored_text(database)
    # Each store's form: bytes on SQLite (no base64), base64 text in PostgreSQL's text.
    (output,) = rows(database, "SELECT output_json FROM tasks WHERE task_id = 'think'")[0]
    form = str if "://" in database else bytes
    assert isinstance(output, form) and output[:13] in ("aes256gcm:k1:", b"aes256gcm:k1:")
    stored = [Path(database), Path(database + "-wal")] if "://" not in database else []
    artifacts = tmp_path / "artifacts"
    stored += [p for p in artifacts.rglob("*") if p.is_file()]
    assert any(p.parent.parent.name == "blobs" for p in stored)  # the written file's blob
    for path in stored:
        if path.exists():
            assert MARKER.encode() not in path.read_bytes(), path

    shown = cli("--output", "json", "inspect", run_id, "--db", database)
    assert shown.exit_code == 0 and MARKER in shown.stdout
    exported = cli("artifacts", "export", "out/file.txt", tmp_path / "copy.txt", "--db", database)
    assert exported.exit_code == 0, exported.stderr
    assert MARKER in (tmp_path / "copy.txt").read_text()
    inventory = cli("--output", "json", "db", "encryption", "inventory", "--db", database).json()
    assert inventory["data"]["clearValues"] == 0 and inventory["data"]["blobs"] == {
        "clear": 0,
        "k1": 1,
    }

    # Without the key: metadata lists, payloads refuse with exit 5 naming the key.
    monkeypatch.delenv("K1")
    listed = cli("--output", "json", "runs", "list", "--db", database)
    assert listed.exit_code == 0 and run_id in listed.stdout
    refused = cli("--output", "json", "inspect", run_id, "--db", database)
    assert refused.exit_code == 5 and "Traceback" not in refused.stderr
    error = refused.error_json()["error"]
    assert error["code"] == "encryption.key_missing" and "'k1'" in error["message"]
    # A wrong key is told apart from a missing one.
    monkeypatch.setenv("K1", _key())
    wrong = cli("--output", "json", "inspect", run_id, "--db", database)
    assert wrong.exit_code == 5 and wrong.error_json()["error"]["code"] == "encryption.key_mismatch"


def _identities(database: str) -> dict[str, Any]:
    (run,) = rows(database, "SELECT id, plan_digest, workflow_digest FROM runs")
    return {
        "plan": run[1:],
        "tasks": rows(
            database,
            "SELECT task_id, definition_fingerprint, input_digest, output_digest, "
            "state_delta_digest, output_contract_fingerprint FROM tasks ORDER BY task_id",
        ),
        "effects": rows(
            database,
            "SELECT task_id, ordinal, operation, input_digest FROM effects "
            "ORDER BY task_id, ordinal",
        ),
        "blobs": rows(database, "SELECT digest, size_bytes FROM artifact_blobs ORDER BY digest"),
    }


def test_identities_are_the_same_with_encryption_on_and_off(
    cli: Any, database: str, workflow: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Digests are computed on canonical plaintext: sealing changes none of them, and the
    audit chain of a sealed run verifies (with the key)."""
    clear_db = str(tmp_path / "clear" / "r.db")
    (tmp_path / "clear").mkdir()
    monkeypatch.setenv("K1", _key())
    assert cli("db", "migrate", "--db", database).exit_code == 0
    assert (
        cli(
            "db", "encryption", "enable", "--key-id", "k1", "--key-env", "K1", "--db", database
        ).exit_code
        == 0
    )
    sealed_run = _roll(cli, database, workflow, MARKER)
    (tmp_path / "elsewhere").mkdir()
    _roll(cli, clear_db, workflow, MARKER, str(tmp_path / "elsewhere"))
    assert _identities(database) == _identities(clear_db)
    verified = cli("audit", sealed_run, "--verify", "--db", database)
    assert verified.exit_code == 0, verified.stderr


def test_enable_killed_half_way_then_run_again_loses_nothing(
    cli: Any, database: str, workflow: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = _roll(cli, database, workflow, MARKER)
    before = cli("--output", "json", "inspect", run_id, "--db", database)
    assert before.exit_code == 0
    monkeypatch.setenv("K1", _key())
    env = {"AGENTCTL_FAULT": "encryption.batch:3"}
    if "://" in database:
        env["AGENTCTL_ARTIFACT_ROOT"] = str(tmp_path / "artifacts")
    enable = ("db", "encryption", "enable", "--key-id", "k1", "--key-env", "K1", "--db", database)
    killed = _agentctl(*enable, env=env)  # SIGKILLs itself after its third batch committed
    assert killed.returncode == -9, killed.stderr
    half = cli("--output", "json", "db", "encryption", "inventory", "--db", database).json()
    assert half["data"]["clearValues"] > 0 and half["data"]["sealedValues"] > 0
    # Half-sealed, the database reads as before (clear and sealed values side by side).
    middle = cli("--output", "json", "inspect", run_id, "--db", database)
    assert middle.exit_code == 0 and middle.json()["data"] == before.json()["data"]
    finished = cli(*enable)
    assert finished.exit_code == 0, finished.stderr
    after = cli("--output", "json", "db", "encryption", "inventory", "--db", database).json()
    assert after["data"]["clearValues"] == 0
    assert MARKER not in _stored_text(database)
    shown = cli("--output", "json", "inspect", run_id, "--db", database)
    assert shown.json()["data"] == before.json()["data"]


def test_rotate_then_the_old_key_can_go(
    cli: Any, database: str, workflow: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("K1", _key())
    assert cli("db", "migrate", "--db", database).exit_code == 0
    assert (
        cli(
            "db", "encryption", "enable", "--key-id", "k1", "--key-env", "K1", "--db", database
        ).exit_code
        == 0
    )
    run_id = _roll(cli, database, workflow, MARKER)
    shown = cli("--output", "json", "inspect", run_id, "--db", database).json()["data"]
    monkeypatch.setenv("K2", _key())
    # The old key offered under another name, as during a move between hosts.
    monkeypatch.setenv("AGENTCTL_ENCRYPTION_KEYS", f"k1={os.environ['K1']}")
    monkeypatch.delenv("K1")
    rotated = cli(
        "--output",
        "json",
        "db",
        "encryption",
        "rotate",
        "--key-id",
        "k2",
        "--key-env",
        "K2",
        "--db",
        database,
    )
    assert rotated.exit_code == 0, rotated.stderr
    assert rotated.json()["data"]["otherKeyValuesLeft"] == 0
    monkeypatch.delenv("AGENTCTL_ENCRYPTION_KEYS")
    again = cli("--output", "json", "inspect", run_id, "--db", database)
    assert again.exit_code == 0, again.stderr
    assert again.json()["data"] == shown
    inventory = cli("--output", "json", "db", "encryption", "inventory", "--db", database).json()
    assert [k["status"] for k in inventory["data"]["keys"]] == ["retired", "active"]
    assert all(set(c["sealed"]) <= {"k2"} for c in inventory["data"]["columns"])


def test_without_the_key_a_paused_run_lists_and_nothing_is_half_written(
    cli: Any, database: str, workflow: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("K1", _key())
    assert cli("db", "migrate", "--db", database).exit_code == 0
    enable = ("db", "encryption", "enable", "--key-id", "k1", "--key-env", "K1", "--db", database)
    assert cli(*enable).exit_code == 0
    paused = cli(
        "--output", "json", "roll", workflow, "--input", f"secret={MARKER}", "--db", database
    )
    assert paused.exit_code == 3
    run_id, (question,) = paused.json()["data"]["runId"], paused.json()["data"]["pendingApprovals"]
    before = rows(database, "SELECT status, owner_token, updated_at FROM runs")
    monkeypatch.delenv("K1")
    listed = cli("--output", "json", "runs", "list", "--db", database)
    assert listed.exit_code == 0, listed.stderr
    assert listed.json()["data"]["runs"][0]["waitingApprovals"] == 1
    answered = cli("--output", "json", "approvals", "answer", question, '"x"', "--db", database)
    assert answered.exit_code == 5
    assert answered.error_json()["error"]["code"] == "encryption.key_missing"
    resumed = cli("--output", "json", "resume", run_id, "--db", database)
    assert resumed.exit_code == 5 and "Traceback" not in resumed.stderr
    assert rows(database, "SELECT status FROM approvals") == [("pending",)]
    assert rows(database, "SELECT status, owner_token, updated_at FROM runs") == before
