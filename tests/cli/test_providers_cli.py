"""providers inspect and auth check: secrets resolved, never printed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.llm_servers.openai_wire import responses_body
from tests.fixtures.llm_servers.server import JsonReply, LoopbackServer

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: auth}}
spec:
  policy: {{networkAllowlist: [127.0.0.1]}}
  providers:
    remote: {{kind: openai, endpoint: "{endpoint}", credential: {{env: AGENTCTL_TEST_KEY}}}}
  agents:
    helper: {{provider: remote, model: small, instructions: hi}}
  tasks:
    - {{id: ask, uses: "agent:helper", with: {{prompt: hello}}}}
"""

SECRET = "sk-very-secret-value-123"


def _write(tmp_path: Path, endpoint: str) -> Path:
    path = tmp_path / "wf.yaml"
    path.write_text(WORKFLOW.format(endpoint=endpoint))
    return path


def test_providers_inspect(cli: Any, tmp_path: Path) -> None:
    path = _write(tmp_path, "http://127.0.0.1:9/v1/responses")
    result = cli("--output", "json", "providers", "inspect", path)
    assert result.exit_code == 0, result.stderr
    (provider,) = result.json()["data"]["providers"]
    assert provider["name"] == "remote" and provider["kind"] == "openai"
    assert "text" in provider["required"]


def test_auth_check_prints_sources_and_digests_only(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, "http://127.0.0.1:9/v1/responses")
    missing = cli("--output", "json", "auth", "check", path)
    assert missing.exit_code == 6
    assert missing.error_json()["error"]["code"] == "provider.credential_missing"
    monkeypatch.setenv("AGENTCTL_TEST_KEY", SECRET)
    for mode in ("json", "human"):
        result = cli("--output", mode, "auth", "check", path)
        assert result.exit_code == 0, result.stderr
        assert SECRET not in result.stdout + result.stderr
    import hashlib

    digest = hashlib.sha256(SECRET.encode()).hexdigest()
    assert digest[:12] in cli("auth", "check", path).stdout


def test_auth_check_smoke_request(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTCTL_TEST_KEY", SECRET)
    with LoopbackServer() as server:
        server.script(JsonReply(responses_body(text="OK", response_id="resp_1")))
        path = _write(tmp_path, server.url("/v1/responses"))
        ok = cli("--output", "json", "auth", "check", path, "--smoke")
        assert ok.exit_code == 0, ok.stderr
        assert ok.json()["data"]["providers"][0]["smoke"]["finishReason"] == "complete"
        assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
        server.script(JsonReply({"error": {"message": "bad key"}}, status=401))
        failed = cli("--output", "json", "auth", "check", path, "--smoke")
    assert failed.exit_code == 6
    assert failed.error_json()["error"]["code"] == "provider.smoke_failed"
    assert SECRET not in failed.stdout + failed.stderr


def test_smoke_openai_sends_one_bounded_request_to_its_base_url(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only loopback is ever contacted: the base URL points at a local stand-in throughout.
    with LoopbackServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url("/v1"))
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.delenv("OPENAI_MODEL", raising=False)
        without_live = cli("--output", "json", "providers", "smoke-openai")
        assert without_live.exit_code == 2
        keyless = cli("--output", "json", "providers", "smoke-openai", "--live")
        assert keyless.exit_code == 6
        assert keyless.error_json()["error"]["code"] == "provider.credential_missing"
        assert server.requests == []
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        server.script(JsonReply(responses_body(text="OK", response_id="resp_1")))
        ok = cli("--output", "json", "providers", "smoke-openai", "--live", "--model", "tiny")
        assert ok.exit_code == 0, ok.stderr
        assert ok.json()["kind"] == "LiveProviderSmoke"
        data = ok.json()["data"]
        assert (data["model"], data["finishReason"]) == ("tiny", "complete")
        (request,) = server.requests
        assert request.path == "/v1/responses"
        assert request.headers["authorization"] == f"Bearer {SECRET}"
        assert request.json["model"] == "tiny"
        assert request.json["max_output_tokens"] == 16
        server.script(JsonReply({"error": {"message": "bad key"}}, status=401))
        failed = cli("--output", "json", "providers", "smoke-openai", "--live")
    assert failed.exit_code == 6
    assert failed.error_json()["error"]["code"] == "provider.smoke_failed"
    assert SECRET not in failed.stdout + failed.stderr
