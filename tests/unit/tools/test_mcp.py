"""mcp.call against a real MCP server (official SDK) over stdio and Streamable HTTP."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentctl.signals import OutcomeUnknown, TaskFailure
from agentctl.tools.mcp import call_mcp_tool, list_mcp_tools

SERVER = Path(__file__).parents[2] / "fixtures" / "protocol_servers" / "mcp_server.py"
PYTHON = sys.executable
ALLOW = [os.path.basename(PYTHON)]
TOKEN = "Bearer test-token-123"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class HttpServer:
    def __init__(self, url: str, log: Path) -> None:
        self.url = url
        self.log = log

    def calls(self, tool: str) -> int:
        if not self.log.exists():
            return 0
        return self.log.read_text().splitlines().count(tool)


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    log = tmp_path_factory.mktemp("mcp-http") / "calls.log"
    port = _free_port()
    token = TOKEN.removeprefix("Bearer ")
    child = subprocess.Popen(
        [PYTHON, str(SERVER), "http", str(port), str(log), token],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or child.poll() is not None:
                    raise RuntimeError("the MCP test server did not start") from None
                time.sleep(0.05)
        yield HttpServer(f"http://127.0.0.1:{port}/mcp", log)
    finally:
        child.terminate()
        child.wait(timeout=10)


def _http(server: HttpServer) -> dict[str, Any]:
    return {"url": server.url, "headers": {"Authorization": {"env": "MCP_TOKEN"}}}


def _stdio(log: Path) -> dict[str, Any]:
    return {"command": PYTHON, "args": [str(SERVER), "stdio", str(log)]}


def _call(server: dict[str, Any], tool: str, arguments: dict[str, Any], **kwargs: Any) -> Any:
    options: dict[str, Any] = {
        "idempotency": "unknown",
        "environ": {"MCP_TOKEN": TOKEN},
        "timeout_seconds": 10,
        "process_allowlist": ALLOW,
    }
    options.update(kwargs)
    return asyncio.run(call_mcp_tool(server, tool, arguments, **options))


def test_http_structured_content_is_preferred(http_server: HttpServer) -> None:
    assert _call(_http(http_server), "add", {"a": 2, "b": 40}) == {"sum": 42}


def test_http_content_list_when_no_structured_content(http_server: HttpServer) -> None:
    out = _call(_http(http_server), "shout", {"text": "hi"})
    assert out == [{"type": "text", "text": "HI"}]


def test_http_remote_is_error_fails_with_the_remote_text(http_server: HttpServer) -> None:
    with pytest.raises(TaskFailure) as caught:
        _call(_http(http_server), "broken", {"reason": "disk on fire"})
    assert caught.value.code == "mcp.tool_error"
    assert "broken on purpose: disk on fire" in caught.value.message
    assert not caught.value.retryable


def test_http_header_secret_is_required_and_never_echoed(http_server: HttpServer) -> None:
    with pytest.raises(TaskFailure) as wrong:
        _call(_http(http_server), "add", {"a": 1, "b": 1}, environ={"MCP_TOKEN": "Bearer nope"})
    assert wrong.value.code == "mcp.handshake_failed"
    assert "nope" not in wrong.value.message
    with pytest.raises(TaskFailure) as missing:
        _call(_http(http_server), "add", {"a": 1, "b": 1}, environ={})
    assert missing.value.code == "secret.unresolved"


def test_http_hang_with_unknown_idempotency_is_uncertain_and_sent_once(
    http_server: HttpServer,
) -> None:
    before = http_server.calls("hang")
    with pytest.raises(OutcomeUnknown) as caught:
        _call(_http(http_server), "hang", {"seconds": 30}, timeout_seconds=2)
    assert "forbids resending" in caught.value.message
    assert caught.value.details == {"kind": "timeout", "tool": "hang", "idempotency": "unknown"}
    assert http_server.calls("hang") == before + 1


def test_http_hang_with_idempotent_call_reconnects_once_then_fails(
    http_server: HttpServer,
) -> None:
    before = http_server.calls("hang")
    with pytest.raises(TaskFailure) as caught:
        _call(_http(http_server), "hang", {"seconds": 30}, timeout_seconds=2, idempotency="keyed")
    assert caught.value.code == "mcp.timeout"
    assert caught.value.details == {"attempts": 2, "idempotency": "keyed"}
    assert http_server.calls("hang") == before + 2


def test_http_idempotent_call_answered_after_the_reconnect_returns_that_answer(
    http_server: HttpServer,
) -> None:
    out = _call(_http(http_server), "flaky", {"key": "k1"}, timeout_seconds=2, idempotency="pure")
    assert out == {"key": "k1", "answeredOnCall": "2"}
    assert http_server.calls("flaky:k1") == 2


def test_http_list_tools_offers_name_description_and_schema(http_server: HttpServer) -> None:
    tools = asyncio.run(
        list_mcp_tools(_http(http_server), environ={"MCP_TOKEN": TOKEN}, timeout_seconds=10)
    )
    by_name = {tool["name"]: tool for tool in tools}
    assert set(by_name) == {"add", "shout", "broken", "hang", "flaky", "die"}
    assert by_name["add"]["description"].startswith("Add two integers")
    assert by_name["add"]["inputSchema"]["required"] == ["a", "b"]
    assert set(by_name["add"]) == {"name", "description", "inputSchema"}


def test_refused_connection_is_a_retryable_failure() -> None:
    server = {"url": f"http://127.0.0.1:{_free_port()}/mcp"}
    with pytest.raises(TaskFailure) as caught:
        _call(server, "add", {"a": 1, "b": 2})
    assert caught.value.code == "mcp.unavailable"
    assert caught.value.retryable


def test_stdio_call_returns_structured_content(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    assert _call(_stdio(log), "add", {"a": 1, "b": 2}) == {"sum": 3}
    assert log.read_text().splitlines() == ["add"]


def test_stdio_server_that_exits_before_the_handshake_is_retryable(tmp_path: Path) -> None:
    server = {"command": PYTHON, "args": ["-c", "pass"]}
    with pytest.raises(TaskFailure) as caught:
        _call(server, "add", {})
    assert caught.value.code == "mcp.unavailable"
    assert caught.value.retryable


def test_stdio_command_must_be_allowed(tmp_path: Path) -> None:
    with pytest.raises(TaskFailure) as caught:
        _call(_stdio(tmp_path / "calls.log"), "add", {}, process_allowlist=["node"])
    assert caught.value.code == "policy.process_not_allowed"
    assert not (tmp_path / "calls.log").exists()


def test_stdio_connection_lost_after_send_is_uncertain(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    with pytest.raises(OutcomeUnknown) as caught:
        _call(_stdio(log), "die", {})
    assert caught.value.details["kind"] == "connection_lost"
    assert log.read_text().splitlines() == ["die"]


def test_stdio_connection_lost_on_pure_call_is_resent_exactly_once(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    with pytest.raises(TaskFailure) as caught:
        _call(_stdio(log), "die", {}, idempotency="pure")
    assert caught.value.code == "mcp.connection_lost"
    assert log.read_text().splitlines() == ["die", "die"]


def test_http_other_negotiated_version_fails_before_the_call(http_server: HttpServer) -> None:
    before = http_server.calls("add")
    server = {**_http(http_server), "protocolVersion": "2025-06-18"}
    with pytest.raises(TaskFailure) as caught:
        _call(server, "add", {"a": 1, "b": 2})
    assert caught.value.code == "mcp.protocol_version"
    assert "negotiated protocol version `2025-11-25`" in caught.value.message
    assert http_server.calls("add") == before


def test_http_modern_protocol_version_is_adopted_directly(http_server: HttpServer) -> None:
    server = {**_http(http_server), "protocolVersion": "2026-07-28"}
    assert _call(server, "add", {"a": 5, "b": 5}) == {"sum": 10}


def test_importing_the_clients_does_not_import_the_sdks() -> None:
    code = (
        "import sys, agentctl.tools.mcp, agentctl.tools.a2a, agentctl.tools.extension;"
        "print(sorted(m for m in ('mcp', 'httpx', 'httpx2', 'jsonschema') if m in sys.modules))"
    )
    done = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
