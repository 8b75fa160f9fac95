"""`agentctl schedule` and `agentctl daemon --once --now`: slots fire once, by their
catch-up and overlap policies, on real databases with real child processes."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

TICK = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: tick, description: checks a flag}
spec:
  inputs: {ok: true}
  actions:
    check: {kind: builtin.assert}
  tasks:
    - id: check
      uses: action:check
      with: {that: "${{ inputs.ok }}"}
"""

HOLD = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: hold}
spec:
  actions:
    hold: {kind: builtin.pause}
  tasks:
    - id: hold
      uses: action:hold
"""

ASK = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: asking}
spec:
  actions:
    ask: {kind: builtin.ask}
    set: {kind: builtin.assign}
  tasks:
    - id: env
      uses: action:ask
      with: {prompt: "Deploy where?", choices: [staging, production]}
    - id: use
      uses: action:set
      needs: [env]
      with: {target: "${{ tasks.env.output.answer }}"}
"""


@pytest.fixture
def db(database: str) -> str:
    """Every schedule test runs on a SQLite file and on PostgreSQL."""
    return database


def _workflow(name: str, text: str) -> Path:
    Path("workflows").mkdir(exist_ok=True)
    path = Path("workflows") / f"{name}.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def _show(cli: Any, db: str, name: str) -> dict[str, Any]:
    result = cli("--output", "json", "schedule", "show", name, "--db", db)
    assert result.exit_code == 0, result.stderr
    return dict(result.json()["data"])


def _tick(cli: Any, db: str, now: str) -> dict[str, Any]:
    result = cli("--output", "json", "daemon", "--once", "--now", now, "--db", db)
    assert result.exit_code == 0, result.stderr
    return dict(result.json()["data"])


def _runs(cli: Any, db: str) -> list[dict[str, Any]]:
    return list(cli("--output", "json", "runs", "list", "--db", db).json()["data"]["runs"])


def test_add_refuses_a_broken_workflow_and_bad_options(cli: Any, db: str) -> None:
    Path("workflows").mkdir()
    Path("workflows/broken.yaml").write_text("apiVersion: agentctl.dev/v1\nkind: Workflow\n")
    _workflow("tick", TICK)
    broken = cli("--output", "json", "schedule", "add", "b", "broken", "--every", "1h", "--db", db)
    assert broken.exit_code == 2 and broken.error_json()["error"]["code"] == "workflow.invalid"
    bad_cron = cli("schedule", "add", "c", "tick", "--cron", "0 25 * * *", "--db", db)
    assert bad_cron.exit_code == 2 and "--cron" in bad_cron.stderr
    both = cli("schedule", "add", "c", "tick", "--cron", "0 2 * * *", "--every", "1h", "--db", db)
    assert both.exit_code == 2 and "exactly one" in both.stderr
    zone = cli("schedule", "add", "c", "tick", "--every", "1h", "--timezone", "X/Y", "--db", db)
    assert zone.exit_code == 2 and "X/Y" in zone.stderr
    policy = cli("schedule", "add", "c", "tick", "--every", "1h", "--overlap", "wait", "--db", db)
    assert policy.exit_code == 2 and "--overlap" in policy.stderr
    listed = cli("--output", "json", "schedule", "list", "--db", db).json()["data"]
    assert listed["schedules"] == []


def test_lifecycle_add_list_show_pause_resume_remove(cli: Any, db: str) -> None:
    _workflow("tick", TICK)
    added = cli(
        "--output", "json", "schedule", "add", "nightly", "tick", "--cron", "0 2 * * *",
        "--timezone", "Europe/Paris", "--input", "ok=true", "--jitter", "60s", "--db", db,
    )  # fmt: skip
    assert added.exit_code == 0, added.stderr
    data = added.json()["data"]
    assert data["workflowFile"] == str(Path("workflows/tick.yaml").resolve())
    assert data["inputs"] == {"ok": True} and data["jitterSeconds"] == 60
    assert data["catchUp"] == "latest" and data["overlap"] == "skip"
    again = cli(
        "--output", "json", "schedule", "add", "nightly", "tick", "--every", "1h", "--db", db
    )
    assert again.exit_code == 2 and again.error_json()["error"]["code"] == "schedule.exists"
    names = [s["name"] for s in cli("--output", "json", "schedule", "list", "--db", db).json()[
        "data"]["schedules"]]  # fmt: skip
    assert names == ["nightly"]
    paused = cli("--output", "json", "schedule", "pause", "nightly", "--db", db).json()["data"]
    assert paused["paused"] is True and paused["nextSlot"] is None
    resumed = cli("--output", "json", "schedule", "resume", "nightly", "--db", db).json()["data"]
    assert resumed["paused"] is False and resumed["nextSlot"] is not None
    assert cli("schedule", "remove", "nightly", "--db", db).exit_code == 0
    missing = cli("--output", "json", "schedule", "show", "nightly", "--db", db)
    assert missing.exit_code == 5
    assert missing.error_json()["error"]["code"] == "schedule.not_found"


