"""A planted secret never reaches the database, its WAL, or any CLI output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.llm_servers.openai_wire import responses_body
from tests.fixtures.llm_servers.server import JsonReply, LoopbackServer

SECRET = "planted-secret-9f8e7d6c5b4a"

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: secretive}}
spec:
  policy:
    approval: never
    processAllowlist: [sh]
    environmentAllowlist: [TOKEN, PLANTED_SECRET]
    networkAllowlist: [127.0.0.1]
  providers:
    remote: {{kind: openai, endpoint: "{endpoint}", credential: {{env: PLANTED_SECRET}}}}
  agents:
    helper: {{provider: remote, model: small, instructions: answer briefly}}
  actions:
    leak:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "echo token=$TOKEN; echo also $TOKEN >&2"]
      env: {{TOKEN: {{env: PLANTED_SECRET}}}}
  tasks:
    - {{id: shell, uses: "action:leak"}}
    - {{id: ask, uses: "agent:helper", needs: [shell], with: {{prompt: hello}}}}
"""


def test_secret_is_nowhere(cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANTED_SECRET", SECRET)
    db = tmp_path / "state" / "runtime.db"
    outputs: list[str] = []
    with LoopbackServer() as server:
        server.script(JsonReply(responses_body(text="fine", response_id="r1")))
        path = tmp_path / "wf.yaml"
        path.write_text(WORKFLOW.format(endpoint=server.url("/v1/responses")))
        rolled = cli("--output", "json", "roll", path, "--db", db)
        assert rolled.exit_code == 0, rolled.stderr
        assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    outputs.append(rolled.stdout + rolled.stderr)
    data = rolled.json()["data"]
    assert data["output"]["shell"]["stdout"] == "token=[REDACTED]\n"
    run_id = data["runId"]
    for args in (
        ("inspect", run_id),
        ("audit", run_id),
        ("effects", "list", run_id),
        ("runs", "list"),
        ("auth", "check", path),
    ):
        for mode in ("json", "human"):
            result = (
                cli("--output", mode, *args, "--db", db)
                if args[0] != "auth"
                else cli("--output", mode, *args)
            )
            assert result.exit_code == 0, result.stderr
            outputs.append(result.stdout + result.stderr)
    for text in outputs:
        assert SECRET not in text
    stored = b"".join(p.read_bytes() for p in db.parent.rglob("*") if p.is_file())
    assert stored  # the database (and its WAL) exist and were searched
    assert SECRET.encode() not in stored


FILE_WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: file-secrets}}
spec:
  policy:
    approval: never
    processAllowlist: [sh]
    environmentAllowlist: [TOKEN]
    secretFileRoots: [secrets]
    networkAllowlist: [127.0.0.1]
  providers:
    remote: {{kind: openai, endpoint: "{endpoint}", credential: {{file: {credential}}}}}
  agents:
    helper: {{provider: remote, model: small, instructions: answer briefly}}
  actions:
    leak:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "echo token=$TOKEN"]
      env: {{TOKEN: {{file: api.key}}}}
  tasks:
    - {{id: shell, uses: "action:leak"}}
    - {{id: ask, uses: "agent:helper", needs: [shell], with: {{prompt: hello}}}}
"""


def test_file_secret_references(cli: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "secrets").mkdir(parents=True)
    (ws / "secrets" / "api.key").write_text(SECRET + "\n")
    (ws / "elsewhere.key").write_text("outside")
    db = tmp_path / "r.db"
    with LoopbackServer() as server:
        server.script(JsonReply(responses_body(text="fine", response_id="r1")))
        path = ws / "wf.yaml"
        path.write_text(
            FILE_WORKFLOW.format(endpoint=server.url("/v1/responses"), credential="api.key")
        )
        result = cli("--output", "json", "roll", path, "--db", db)
        assert result.exit_code == 0, result.stderr
        assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert result.json()["data"]["output"]["shell"]["stdout"] == "token=[REDACTED]\n"
    stored = b"".join(p.read_bytes() for p in db.parent.glob("r.db*") if p.is_file())
    assert SECRET.encode() not in stored
    escaped = ws / "escape.yaml"
    escaped.write_text(
        FILE_WORKFLOW.format(
            endpoint="http://127.0.0.1:9/v1/responses", credential="../elsewhere.key"
        )
    )
    refused = cli("--output", "json", "roll", escaped, "--db", tmp_path / "other.db")
    assert refused.exit_code == 3  # a policy error found before the run exists
    assert "secret file" in refused.error_json()["error"]["message"]
