"""Helpers for executor tests: write a workflow into a temp workspace and roll it."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "protocol_servers"
TOKEN = "test-token-123"
"""The bearer token the MCP fixture server requires (``Authorization: Bearer TOKEN``)."""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def write_workflow(workspace: Path) -> Any:
    def write(text: str, name: str = "wf.yaml") -> Path:
        path = workspace / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


@pytest.fixture
def mcp_url(tmp_path: Path) -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    child = subprocess.Popen(
        [
            sys.executable,
            str(FIXTURES / "mcp_server.py"),
            "http",
            str(port),
            str(tmp_path / "calls.log"),
            TOKEN,
        ],
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
                assert time.monotonic() < deadline and child.poll() is None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        child.terminate()
        child.wait(timeout=10)
