"""The dashboard's routes against real runs in real SQLite files (Starlette's TestClient)."""

from __future__ import annotations

import json
import re
from typing import Any

from agentctl.web import views
from tests.web.conftest import ASKING, RELEASE, SHAPES, UNCERTAIN, Runs

CSRF_RE = re.compile(r'name="csrf" value="([0-9a-f]+)"')


def _csrf(page: str) -> str:
    match = CSRF_RE.search(page)
    assert match is not None, "the page has no form with a CSRF token"
    return match.group(1)


def _events(runs: Runs, run_id: str, kind: str) -> list[dict[str, Any]]:
    import sqlite3

    with sqlite3.connect(runs.db) as conn:
        rows = conn.execute(
            "SELECT payload_json FROM audit_events WHERE run_id = ? AND kind = ? ORDER BY seq",
            (run_id, kind),
        ).fetchall()
    conn.close()
    import json

    return [json.loads(row[0]) for row in rows]


def test_every_request_needs_the_token(runs: Runs, dashboard: Any) -> None:
    runs.roll(RELEASE, "release")
    client = dashboard(login=False)
    for path in (
        "/",
        "/inbox",
        "/effects",
        "/events",
        "/static/dashboard.css",
        "/runs/x/graph.json",
    ):
        assert client.get(path).status_code == 401, path
    assert client.get("/?token=nope").status_code == 403
    assert client.get("/", headers={"Authorization": "Bearer nope"}).status_code == 403
    assert client.get("/", headers={"Authorization": "Bearer tok"}).status_code == 200
    # The URL's token becomes an HttpOnly, SameSite=Strict cookie; the address loses it.
    first = client.get("/?token=tok&q=a%26b&state=paused", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/?q=a%26b&state=paused"
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert client.get("/inbox").status_code == 200
    client.cookies.clear()
    assert client.get("/inbox").status_code == 401
    assert client.get("/inbox", headers={"Cookie": "agentctl_ui=forged"}).status_code == 403


def test_a_foreign_host_name_is_refused(runs: Runs, dashboard: Any) -> None:
    runs.roll(RELEASE, "release")
    client = dashboard(login=False, allowed_hosts=["127.0.0.1:8765"])
    assert client.get("/?token=tok").status_code == 200
    rebound = client.get("/", headers={"Host": "evil.example:8765"})
    assert rebound.status_code == 403 and "not this dashboard" in rebound.text


def test_a_search_too_long_is_400_not_500(runs: Runs, dashboard: Any) -> None:
    """Issue 38 item 9: SQLite refuses LIKE patterns past 50,000 bytes; the search is bounded."""
    runs.roll(RELEASE, "release")
    client = dashboard()
    refused = client.get("/", params={"q": "x" * 50_000})
    assert refused.status_code == 400
    assert "at most 200" in refused.text
    assert client.get("/", params={"q": "%_" * 100}).status_code == 200


def test_runs_list_filters_and_searches(runs: Runs, dashboard: Any) -> None:
    parked = runs.roll(RELEASE, "release")["runId"]
    asked = runs.roll(ASKING, "asking")["runId"]
    client = dashboard()
    page = client.get("/").text
    assert parked in page and asked in page
    # tasks done/total and the waiting approvals of the parked run
    row = page[page.index(parked) :].split("</tr>")[0]
    assert "5/6" in row and "1 waiting" in row and "release" in row
    assert 'class="badge s-paused"' in page
    only_release = client.get("/?workflow=release").text
    assert parked in only_release and asked not in only_release
    assert asked not in client.get("/?state=succeeded").text
    assert "no runs match" in client.get("/?state=succeeded").text
    searched = client.get("/", params={"q": asked[-12:]}).text
    assert asked in searched and parked not in searched
    # LIKE wildcards in the search are literal characters
    assert "no runs match" in client.get("/", params={"q": "%"}).text


def test_run_page_shows_graph_tasks_effects_and_verified_audit(runs: Runs, dashboard: Any) -> None:
    run_id = runs.roll(RELEASE, "release")["runId"]
    page = dashboard().get(f"/runs/{run_id}").text
    # The graph's document is in the page for the script that draws it (graph.js).
    match = re.search(r'<script type="application/json" id="graph-data">(.*?)</script>', page)
    assert match is not None
    graph = json.loads(match.group(1))
    assert {"id": "publish", "label": "publish", "state": "waiting_for_approval"}.items() <= (
        next(n for n in graph["nodes"] if n["id"] == "publish").items()
    )
    assert '<script src="/static/dagre.min.js" defer></script>' in page
    # A foreach child's row in the task list says which item it is.
    assert re.search(r'<code>check--0000-[0-9a-f]{12}</code> <b class="item">lint</b>', page)
    for task in ("prepare", "check", "publish"):
        assert f'id="task-{task}"' in page
    assert "builtin.write" in page and "write 14 bytes to out/release.txt" in page
    assert 'id="audit-verdict">verified<' in page
    assert "approval.requested" in page and "Cancel run" in page


def _plan(runs: Runs, run_id: str) -> dict[str, Any]:
    """The run's whole compiled plan, as the engine reads it."""
    from agentctl.engine.core.records import load_run
    from agentctl.store.engine import open_store

    with open_store(str(runs.db), create=False) as store, store.read() as conn:
        plan: dict[str, Any] = load_run(conn, run_id, whole=True).plan
    return plan


def test_graph_json_has_the_plans_edges_and_names_children_by_item(
    runs: Runs, dashboard: Any
) -> None:
    run_id = runs.roll(RELEASE, "release")["runId"]
    client = dashboard()
    graph = client.get(f"/runs/{run_id}/graph.json").json()
    plan = runs.inspect(run_id)
    order = [t["taskId"] for t in plan["tasks"]]
    assert [n["id"] for n in graph["nodes"]] == order
    needs = {
        (need, task_id)
        for task_id, task in _plan(runs, run_id)["tasks"].items()
        for need in task["needs"]
    }
    assert {(e["from"], e["to"]) for e in graph["edges"]} == needs
    assert len(graph["edges"]) == len(needs) == 8
    children = [n for n in graph["nodes"] if n["group"] == "check"]
    assert [n["label"] for n in children] == ["lint", "unit", "docs"]
    assert {n["state"] for n in children} == {"succeeded"}
    assert graph["groups"] == [{"id": "check", "kind": "foreach", "label": "check", "size": 3}]
    by_id = {n["id"]: n for n in graph["nodes"]}
    assert by_id["publish"]["state"] == "waiting_for_approval"
    assert by_id["check"] == {
        "id": "check",
        "label": "check",
        "state": "succeeded",
        "kind": "aggregate",
        "group": None,
    }
    missing = client.get("/runs/run-nope/graph.json")
    assert missing.status_code == 404
    assert "run-nope" in missing.json()["error"]["message"]


def test_graph_json_labels_matrix_cells_subworkflow_steps_and_skipped_branches(
    runs: Runs, dashboard: Any
) -> None:
    run_id = runs.roll(SHAPES, "shapes", expect=0)["runId"]
    graph = dashboard().get(f"/runs/{run_id}/graph.json").json()
    by_label = {(n["group"], n["label"]): n for n in graph["nodes"]}
    cells = [n["label"] for n in graph["nodes"] if n["group"] == "test"]
    assert cells == ["os=linux, py=3.11", "os=linux, py=3.12", "os=mac, py=3.11", "os=mac, py=3.12"]
    # The sub-workflow's steps nest under its invocation, named by their own ids.
    assert [n["label"] for n in graph["nodes"] if n["group"] == "ship"] == [
        "inputs",
        "build",
        "sign",
    ]
    assert by_label[("ship", "build")]["id"] == "ship--build"
    # The router's branch not taken is drawn as skipped; the taken one ran.
    assert by_label[(None, "thorough")]["state"] == "skipped"
    assert by_label[(None, "quick")]["state"] == "succeeded"
    assert {"from": "pick", "to": "thorough"} in graph["edges"]
    kinds = {g["id"]: (g["kind"], g["size"]) for g in graph["groups"]}
    assert kinds == {"test": ("matrix", 4), "ship": ("subworkflow", 3)}


def test_unknown_run_is_a_404_page_naming_it(runs: Runs, dashboard: Any) -> None:
    runs.roll(RELEASE, "release")
    response = dashboard().get("/runs/run-nope")
    assert response.status_code == 404
    assert "unknown run" in response.text and "run-nope" in response.text


def test_actions_refuse_missing_or_wrong_csrf_and_other_origins(runs: Runs, dashboard: Any) -> None:
    data = runs.roll(RELEASE, "release")
    (approval,) = data["pendingApprovals"]
    client = dashboard()
    url = f"/approvals/{approval}/approve"
    assert client.post(url, data={"reason": "ok"}).status_code == 403
    assert client.post(url, data={"reason": "ok", "csrf": "0" * 64}).status_code == 403
    token = _csrf(client.get("/inbox").text)
    crossed = client.post(
        url, data={"reason": "ok", "csrf": token}, headers={"Origin": "http://evil.example"}
    )
    assert crossed.status_code == 403
    assert client.get(url).status_code == 405
    # None of them decided anything.
    assert runs.inspect(data["runId"])["approvals"][0]["status"] == "pending"


def test_approve_records_actor_ui_and_the_run_is_adopted(runs: Runs, dashboard: Any) -> None:
    data = runs.roll(RELEASE, "release")
    (approval,) = data["pendingApprovals"]
    client = dashboard(adopt=True)
    token = _csrf(client.get("/inbox").text)
    done = client.post(
        f"/approvals/{approval}/approve",
        data={"reason": "release notes checked", "csrf": token, "next": "/inbox"},
        follow_redirects=False,
    )
    assert done.status_code == 303
    assert done.headers["location"].startswith("/inbox?notice=")
    client.app.state.adopter.wait()
    inspection = runs.inspect(data["runId"])
    assert inspection["run"]["state"] == "succeeded"
    (decided,) = inspection["approvals"]
    assert decided["status"] == "approved" and decided["resolver"] == "ui"
    assert decided["reason"] == "release notes checked"
    (event,) = _events(runs, data["runId"], "approval.resolved")
    assert event["actor"] == "ui" and event["approved"] is True
    assert (runs.workspace / "out" / "release.txt").read_text() == "released 1.2.3"
    assert inspection["audit"]["verified"] is True
    # The artifact the approved write produced downloads from the run's page.
    (artifact,) = inspection["artifacts"]
    page = client.get(f"/runs/{data['runId']}").text
    link = f"/runs/{data['runId']}/artifacts/{artifact['digest']}"
    assert link in page
    download = client.get(link)
    assert download.status_code == 200 and download.content == b"released 1.2.3"
    assert "release.txt" in download.headers["content-disposition"]
    assert client.get(f"/runs/{data['runId']}/artifacts/sha256:{'0' * 64}").status_code == 404


def test_without_adoption_the_answer_is_only_recorded(runs: Runs, dashboard: Any) -> None:
    data = runs.roll(RELEASE, "release")
    (approval,) = data["pendingApprovals"]
    client = dashboard(adopt=False)
    token = _csrf(client.get(f"/runs/{data['runId']}").text)
    client.post(f"/approvals/{approval}/approve", data={"reason": "ok", "csrf": token})
    inspection = runs.inspect(data["runId"])
    assert inspection["run"]["state"] == "paused"
    assert inspection["approvals"][0]["status"] == "approved"
    resumed = runs.cli("--output", "json", "resume", data["runId"], "--db", runs.db)
    assert resumed.exit_code == 0, resumed.stderr


def test_reject_needs_a_reason_then_fails_the_run_on_resume(runs: Runs, dashboard: Any) -> None:
    data = runs.roll(RELEASE, "release")
    (approval,) = data["pendingApprovals"]
    client = dashboard(adopt=True)
    token = _csrf(client.get("/inbox").text)
    missing = client.post(f"/approvals/{approval}/reject", data={"reason": " ", "csrf": token})
    assert missing.status_code == 400 and "reason is required" in missing.text
    client.post(f"/approvals/{approval}/reject", data={"reason": "not today", "csrf": token})
    client.app.state.adopter.wait()
    inspection = runs.inspect(data["runId"])
    assert inspection["approvals"][0]["status"] == "rejected"
    assert inspection["run"]["state"] == "failed"


def test_answer_a_question_validated_like_the_cli(runs: Runs, dashboard: Any) -> None:
    data = runs.roll(ASKING, "asking")
    (question,) = data["pendingApprovals"]
    client = dashboard(adopt=True)
    inbox = client.get("/inbox").text
    assert "Deploy where?" in inbox and "<option value='\"staging\"'>" in inbox
    token = _csrf(inbox)
    wrong = client.post(f"/approvals/{question}/answer", data={"value": "moon", "csrf": token})
    assert wrong.status_code == 400 and "choices" in wrong.text
    approving = client.post(f"/approvals/{question}/approve", data={"reason": "x", "csrf": token})
    assert approving.status_code == 400 and "is a question" in approving.text
    client.post(f"/approvals/{question}/answer", data={"value": '"staging"', "csrf": token})
    client.app.state.adopter.wait()
    inspection = runs.inspect(data["runId"])
    assert inspection["approvals"][0]["resolver"] == "ui"
    assert inspection["run"]["state"] == "succeeded"
    assert inspection["run"]["output"]["use"]["output"] == {"target": "staging"}
    assert "No approval or question is pending." in client.get("/inbox").text


def test_reconcile_an_uncertain_effect_from_the_effects_page(runs: Runs, dashboard: Any) -> None:
    data = runs.roll(UNCERTAIN, "slow")
    (effect,) = data["uncertainEffects"]
    client = dashboard(adopt=True)
    listing = client.get("/effects").text
    assert effect["effectId"] in listing and "builtin.shell.exec" in listing
    assert effect["effectId"] in client.get("/inbox").text
    token = _csrf(listing)
    url = f"/effects/{effect['effectId']}/reconcile"
    bad = client.post(url, data={"status": "maybe", "reason": "x", "csrf": token})
    assert bad.status_code == 400 and "Choose a conclusion" in bad.text
    unvalidated = client.post(
        url,
        data={
            "status": "applied",
            "reason": "checked",
            "result": '{"stdout": "x"}',
            "result_schema": '{"type": "object", "required": ["exitCode"]}',
            "csrf": token,
        },
    )
    assert unvalidated.status_code == 400
    assert "The result does not match the schema you gave: &#39;exitCode&#39; is a required" in (
        unvalidated.text
    )
    # Nothing on the refused page names a command-line flag.
    assert "--result" not in unvalidated.text and "--status" not in bad.text
    client.post(
        url,
        data={
            "status": "not_applied",
            "reason": "the process was killed before it wrote anything",
            "evidence": "ps shows no sh; no side effect outside the workspace",
            "csrf": token,
        },
    )
    client.app.state.adopter.wait()
    inspection = runs.inspect(data["runId"])
    first = inspection["effects"][0]
    (conclusion,) = first["reconciliations"]
    assert conclusion["actor"] == "ui" and conclusion["status"] == "not_applied"
    assert conclusion["evidence"].startswith("ps shows no sh")
    assert inspection["run"]["state"] == "succeeded"
    assert "No effect is in doubt." in client.get("/effects").text
    # The conclusion gave the uncertain attempt's worst case back; amounts show in units.
    ledger = {row["resource"]: row for row in inspection["budget"]}
    assert ledger["processOutputBytes"]["reserved"] == 0
    page = client.get(f"/runs/{data['runId']}").text
    assert re.search(
        r'<td title="processOutputBytes">process output</td><td>[\d,]+ bytes</td><td>0 bytes</td>',
        page,
    )


def test_the_reconcile_form_schema_refers_only_inside_itself(
    runs: Runs, dashboard: Any, tmp_path: Any
) -> None:
    """Issue 38 item 2: a `$ref` in the form's schema is refused (400), nothing fetched."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server spelling
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    secret = tmp_path / "secret.json"
    secret.write_text('{"token": "TOPSECRET-9"}')
    try:
        data = runs.roll(UNCERTAIN, "slow")
        (effect,) = data["uncertainEffects"]
        client = dashboard(adopt=False)
        token = _csrf(client.get("/effects").text)
        for ref in (f"http://127.0.0.1:{server.server_address[1]}/s", f"file://{secret}#/x"):
            refused = client.post(
                f"/effects/{effect['effectId']}/reconcile",
                data={
                    "status": "applied",
                    "reason": "checked",
                    "result": '{"exitCode": 0}',
                    "result_schema": json.dumps({"properties": {"exitCode": {"$ref": ref}}}),
                    "csrf": token,
                },
            )
            assert refused.status_code == 400, refused.text
            assert "points outside the schema" in refused.text
            assert "TOPSECRET" not in refused.text
    finally:
        server.shutdown()
        server.server_close()
    assert hits == []


def test_cancel_a_parked_run_is_audited_with_actor_ui(runs: Runs, dashboard: Any) -> None:
    data = runs.roll(RELEASE, "release")
    client = dashboard()
    page = client.get(f"/runs/{data['runId']}").text
    done = client.post(
        f"/runs/{data['runId']}/cancel",
        data={"reason": "wrong version", "csrf": _csrf(page), "next": f"/runs/{data['runId']}"},
    )
    assert done.status_code == 200 and "cancelled" in done.text
    assert runs.inspect(data["runId"])["run"]["state"] == "cancelled"
    (event,) = _events(runs, data["runId"], "run.cancel_requested")
    assert event["actor"] == "ui" and event["reason"] == "wrong version"
    assert "Cancel run" not in client.get(f"/runs/{data['runId']}").text


def test_redirect_after_an_action_stays_on_this_site(runs: Runs, dashboard: Any) -> None:
    data = runs.roll(RELEASE, "release")
    client = dashboard()
    token = _csrf(client.get(f"/runs/{data['runId']}").text)
    done = client.post(
        f"/runs/{data['runId']}/cancel",
        data={"csrf": token, "next": "//evil.example/x"},
        follow_redirects=False,
    )
    assert done.status_code == 303 and done.headers["location"].startswith("/?notice=")


def test_a_run_with_a_thousand_tasks_renders(runs: Runs, dashboard: Any) -> None:
    tasks = "\n".join(
        f"    - {{id: t{i:04d}, uses: 'action:set', with: {{n: {i}}}}}" for i in range(1000)
    )
    text = (
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: wide}\nspec:\n"
        "  actions:\n    set: {kind: builtin.assign}\n  tasks:\n" + tasks + "\n"
    )
    run_id = runs.roll(text, "wide", expect=0)["runId"]
    client = dashboard()
    page = client.get(f"/runs/{run_id}").text
    assert page.count('<details class="task"') == 1000
    assert 'id="task-t0999"' in page
    assert "1000/1000" in client.get("/").text


def test_live_update_stream_announces_the_store_state(runs: Runs, dashboard: Any) -> None:
    runs.roll(RELEASE, "release")
    client = dashboard()
    with client.stream("GET", "/events") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.iter_lines()
        assert next(lines) == "retry: 2000"
        assert next(lines) == ""
        assert next(lines).startswith("data: ")


def _set_owner(runs: Runs, run_id: str, owner: str, lease_expires_at: str) -> None:
    import sqlite3

    with sqlite3.connect(runs.db) as conn:
        conn.execute(
            "UPDATE runs SET owner_id = ?, owner_lease_expires_at = ? WHERE id = ?",
            (owner, lease_expires_at, run_id),
        )


def test_adoption_follows_the_workers_rule_for_an_owner_on_another_host(
    runs: Runs, dashboard: Any
) -> None:
    # An owner on another host cannot be probed: like the daemon and the workers, the
    # dashboard waits for its lease to run out, then adopts (it used to wait forever).
    data = runs.roll(RELEASE, "release")
    run_id = data["runId"]
    (approval,) = data["pendingApprovals"]
    _set_owner(runs, run_id, "elsewhere.invalid:4242:0:abcd", "2999-01-01T00:00:00")
    client = dashboard(adopt=True)
    token = _csrf(client.get(f"/runs/{run_id}").text)
    client.post(f"/approvals/{approval}/approve", data={"reason": "ok", "csrf": token})
    client.app.state.adopter.wait()
    assert runs.inspect(run_id)["run"]["state"] == "paused"
    _set_owner(runs, run_id, "elsewhere.invalid:4242:0:abcd", "2000-01-01T00:00:00")
    assert client.app.state.adopter.maybe_adopt(run_id) is True
    client.app.state.adopter.wait()
    assert runs.inspect(run_id)["run"]["state"] == "succeeded"


def test_a_long_foreach_lists_its_first_children_and_says_how_many_more(
    runs: Runs, dashboard: Any
) -> None:
    """A 400-item foreach: the page lists the first MAX_TASKS_SHOWN tasks and counts the settled
    children left off (``inspect`` has them); the graph folds the group into one box."""
    items = list(range(400))
    text = (
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: long}\nspec:\n"
        "  runtime: {limits: {maxItemsPerExpansion: 400}}\n"
        "  actions:\n    set: {kind: builtin.assign}\n  tasks:\n"
        f"    - id: each\n      uses: action:set\n"
        f"      foreach: {{items: {items}, maxItems: 400}}\n"
        '      with: {n: "${{ vars.item }}"}\n'
    )
    run_id = runs.roll(text, "long", expect=0)["runId"]
    page = dashboard().get(f"/runs/{run_id}").text
    shown = views.MAX_TASKS_SHOWN  # children, then the aggregate
    assert page.count('<details class="task"') == shown + 1
    assert f'id="hidden-tasks">{400 - shown} more settled foreach' in page
    # The tasks line counts every task, listed or not (it said 101/101 before).
    assert "<dt>tasks</dt><dd>401/401 done</dd>" in page
    assert 'id="hidden-events">the first ' in page
    assert page.count("<tr><td>") <= views.MAX_EVENTS_SHOWN + 1


def test_the_same_dashboard_shows_new_task_states_over_a_kept_plan(
    runs: Runs, dashboard: Any
) -> None:
    """The dashboard keeps each run's decoded plan (and the graph's shape) once read; the
    task states are read on every request, so what it draws follows the run."""
    parked, approval, _, _ = runs.park_release_and_question()
    run_id = parked["runId"]
    client = dashboard()

    def publish() -> tuple[str, str]:
        graph = client.get(f"/runs/{run_id}/graph.json").json()
        page = client.get(f"/runs/{run_id}").text
        match = re.search(r'<script type="application/json" id="graph-data">(.*?)</script>', page)
        assert match is not None
        drawn = next(n for n in json.loads(match.group(1))["nodes"] if n["id"] == "publish")
        served = next(n for n in graph["nodes"] if n["id"] == "publish")
        return str(drawn["state"]), str(served["state"])

    assert publish() == ("waiting_for_approval", "waiting_for_approval")
    approved = runs.cli(
        "--output", "json", "approvals", "approve", approval, "--reason", "ok", "--db", runs.db
    )
    assert approved.exit_code == 0, approved.stderr
    resumed = runs.cli("--output", "json", "resume", run_id, "--db", runs.db)
    assert resumed.exit_code == 0, resumed.stderr
    assert publish() == ("succeeded", "succeeded")
    assert "<dt>tasks</dt><dd>6/6 done</dd>" in client.get(f"/runs/{run_id}").text
