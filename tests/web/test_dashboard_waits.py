"""Every wait is answerable from the dashboard: a pause step is resumed from the inbox, and a
run whose owner died says so and is adopted (Starlette's TestClient over real runs in real
SQLite files; the resume is a real child ``agentctl resume``)."""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any
from urllib.parse import unquote

from tests.web.conftest import HOLD, LEDGER, RELEASE, RETRIED, SHELL_RESULT, Runs

CSRF_RE = re.compile(r'name="csrf" value="([0-9a-f]+)"')


def _csrf(page: str) -> str:
    match = CSRF_RE.search(page)
    assert match is not None, "the page has no form with a CSRF token"
    return match.group(1)


def _events(runs: Runs, run_id: str, kind: str) -> list[dict[str, Any]]:
    with sqlite3.connect(runs.db) as conn:
        rows = conn.execute(
            "SELECT payload_json FROM audit_events WHERE run_id = ? AND kind = ? ORDER BY seq",
            (run_id, kind),
        ).fetchall()
    conn.close()
    return [json.loads(row[0]) for row in rows]


def test_a_pause_waits_in_the_inbox_and_resume_there_records_actor_ui(
    runs: Runs, dashboard: Any
) -> None:
    run_id = runs.roll(HOLD, "hold")["runId"]
    client = dashboard()
    inbox = client.get("/inbox").text
    card = inbox[inbox.index(f'id="pause-{run_id}-wait"') :].split("</article>")[0]
    assert "Check the staging site, then resume" in card
    assert f'action="/runs/{run_id}/resume"' in card and ">Resume</button>" in card
    page = client.get(f"/runs/{run_id}").text
    assert "Someone to resume it past the pause step wait" in page
    assert f'action="/runs/{run_id}/resume"' in page

    done = client.post(
        f"/runs/{run_id}/resume",
        data={"reason": "staging looks right", "csrf": _csrf(inbox), "next": "/inbox"},
        follow_redirects=False,
    )
    assert done.status_code == 303
    notice = unquote(done.headers["location"])
    assert notice.startswith("/inbox?notice=") and f"{run_id} resumed past wait" in notice
    client.app.state.adopter.wait()
    inspection = runs.inspect(run_id)
    assert inspection["run"]["state"] == "succeeded"
    (released,) = _events(runs, run_id, "pause.released")
    assert released == {"tasks": ["wait"], "actor": "ui", "reason": "staging looks right"}
    assert "No run waits at a pause step." in client.get("/inbox").text


def test_resume_refuses_without_csrf_and_for_a_run_not_at_a_pause(
    runs: Runs, dashboard: Any
) -> None:
    held = runs.roll(HOLD, "hold")["runId"]
    approving = runs.roll(RELEASE, "release")["runId"]
    client = dashboard()
    token = _csrf(client.get("/inbox").text)
    assert client.post(f"/runs/{held}/resume", data={}).status_code == 403
    refused = client.post(f"/runs/{approving}/resume", data={"csrf": token})
    assert refused.status_code == 400
    assert f"run {approving} is paused, not parked at a pause step" in refused.text
    assert "agentctl inspect" in refused.text
    assert _events(runs, held, "pause.released") == []
    assert runs.inspect(held)["run"]["state"] == "paused"


def test_a_killed_run_says_its_owner_is_gone_and_is_adopted_from_its_page(
    runs: Runs, dashboard: Any
) -> None:
    run_id = runs.roll_killed(LEDGER, "ledger", "effect.dispatched")
    client = dashboard(adopt=False)
    page = client.get(f"/runs/{run_id}").text
    assert 'id="owner-gone">owner gone — adopt or reconcile<' in page
    row = client.get("/").text.split(f'<a href="/runs/{run_id}">{run_id}</a>')[0]
    assert row.rsplit("<tr", 1)[1].count("owner gone — adopt or reconcile") == 1
    assert "An operator to say whether builtin.shell.exec of task one happened" in page
    # Its effect is in doubt: it must be concluded before the run can be adopted.
    assert 'id="adopt-form"' not in page
    assert client.post(f"/runs/{run_id}/adopt", data={"csrf": _csrf(page)}).status_code == 400
    (effect,) = runs.inspect(run_id)["effects"]
    client.post(
        f"/effects/{effect['effectId']}/reconcile",
        data={"status": "applied", "reason": "seen", "result": json.dumps(SHELL_RESULT)}
        | {"csrf": _csrf(page)},
    )
    page = client.get(f"/runs/{run_id}").text
    assert 'id="adopt-form"' in page
    adopted = client.post(
        f"/runs/{run_id}/adopt",
        data={"csrf": _csrf(page), "next": f"/runs/{run_id}"},
        follow_redirects=False,
    )
    assert adopted.status_code == 303
    assert f"{run_id} adopted" in unquote(adopted.headers["location"])
    client.app.state.adopter.wait()
    assert runs.inspect(run_id)["run"]["state"] == "succeeded"
    assert (runs.workspace / "ledger.txt").read_text() == "a\n"
    assert "owner gone" not in client.get(f"/runs/{run_id}").text
    assert "owner gone" not in client.get("/").text


def _timeline_rows(page: str) -> dict[str, str]:
    """Each timeline row's HTML by task id."""
    return dict(re.findall(r'<div class="tl-row" data-task="([^"]+)"(.*?)</div>', page, re.S))


def test_the_timeline_draws_a_bar_per_attempt_backoffs_and_waits(
    runs: Runs, dashboard: Any
) -> None:
    run_id = runs.roll(RETRIED, "retried")["runId"]
    client = dashboard()
    rows = _timeline_rows(client.get(f"/runs/{run_id}").text)
    gate = rows["gate"]
    assert ' data-attempts="3"' in gate
    assert gate.count("tl-bar tl-attempt s-failed") == 2
    assert gate.count("tl-bar tl-attempt s-succeeded") == 1
    assert gate.count("tl-bar tl-backoff") == 2 and 'title="backoff 50 ms"' in gate
    # Still parked at the pause: its wait is drawn as a pause, up to now.
    assert "tl-bar tl-pause" in rows["wait"]
    client.post(f"/runs/{run_id}/resume", data={"csrf": _csrf(client.get("/inbox").text)})
    client.app.state.adopter.wait()
    page = client.get(f"/runs/{run_id}").text
    assert "tl-bar tl-pause" in _timeline_rows(page)["wait"]
    markers = re.findall(r'class="tl-marker[^"]*"[^>]*title="([^"]+)"', page)
    assert markers == ["run.created", "run.paused", "run.resumed", "run.succeeded"]
    inspection = runs.inspect(run_id)
    gate_task = next(t for t in inspection["tasks"] if t["taskId"] == "gate")
    assert gate_task["waitingSeconds"] >= 0.1  # two 50 ms backoffs
    wait_task = next(t for t in inspection["tasks"] if t["taskId"] == "wait")
    assert wait_task["waitingSeconds"] is None or wait_task["waitingSeconds"] >= 0
    assert inspection["run"]["waitingSeconds"] > 0


def test_an_approval_wait_is_drawn_on_its_task(runs: Runs, dashboard: Any) -> None:
    data = runs.roll(RELEASE, "release")
    client = dashboard()
    rows = _timeline_rows(client.get(f"/runs/{data['runId']}").text)
    assert "tl-bar tl-approval" in rows["publish"]
    assert 'title="approval wait' in rows["publish"]
    # The foreach children are named by item on the timeline too.
    assert re.search(
        r'title="check--0000-[0-9a-f]{12}">lint</a>',
        "".join(f'<div data-task="{k}"{v}' for k, v in rows.items()),
    )