def test_spring_forward_slot_fires_once_and_links_its_run(cli: Any, db: str) -> None:
    _workflow("tick", TICK)
    cli(
        "schedule", "add", "nightly", "tick", "--cron", "30 2 * * *", "--timezone",
        "Europe/Paris", "--start", "2026-03-28T12:00:00Z", "--db", db,
    )  # fmt: skip
    # 02:30 does not exist in Paris on 2026-03-29: the slot is 03:30 CEST, 01:30Z.
    assert _tick(cli, db, "2026-03-29T01:29:59Z")["fired"] == []
    first = _tick(cli, db, "2026-03-29T01:30:00Z")
    assert [f["slot"] for f in first["fired"]] == ["2026-03-29T01:30:00Z"]
    run_id = first["fired"][0]["runId"]
    assert first["runs"] == [
        {"runId": run_id, "exitCode": 0, "log": first["runs"][0]["log"], "state": "succeeded"}
    ]
    # The same moment again, and a later one before the next slot: nothing fires twice.
    assert _tick(cli, db, "2026-03-29T01:30:00Z")["fired"] == []
    assert _tick(cli, db, "2026-03-29T20:00:00Z")["fired"] == []
    (firing,) = _show(cli, db, "nightly")["firings"]
    assert firing["state"] == "started" and firing["runId"] == run_id
    assert [r["runId"] for r in _runs(cli, db)] == [run_id]
    inspected = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]
    assert inspected["run"]["state"] == "succeeded"
    assert inspected["run"]["startedBy"] == {
        "schedule": "nightly",
        "slot": "2026-03-29T01:30:00Z",
        "trigger": "cron",
    }
    human = cli("inspect", run_id, "--db", db).stdout
    assert "started by schedule nightly slot 2026-03-29T01:30:00Z" in human
    by_hand = cli("--output", "json", "roll", "tick", "--db", db).json()["data"]["runId"]
    assert (
        cli("--output", "json", "inspect", by_hand, "--db", db).json()["data"]["run"]["startedBy"]
        is None
    )
    listed = cli("--output", "json", "runs", "list", "--schedule", "nightly", "--db", db)
    assert [r["runId"] for r in listed.json()["data"]["runs"]] == [run_id]


