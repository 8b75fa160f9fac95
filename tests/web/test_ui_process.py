"""`agentctl ui` as a real process: it serves, and Ctrl-C stops it even with pages open."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import Any

import httpx

from tests.forkserver import start_agentctl
from tests.web.conftest import RELEASE, Runs


def test_ctrl_c_stops_the_server_while_a_page_holds_its_live_stream(
    runs: Runs, tmp_path: Any
) -> None:
    runs.roll(RELEASE, "release")
    with (tmp_path / "ui.stderr").open("w") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "agentctl", "--output", "jsonl", "ui", "--db", str(runs.db)]
            + ["--port", "0"],
            stdout=subprocess.PIPE,
            stderr=log,
            stdin=subprocess.DEVNULL,
            text=True,
        )
    try:
        assert child.stdout is not None
        url = json.loads(child.stdout.readline())["data"]["url"]
        base, token = url.split("/?token=")
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
            assert client.get("/inbox").status_code == 200
            with client.stream("GET", "/events") as stream:
                lines = stream.iter_lines()
                while not next(lines).startswith("data: "):
                    pass
                child.send_signal(signal.SIGINT)
                # The server ends the stream itself instead of waiting for the page to go.
                for _ in lines:
                    pass
        code = child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        assert child.stdout is not None
        child.stdout.close()
    stderr = (tmp_path / "ui.stderr").read_text()
    assert "Traceback" not in stderr and "graceful shutdown exceeded" not in stderr
    assert code in (0, 130), stderr


def test_a_remote_dashboard_still_checks_host_and_sends_its_security_headers(
    runs: Runs, tmp_path: Any
) -> None:
    """Issue 38 item 12: with --allow-remote the Host check stays on (only the addresses it
    serves and each --allowed-host), and every answer carries CSP and nosniff."""
    runs.roll(RELEASE, "release")
    argv = ["--output", "jsonl", "ui", "--db", str(runs.db)]
    argv += ["--port", "0", "--host", "0.0.0.0", "--allow-remote"]
    argv += ["--allowed-host", "ops.example.test"]
    with (tmp_path / "ui.stderr").open("w") as log:
        child = start_agentctl(
            argv, stdout=subprocess.PIPE, stderr=log.fileno(), stdin=subprocess.DEVNULL
        )
    try:
        assert child.stdout is not None
        data = json.loads(child.stdout.readline())["data"]
        token = data["url"].split("/?token=")[1]
        port = data["port"]
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            served = client.get("/inbox", headers=headers)
            assert served.status_code == 200
            csp = served.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
            assert served.headers["x-content-type-options"] == "nosniff"
            proxied = {**headers, "Host": f"ops.example.test:{port}"}
            assert client.get("/inbox", headers=proxied).status_code == 200
            rebound = client.get("/inbox", headers={**headers, "Host": f"evil.example:{port}"})
            assert rebound.status_code == 403
            assert rebound.headers["x-content-type-options"] == "nosniff"
            assert client.get("/inbox").headers["content-security-policy"] == csp  # 401 too
    finally:
        child.send_signal(signal.SIGINT)
        try:
            child.wait(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            assert child.stdout is not None
            child.stdout.close()
