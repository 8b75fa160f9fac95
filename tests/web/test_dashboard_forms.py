"""Forms that guide: the reconcile form shows what an *applied* result must look like, and a
refused form comes back with what was typed and what to change, in the page's own words
(Starlette's TestClient over real runs in real SQLite files)."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import jsonschema

from agentctl.engine.actions.result_shapes import result_shape
from tests.web.conftest import UNCERTAIN, Runs

CSRF_RE = re.compile(r'name="csrf" value="([0-9a-f]+)"')

EVERY_MUTATION = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: mutations}
spec:
  policy: {approval: never, processAllowlist: [sh], writableRoots: [out]}
  actions:
    shell: {kind: builtin.shell.exec, command: sh, args: ["-c", "echo hi"]}
    save: {kind: builtin.write}
    remember: {kind: builtin.memory.write}
  tasks:
    - {id: one, uses: "action:shell"}
    - {id: two, uses: "action:save", with: {path: out/two.txt, content: "two"}}
    - {id: three, uses: "action:remember", with: {key: noted, value: 3}}
"""


def _csrf(page: str) -> str:
    match = CSRF_RE.search(page)
    assert match is not None, "the page has no form with a CSRF token"
    return match.group(1)


def test_the_result_shapes_are_what_the_builtins_really_return(runs: Runs) -> None:
    run_id = runs.roll(EVERY_MUTATION, "mutations", expect=0)["runId"]
    effects = runs.inspect(run_id)["effects"]
    assert sorted(e["operation"] for e in effects) == [
        "builtin.memory.write",
        "builtin.shell.exec",
        "builtin.write",
    ]
    for effect in effects:
        shape = result_shape(effect["operation"])
        assert shape is not None
        schema, example = shape
        jsonschema.validate(effect["result"], schema)
        jsonschema.validate(example, schema)


def test_a_refused_reconcile_keeps_what_was_typed_and_says_what_to_change(
    runs: Runs, dashboard: Any
) -> None:
    data = runs.roll(UNCERTAIN, "slow")
    (effect,) = data["uncertainEffects"]
    client = dashboard()
    listing = client.get("/effects").text
    # The form shows the shape an applied result must have, with an example to start from.
    assert "no result was recorded: paste the one builtin.shell.exec produced" in listing
    assert "&#34;exitCode&#34;: 0" in listing and ">Use this example</button>" in listing
    url = f"/effects/{effect['effectId']}/reconcile"
    typed = {
        "status": "applied",
        "reason": "the build log shows it finished",
        "evidence": "ci log line 42: built <ok>",
        "csrf": _csrf(listing),
        "next": "/effects",
    }
    refused = client.post(url, data=typed)
    assert refused.status_code == 400
    page = refused.text
    assert "Not reconciled yet" in page
    assert (
        "“Applied” needs the result builtin.shell.exec produced, and none was recorded"
        in html.unescape(page)
    )
    # What was typed is still there, ready to be completed and sent again.
    assert 'value="the build log shows it finished"' in page
    assert ">ci log line 42: built &lt;ok&gt;</textarea>" in page
    assert '<option value="applied" selected>' in page
    assert '<input type="hidden" name="next" value="/effects">' in page
    assert "--result-file" not in page and "--status" not in page

    wrong_shape = client.post(url, data=typed | {"result": json.dumps({"stdout": 1})})
    assert wrong_shape.status_code == 400
    assert "The result does not match the shape builtin.shell.exec returns" in (
        html.unescape(wrong_shape.text)
    )
    not_json = client.post(url, data=typed | {"result": "{exitCode: 0"})
    assert "The result field is not valid JSON" in not_json.text
    assert ">{exitCode: 0</textarea>" in not_json.text
    assert runs.inspect(data["runId"])["effects"][0]["reconciliations"] == []

    result = {"status": "changed", "changed": True, "exitCode": 0, "stdout": "", "stderr": ""}
    accepted = client.post(url, data=typed | {"result": json.dumps(result)}, follow_redirects=False)
    assert accepted.status_code == 303
    assert accepted.headers["location"].startswith("/effects?notice=")
    (conclusion,) = runs.inspect(data["runId"])["effects"][0]["reconciliations"]
    assert conclusion["status"] == "applied" and conclusion["actor"] == "ui"
    assert conclusion["evidence"] == "ci log line 42: built <ok>"


BUILD = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: build}
spec:
  policy: {approval: mutations, nonInteractive: pause, processAllowlist: [sh]}
  actions:
    build:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "echo building; sleep 2; echo built"]
  tasks:
    - {id: make, uses: "action:build"}
"""

QUOTED = "run sh -c 'echo building; sleep 2; echo built'"


def test_commands_in_approval_prompts_are_quoted_as_a_shell_reads_them(
    runs: Runs, dashboard: Any
) -> None:
    """The prompt said ``run sh -c echo building; sleep 2; echo built``: three commands to a
    reader, one argument to the process."""
    (approval,) = runs.roll(BUILD, "build")["pendingApprovals"]
    listed = runs.cli("--output", "json", "approvals", "list", "--db", runs.db)
    assert listed.exit_code == 0, listed.stderr
    (item,) = [a for a in listed.json()["data"]["approvals"] if a["approvalId"] == approval]
    assert item["prompt"] == QUOTED
    human = runs.cli("approvals", "list", "--db", runs.db)
    assert QUOTED in human.stdout
    assert QUOTED in html.unescape(dashboard().get("/inbox").text)


def test_budgets_show_their_units(runs: Runs, dashboard: Any) -> None:
    run_id = runs.roll(EVERY_MUTATION, "mutations", expect=0)["runId"]
    used = {b["resource"]: b["used"] for b in runs.inspect(run_id)["budget"]}
    assert used["processOutputBytes"] == 3  # "hi\n"
    page = dashboard().get(f"/runs/{run_id}").text
    rows = dict(re.findall(r'<tr id="budget-(\w+)">(.*?)</tr>', page))
    assert rows["processOutputBytes"].startswith(
        '<td title="processOutputBytes">process output</td><td>3 bytes</td>'
    )
    assert '<td title="costMicrousd">cost</td><td>$0.00</td>' in rows["costMicrousd"]
    assert "<td>0 tokens</td>" in rows["inputTokens"]
    assert "3.0" not in rows["processOutputBytes"] and ">—<" in rows["toolCalls"]
