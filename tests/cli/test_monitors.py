"""`agentctl monitor` with `daemon --once --now`: real files, a real loopback HTTP server
and a real command; a change (after its debounce) starts one run with previous/current."""

from __future__ import annotations

import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

REACT = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: react}
spec:
  inputs: {previous: null, current: null, observedAt: null}
  policy: {processAllowlist: [cat]}
  actions:
    check: {kind: builtin.assert}
  tasks:
    - id: check
      uses: action:check
      with: {that: "${{ inputs.observedAt != null }}"}
"""
T0 = "2026-05-01T00:00:00Z"


def _at(minutes: int) -> str:
    return f"2026-05-01T00:{minutes:02d}:00Z"


@pytest.fixture
def db(database: str) -> str:
    """Every monitor test runs on a SQLite file and on PostgreSQL."""
    Path("workflows").mkdir()
    (Path("workflows") / "react.yaml").write_text(textwrap.dedent(REACT))
    return database


def _tick(cli: Any, db: str, now: str) -> dict[str, Any]:
    result = cli("--output", "json", "daemon", "--once", "--now", now, "--db", db)
    assert result.exit_code == 0, result.stderr
    return dict(result.json()["data"])


def _show(cli: Any, db: str, name: str) -> dict[str, Any]:
    result = cli("--output", "json", "monitor", "show", name, "--db", db)
    assert result.exit_code == 0, result.stderr
    return dict(result.json()["data"])


def _add(cli: Any, db: str, *args: str) -> None:
    result = cli("monitor", "add", *args, "--every", "1m", "--start", T0, "--db", db)
    assert result.exit_code == 0, result.stderr


def _inputs(cli: Any, db: str, run_id: str) -> dict[str, Any]:
    inspected = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]
    assert inspected["run"]["state"] == "succeeded"
    return dict(inspected["run"]["inputs"])


def test_file_change_starts_one_run_with_previous_and_current(cli: Any, db: str) -> None:
    docs = Path("docs")
    (docs / "guide").mkdir(parents=True)
    (docs / "guide" / "a.md").write_text("one\n")
    (docs / "notes.txt").write_text("not watched\n")
    _add(cli, db, "docs-changed", "react", "--watch-files", "docs/**/*.md")
    assert _tick(cli, db, _at(1))["fired"] == []  # the first observation is the baseline
    (docs / "notes.txt").write_text("still not watched\n")
    assert _tick(cli, db, _at(2))["fired"] == []
    (docs / "guide" / "a.md").write_text("two\n")
    report = _tick(cli, db, _at(3))
    (fired,) = report["fired"]
    assert fired["slot"] == _at(3) and report["runs"][0]["state"] == "succeeded"
    inputs = _inputs(cli, db, fired["runId"])
    assert inputs["observedAt"] == _at(3)
    assert inputs["current"]["files"] == ["docs/guide/a.md"]
    assert inputs["previous"]["digest"] != inputs["current"]["digest"]
    assert _tick(cli, db, _at(3))["fired"] == []  # the same slot is observed once
    shown = _show(cli, db, "docs-changed")
    assert [o["outcome"] for o in shown["observations"]] == ["changed", "unchanged", "baseline"]
    assert shown["firings"][0]["runId"] == fired["runId"]
    assert shown["firings"][0]["trigger"] == "monitor"


def test_debounce_waits_and_a_flap_does_not_fire(cli: Any, db: str) -> None:
    watched = Path("state.md")
    watched.write_text("a\n")
    _add(cli, db, "settled", "react", "--watch-files", "state.md", "--debounce", "2m")
    _tick(cli, db, _at(1))
    watched.write_text("b\n")
    assert _tick(cli, db, _at(2))["fired"] == []  # pending since 00:02
    watched.write_text("a\n")  # back before the debounce: not a change
    assert _tick(cli, db, _at(3))["fired"] == []
    watched.write_text("c\n")
    assert _tick(cli, db, _at(4))["fired"] == []
    assert _tick(cli, db, _at(5))["fired"] == []
    (fired,) = _tick(cli, db, _at(6))["fired"]
    assert fired["slot"] == _at(6)
    outcomes = [o["outcome"] for o in _show(cli, db, "settled")["observations"]]
    assert outcomes == ["changed", "pending", "pending", "unchanged", "pending", "baseline"]


class _Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def health() -> Iterator[tuple[str, type[_Health]]]:
    handler = type("Health", (_Health,), {"status": 200})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/health", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_http_status_change_fires(cli: Any, db: str, health: tuple[str, type[_Health]]) -> None:
    url, handler = health
    _add(cli, db, "api-down", "react", "--http", url, "--expect-status", "200")
    _tick(cli, db, _at(1))
    assert _tick(cli, db, _at(2))["fired"] == []
    handler.status = 503
    (fired,) = _tick(cli, db, _at(3))["fired"]
    inputs = _inputs(cli, db, fired["runId"])
    assert inputs["previous"] == {"status": 200, "ok": True}
    assert inputs["current"] == {"status": 503, "ok": False}


def test_command_output_change_fires_and_policy_is_enforced(cli: Any, db: str) -> None:
    Path("tag.txt").write_text("v1\n")
    refused = cli("--output", "json", "monitor", "add", "x", "react", "--command", "sh -c true",
                  "--db", db)  # fmt: skip
    assert refused.exit_code == 4
    assert refused.error_json()["error"]["code"] == "policy.process_not_allowed"
    _add(cli, db, "new-tag", "react", "--command", "cat tag.txt")
    _tick(cli, db, _at(1))
    assert _tick(cli, db, _at(2))["fired"] == []
    Path("tag.txt").write_text("v2\n")
    (fired,) = _tick(cli, db, _at(3))["fired"]
    inputs = _inputs(cli, db, fired["runId"])
    assert inputs["current"]["exitCode"] == 0
    assert inputs["current"]["outputDigest"] != inputs["previous"]["outputDigest"]


def test_monitor_and_schedule_commands_keep_to_their_kind(cli: Any, db: str) -> None:
    Path("f.md").write_text("x")
    _add(cli, db, "m", "react", "--watch-files", "f.md")
    assert cli("schedule", "show", "m", "--db", db).exit_code == 2
    assert cli("schedule", "remove", "m", "--db", db).exit_code == 2
    listed = cli("--output", "json", "schedule", "list", "--db", db).json()["data"]
    assert listed["schedules"] == []
    missing = cli("--output", "json", "monitor", "show", "nope", "--db", db)
    assert missing.exit_code == 5
    assert missing.error_json()["error"]["code"] == "monitor.not_found"
    both = cli("monitor", "add", "y", "react", "--watch-files", "f.md", "--http",
               "http://127.0.0.1:1/", "--db", db)  # fmt: skip
    assert both.exit_code == 2 and "exactly one" in both.stderr
    assert cli("monitor", "pause", "m", "--db", db).exit_code == 0
    assert _tick(cli, db, _at(1)) == {
        "fired": [], "skipped": [], "failed": [], "started": [], "resumed": [], "runs": []
    }  # fmt: skip
    assert cli("monitor", "remove", "m", "--db", db).exit_code == 0
