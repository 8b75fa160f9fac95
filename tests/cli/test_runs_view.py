"""`runs list` as a table: a header, aligned columns, state in colour when asked, start
time with its zone, duration, tasks done of total, approvals waiting; filters that refuse
what they do not know."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

ASK = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: asking}
spec:
  actions:
    ask: {kind: builtin.ask}
    set: {kind: builtin.assign}
  tasks:
    - {id: first, uses: action:set, with: {a: 1}}
    - {id: env, uses: action:ask, needs: [first], with: {prompt: "Where?"}}
"""

DONE = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: quick}
spec:
  actions:
    set: {kind: builtin.assign}
  tasks:
    - {id: only, uses: action:set, with: {a: 1}}
"""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def db(cli: Any, tmp_path: Path) -> Path:
    path = tmp_path / "r.db"
    for name, text in (("ask.yaml", ASK), ("quick.yaml", DONE)):
        workflow = tmp_path / name
        workflow.write_text(text)
        assert cli("roll", workflow, "--db", path).exit_code in (0, 3)
    return path


def test_table_columns_are_aligned_under_a_header(cli: Any, db: Path) -> None:
    result = cli("--color", "never", "runs", "list", "--db", db)
    assert result.exit_code == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    columns = ["RUN", "STATE", "WORKFLOW", "STARTED", "DURATION", "TASKS", "WAITING"]
    assert header.split() == columns
    offsets = [header.index(name) for name in columns]
    assert len(rows) == 2
    quick, asking = rows  # newest first
    for row in rows:
        for offset in offsets[1:]:
            assert row[offset - 2 : offset] == "  " and row[offset] != " ", (row, offset)
    assert quick[offsets[1] :].split()[:2] == ["succeeded", "quick"]
    assert asking[offsets[1] :].split()[:2] == ["paused", "asking"]
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", asking[offsets[3] : offsets[4]].strip()
    )
    assert asking[offsets[5] :].split() == ["1/2", "1"]
    assert quick[offsets[5] :].split() == ["1/1", "0"]
    assert "\x1b" not in result.stdout


def test_colour_follows_color_and_no_color(
    cli: Any, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    always = cli("--color", "always", "runs", "list", "--db", db).stdout
    assert "\x1b[33mpaused\x1b[0m" in always and "\x1b[32msucceeded\x1b[0m" in always
    plain = cli("--color", "never", "runs", "list", "--db", db).stdout
    assert _ANSI.sub("", always) == plain  # colour adds no width
    assert "\x1b" not in cli("runs", "list", "--db", db).stdout  # auto, not a terminal
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b" not in cli("runs", "list", "--db", db).stdout
    assert "\x1b[33mpaused" in cli("--color", "always", "runs", "list", "--db", db).stdout


def test_filters_and_json_fields(cli: Any, db: Path) -> None:
    paused = cli("--output", "json", "runs", "list", "--state", "paused", "--db", db)
    (run,) = paused.json()["data"]["runs"]
    assert run["tasks"] == {"done": 1, "total": 2} and run["waitingApprovals"] == 1
    assert (
        len(
            cli("--output", "json", "runs", "list", "--limit", "1", "--db", db).json()["data"][
                "runs"
            ]
        )
        == 1
    )
    recent = cli("--output", "json", "runs", "list", "--since", "1h", "--db", db)
    assert len(recent.json()["data"]["runs"]) == 2
    future = cli("--output", "json", "runs", "list", "--since", "2999-01-01", "--db", db)
    assert future.json()["data"]["runs"] == []
    assert cli("runs", "list", "--workflow", "quick", "--db", db).stdout.count("quick") == 1
    bad = cli("--output", "json", "runs", "list", "--since", "yesterday", "--db", db)
    assert bad.exit_code == 2 and "30m, 2h or 7d" in bad.error_json()["error"]["hint"]
