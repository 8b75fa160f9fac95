"""Retry and fork of a finished run from the dashboard (Starlette's TestClient, real runs in
real SQLite files, the new run executed by a real child ``agentctl resume``)."""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any
from urllib.parse import unquote

from tests.web.conftest import LEDGER, RELEASE, SHELL_RESULT, Runs

FLAKY = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: flaky}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    count: {kind: builtin.shell.exec, command: sh, args: ["-c", "echo x >> runs.txt"]}
    check:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "if [ -f ready ]; then echo ready; else echo not yet >&2; exit 1; fi"]
  tasks:
    - {id: first, uses: "action:count"}
    - {id: gate, uses: "action:check", needs: [first]}
"""
"""Fails at ``gate`` until the file ``ready`` exists; ``first`` counts its executions."""

CSRF_RE = re.compile(r'name="csrf" value="([0-9a-f]+)"')


def _failed_run(runs: Runs) -> str:
    path = runs.workspace / "flaky.yaml"
    path.write_text(FLAKY)
    result = runs.cli("--output", "json", "roll", path, "--db", runs.db)
    assert result.exit_code == 4, result.stderr
    run_id: str = result.error_json()["error"]["runId"]
    return run_id


def _csrf(page: str) -> str:
    match = CSRF_RE.search(page)
    assert match is not None, "the page has no form with a CSRF token"
    return match.group(1)


def _created(runs: Runs, run_id: str) -> dict[str, Any]:
    with sqlite3.connect(runs.db) as conn:
        (payload,) = conn.execute(
            "SELECT payload_json FROM audit_events WHERE run_id = ? AND kind = 'run.created'",
            (run_id,),
        ).fetchone()
    conn.close()
    created: dict[str, Any] = json.loads(payload)
    return created


def _new_run(response: Any) -> str:
    assert response.status_code == 303, response.text
    location = response.headers["location"]
    match = re.match(r"/runs/([^?]+)\?notice=(.*)", location)
    assert match is not None, location
    return match.group(1)


def test_retry_a_failed_run_from_its_page(runs: Runs, dashboard: Any) -> None:
    failed = _failed_run(runs)
    client = dashboard()
    page = client.get(f"/runs/{failed}").text
    assert 'id="retry-form"' in page and 'id="fork-form"' in page
    assert "flaky.yaml" in page  # the workflow file a retry compiles again
    assert '<option value="from:first">' in page
    (runs.workspace / "ready").write_text("")
    response = client.post(
        f"/runs/{failed}/retry",
        data={"scope": "failed", "reason": "the file is there now", "csrf": _csrf(page)},
        follow_redirects=False,
    )
    retried = _new_run(response)
    assert retried.startswith("retry-")
    assert "the dashboard executes it" in unquote(response.headers["location"])
    client.app.state.adopter.wait()
    inspection = runs.inspect(retried)
    assert inspection["run"]["state"] == "succeeded"
    assert inspection["run"]["mode"] == "retry" and inspection["run"]["sourceRunId"] == failed
    dispositions = {t["taskId"]: t["disposition"] for t in inspection["tasks"]}
    assert dispositions == {"first": "reused", "gate": "executed"}
    # `first` was reused: its command ran once, in the source run only.
    assert (runs.workspace / "runs.txt").read_text() == "x\n"
    created = _created(runs, retried)
    assert created["actor"] == "ui" and created["reason"] == "the file is there now"
    assert created["mode"] == "retry" and created["sourceRunId"] == failed
    shown = client.get(f"/runs/{retried}").text
    assert f'of <a href="/runs/{failed}">' in shown and "s-succeeded" in shown


def test_retry_from_a_chosen_task_reruns_it_and_its_descendants(runs: Runs, dashboard: Any) -> None:
    failed = _failed_run(runs)
    (runs.workspace / "ready").write_text("")
    client = dashboard()
    token = _csrf(client.get(f"/runs/{failed}").text)
    retried = _new_run(
        client.post(
            f"/runs/{failed}/retry",
            data={"scope": "from:first", "csrf": token},
            follow_redirects=False,
        )
    )
    client.app.state.adopter.wait()
    inspection = runs.inspect(retried)
    assert inspection["run"]["state"] == "succeeded"
    assert {t["disposition"] for t in inspection["tasks"]} == {"executed"}
    assert (runs.workspace / "runs.txt").read_text() == "x\nx\n"


def test_fork_runs_every_effect_again(runs: Runs, dashboard: Any) -> None:
    (runs.workspace / "ready").write_text("")
    source = runs.roll(FLAKY, "flaky", expect=0)["runId"]
    client = dashboard()
    page = client.get(f"/runs/{source}").text
    forked = _new_run(
        client.post(
            f"/runs/{source}/fork",
            data={"reason": "again, on purpose", "csrf": _csrf(page)},
            follow_redirects=False,
        )
    )
    assert forked.startswith("fork-")
    client.app.state.adopter.wait()
    assert runs.inspect(forked)["run"]["state"] == "succeeded"
    assert (runs.workspace / "runs.txt").read_text() == "x\nx\n"
    created = _created(runs, forked)
    assert (created["actor"], created["reason"], created["mode"]) == (
        "ui",
        "again, on purpose",
        "fork",
    )


def test_retry_and_fork_refuse_without_csrf_and_for_unfinished_runs(
    runs: Runs, dashboard: Any
) -> None:
    parked = runs.roll(RELEASE, "release")["runId"]
    client = dashboard()
    page = client.get(f"/runs/{parked}").text
    # A parked run is not finished: no buttons, and the operation itself refuses.
    assert 'id="retry-form"' not in page and 'id="fork-form"' not in page
    for action in ("retry", "fork"):
        url = f"/runs/{parked}/{action}"
        assert client.post(url, data={}).status_code == 403
        assert client.post(url, data={"csrf": "0" * 64}).status_code == 403
        crossed = client.post(
            url, data={"csrf": _csrf(page)}, headers={"Origin": "http://evil.example"}
        )
        assert crossed.status_code == 403
        refused = client.post(url, data={"csrf": _csrf(page)})
        assert refused.status_code == 409, refused.text
        assert "recovery operations start from a finished run" in refused.text
    assert client.get(f"/runs/{parked}/retry").status_code == 405
    with sqlite3.connect(runs.db) as conn:
        (count,) = conn.execute("SELECT COUNT(*) FROM runs").fetchone()
    conn.close()
    assert count == 1  # nothing was created


def test_retry_of_a_changed_workflow_is_refused_with_the_repair_hint(
    runs: Runs, dashboard: Any
) -> None:
    failed = _failed_run(runs)
    path = runs.workspace / "flaky.yaml"
    path.write_text(path.read_text().replace("echo ready", "echo READY"))
    client = dashboard()
    token = _csrf(client.get(f"/runs/{failed}").text)
    refused = client.post(f"/runs/{failed}/retry", data={"scope": "failed", "csrf": token})
    assert refused.status_code == 409
    assert "digest changed" in refused.text and "agentctl repair" in refused.text
    path.write_text(FLAKY)
    unknown = client.post(f"/runs/{failed}/retry", data={"scope": "from:nope", "csrf": token})
    assert unknown.status_code == 400 and "nope" in unknown.text


def test_reconciling_what_a_killed_roll_left_adopts_the_run(runs: Runs, dashboard: Any) -> None:
    # Killed after `one`'s command ran but before its outcome was recorded.
    run_id = runs.roll_killed(LEDGER, "ledger", "effect.dispatched")
    assert (runs.workspace / "ledger.txt").read_text() == "a\n"
    assert runs.inspect(run_id)["run"]["state"] == "running"  # under its dead owner
    client = dashboard(adopt=True)
    listing = client.get("/effects").text
    (effect,) = runs.inspect(run_id)["effects"]
    assert effect["status"] == "started" and effect["effectId"] in listing
    done = client.post(
        f"/effects/{effect['effectId']}/reconcile",
        data={
            "status": "applied",
            "reason": "ledger.txt has the line",
            "evidence": "a",
            "result": json.dumps(SHELL_RESULT),
            "csrf": _csrf(listing),
        },
        follow_redirects=False,
    )
    assert done.status_code == 303
    assert f"the dashboard resumed run {run_id}" in unquote(done.headers["location"])
    client.app.state.adopter.wait()
    inspection = runs.inspect(run_id)
    assert inspection["run"]["state"] == "succeeded"
    assert inspection["effects"][0]["reconciliations"][0]["actor"] == "ui"
    # The concluded effect was reused, not run again; the run went on from there.
    assert (runs.workspace / "ledger.txt").read_text() == "a\n"
    assert (runs.workspace / "out" / "two.txt").read_text() == "after a"


def test_without_adoption_the_killed_run_waits_for_a_resume(runs: Runs, dashboard: Any) -> None:
    run_id = runs.roll_killed(LEDGER, "ledger", "effect.dispatched")
    client = dashboard(adopt=False)
    adopter = client.app.state.adopter
    assert adopter.ready(run_id) is False  # its effect is still in doubt
    (effect,) = runs.inspect(run_id)["effects"]
    token = _csrf(client.get("/effects").text)
    done = client.post(
        f"/effects/{effect['effectId']}/reconcile",
        data={"status": "applied", "reason": "seen", "result": json.dumps(SHELL_RESULT)}
        | {"csrf": token},
        follow_redirects=False,
    )
    assert "resumed" not in unquote(done.headers["location"])
    assert adopter.ready(run_id) is True  # nothing left to answer; its owner is gone
    assert runs.inspect(run_id)["run"]["state"] == "running"
    resumed = runs.cli("--output", "json", "resume", run_id, "--db", runs.db)
    assert resumed.exit_code == 0, resumed.stderr
    assert (runs.workspace / "ledger.txt").read_text() == "a\n"