@pytest.mark.slow
def test_catch_up_latest_all_and_skip(cli: Any, db: str) -> None:
    _workflow("tick", TICK)
    start = "2026-05-01T00:00:00Z"
    for name, policy in (("latest", "latest"), ("all", "all"), ("skip", "skip")):
        result = cli(
            "schedule", "add", name, "tick", "--every", "1h", "--start", start,
            "--catch-up", policy, "--max-catch-up", "3", "--overlap", "allow", "--db", db,
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
    # Five slots (01:00 .. 05:00) passed while no daemon ran.
    report = _tick(cli, db, "2026-05-01T05:30:00Z")
    fired = sorted((f["schedule"], f["slot"][11:16]) for f in report["fired"])
    assert fired == [("all", "03:00"), ("all", "04:00"), ("all", "05:00"), ("latest", "05:00")]
    assert all(run["state"] == "succeeded" for run in report["runs"])
    latest = _show(cli, db, "latest")
    assert latest["missed"] == 4 and latest["firings"][0]["missedBefore"] == 4
    assert _show(cli, db, "all")["missed"] == 2
    skip = _show(cli, db, "skip")
    assert skip["firings"] == [] and skip["missed"] == 5
    # Under skip, a slot met on time (within --grace) fires.
    on_time = _tick(cli, db, "2026-05-01T06:00:30Z")
    assert ("skip", "06:00") in {(f["schedule"], f["slot"][11:16]) for f in on_time["fired"]}


def test_overlap_skip_records_the_slot_and_queue_waits(cli: Any, db: str) -> None:
    _workflow("hold", HOLD)
    for name, policy in (("skipper", "skip"), ("queuer", "queue")):
        cli(
            "schedule", "add", name, "hold", "--every", "1h", "--overlap", policy,
            "--start", "2026-05-01T00:00:00Z", "--db", db,
        )  # fmt: skip
    first = _tick(cli, db, "2026-05-01T01:00:00Z")
    assert {r["state"] for r in first["runs"]} == {"paused"}
    held = {f["schedule"]: f["runId"] for f in first["fired"]}
    second = _tick(cli, db, "2026-05-01T02:00:00Z")
    assert second["fired"] == []
    skipped = _show(cli, db, "skipper")["firings"][0]
    assert skipped["slot"] == "2026-05-01T02:00:00Z" and skipped["state"] == "skipped"
    assert held["skipper"] in skipped["reason"]
    queuer = _show(cli, db, "queuer")
    assert len(queuer["firings"]) == 1 and queuer["cursor"] == "2026-05-01T01:00:00Z"
    # The parked run ends: the queued slot fires on the next tick.
    assert cli("resume", held["queuer"], "--db", db).exit_code == 0
    third = _tick(cli, db, "2026-05-01T02:00:10Z")
    assert [(f["schedule"], f["slot"]) for f in third["fired"]] == [
        ("queuer", "2026-05-01T02:00:00Z")
    ]


def test_slot_of_a_workflow_broken_since_is_recorded_failed(cli: Any, db: str) -> None:
    path = _workflow("tick", TICK)
    cli("schedule", "add", "n", "tick", "--every", "1h", "--start", "2026-05-01T00:00:00Z",
        "--db", db)  # fmt: skip
    path.write_text("apiVersion: agentctl.dev/v1\nkind: Workflow\n")
    report = _tick(cli, db, "2026-05-01T01:00:00Z")
    assert report["fired"] == [] and report["failed"][0]["slot"] == "2026-05-01T01:00:00Z"
    (firing,) = _show(cli, db, "n")["firings"]
    assert firing["state"] == "failed" and "workflow.invalid" in firing["reason"]
    assert _tick(cli, db, "2026-05-01T01:00:00Z")["failed"] == []
    assert _runs(cli, db) == []


def test_trigger_runs_now_in_the_foreground(cli: Any, db: str) -> None:
    _workflow("tick", TICK)
    cli("schedule", "add", "n", "tick", "--cron", "0 2 * * *", "--db", db)
    result = cli("--output", "json", "schedule", "trigger", "n", "--db", db)
    assert result.exit_code == 0, result.stderr
    run_id = result.json()["data"]["runId"]
    assert result.json()["data"]["state"] == "succeeded"
    (firing,) = _show(cli, db, "n")["firings"]
    assert firing["trigger"] == "manual" and firing["runId"] == run_id


def test_daemon_resumes_parked_runs_once_answered(cli: Any, db: str) -> None:
    path = _workflow("asking", ASK)
    parked = cli("--output", "json", "roll", path, "--db", db).json()["data"]
    (question,) = parked["pendingApprovals"]
    waiting = _tick(cli, db, "2026-05-01T00:00:00Z")
    assert waiting["resumed"] == []  # still waiting for its answer
    assert cli("approvals", "answer", question, '"staging"', "--db", db).exit_code == 0
    report = _tick(cli, db, "2026-05-01T00:00:00Z")
    assert report["resumed"] == [parked["runId"]]
    assert report["runs"][0]["state"] == "succeeded"
    assert _tick(cli, db, "2026-05-01T00:00:00Z")["resumed"] == []


def test_now_needs_once(cli: Any, db: str) -> None:
    result = cli("daemon", "--now", "2026-05-01T00:00:00Z", "--db", db)
    assert result.exit_code == 2 and "--once" in result.stderr


def test_one_undecidable_schedule_does_not_stop_the_others(cli: Any, db: str) -> None:
    from tests.pg.backends import execute

    _workflow("tick", TICK)
    for name in ("good", "bad"):
        cli("schedule", "add", name, "tick", "--every", "1h", "--start",
            "2026-05-01T00:00:00Z", "--db", db)  # fmt: skip
    # A time zone this machine does not know (written by a machine that did).
    execute(db, "UPDATE schedules SET timezone = 'Mars/Base' WHERE name = 'bad'")
    report = _tick(cli, db, "2026-05-01T01:00:00Z")
    assert [f["schedule"] for f in report["fired"]] == ["good"]
    assert (
        report["failed"][0]["schedule"] == "bad" and "Mars/Base" in report["failed"][0]["message"]
    )
    listed = cli("--output", "json", "schedule", "list", "--db", db)
    assert listed.exit_code == 0
    bad = next(s for s in listed.json()["data"]["schedules"] if s["name"] == "bad")
    assert "Mars/Base" in bad["problem"] and bad["nextSlot"] is None


def test_resume_after_pause_counts_the_paused_slots_as_missed(cli: Any, db: str) -> None:
    from datetime import UTC, datetime, timedelta

    _workflow("tick", TICK)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=5, minutes=30)
    cli("schedule", "add", "n", "tick", "--every", "1h", "--start", start.isoformat(),
        "--db", db)  # fmt: skip
    cli("schedule", "pause", "n", "--db", db)
    last_slot = (start + timedelta(hours=5)).isoformat()
    assert _tick(cli, db, last_slot)["fired"] == []  # paused: nothing fires
    # Resuming does not bring back the five slots that passed while paused.
    resumed = cli("--output", "json", "schedule", "resume", "n", "--db", db).json()["data"]
    assert resumed["missed"] == 5 and resumed["firings"] == []
    assert _tick(cli, db, last_slot)["fired"] == []
    next_slot = (start + timedelta(hours=6)).isoformat()
    assert [f["slot"][11:19] for f in _tick(cli, db, next_slot)["fired"]] == [
        (start + timedelta(hours=6)).strftime("%H:%M:%S")
    ]
