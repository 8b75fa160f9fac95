"""Every next-step hint is followed as printed, and does what it says.

For each situation where agentctl suggests a command (a run paused for an approval or a
question, an uncertain effect, a failed, cancelled or over-budget run, a missing
credential, a locked database, a command aimed at the wrong kind of approval...), the test
takes the command out of the output, fills in only the placeholders a person would
(``TEXT``, ``VALUE``, ``applied|not-applied``), runs it through the real CLI on the real
database, and checks the outcome the hint promised. The database is chosen with
``AGENTCTL_DB``, so the hinted commands run exactly as printed (no ``--db`` added).
"""

from __future__ import annotations

import re
import shlex
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.llm_servers.openai_wire import responses_body
from tests.fixtures.llm_servers.server import JsonReply, LoopbackServer

GATED = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: gated}
spec:
  policy: {approval: always, writableRoots: [out]}
  actions:
    save: {kind: builtin.write}
  tasks:
    - {id: save, uses: "action:save", with: {path: out/a.txt, content: hi}}
"""

ASK = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: asking}
spec:
  actions:
    ask: {kind: builtin.ask}
  tasks:
    - id: env
      uses: action:ask
      with: {prompt: "Deploy where?", choices: [staging, production]}
"""

# Fails until the file `ok` exists in the workspace.
NEEDS_OK = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: needs-ok}
spec:
  policy: {approval: never, processAllowlist: [sh], writableRoots: [conf]}
  actions:
    put: {kind: builtin.write}
    work: {kind: builtin.shell.exec, command: sh, args: ["-c", "test -f ok"]}
  tasks:
    - id: deploy
      uses: action:put
      with: {path: conf/app.conf, content: "version=2\\n"}
      compensate:
        uses: action:put
        with: {path: conf/app.conf, content: "${{ tasks.deploy.output.before }}"}
    - {id: check, uses: action:work, needs: [deploy]}
"""

# The first attempt hangs past its timeout (its effect becomes uncertain); later ones pass.
HANGS_ONCE = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: hangs-once}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    work:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "if [ -f marker ]; then echo second; else touch marker; sleep 30; fi"]
      timeoutSeconds: {timeout}
  tasks:
    - {id: step, uses: action:work}
"""

BUDGETED = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: budgeted}
spec:
  runtime: {budgets: {maxProviderRequests: 1}}
  policy: {approval: never}
  providers: {scripted: {kind: fake}}
  agents:
    talker:
      provider: scripted
      model: scripted
      instructions: answer
      maxOutputTokens: 32
      providerOptions: {finalText: done}
  tasks:
    - {id: first, uses: 'agent:talker', with: {prompt: one}}
    - {id: second, uses: 'agent:talker', needs: [first], with: {prompt: two}}
"""

CREDENTIAL = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: credential}}
spec:
  policy: {{networkAllowlist: [127.0.0.1]}}
  providers:
    remote: {{kind: openai, endpoint: "{endpoint}", credential: {{env: AGENTCTL_TEST_KEY}}}}
  agents:
    helper: {{provider: remote, model: small, instructions: hi}}
  tasks:
    - {{id: ask, uses: "agent:helper", with: {{prompt: hello}}}}
"""

_COMMAND = re.compile(r"`(agentctl [^`]+)`")


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "hints.db"
    monkeypatch.setenv("AGENTCTL_DB", str(path))
    return path


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


def _write(ws: Path, text: str, name: str = "wf.yaml") -> Path:
    path = ws / name
    path.write_text(textwrap.dedent(text))
    return path


def _hinted(result: Any) -> list[str]:
    """The commands a result suggests: its ``next`` steps, else those in its hint."""
    if result.exit_code in (0, 3) and result.stdout.strip():
        data = result.json()["data"]
        if data.get("next"):
            return [step["command"] for step in data["next"]]
    body = result.error_json()["error"] if result.stderr.strip() else {}
    return _COMMAND.findall(body.get("hint") or "")


def _pick(commands: list[str], prefix: str) -> str:
    found = [c for c in commands if c.startswith(prefix)]
    assert found, f"no `{prefix}` among the hints {commands}"
    return found[0]


def _follow(cli: Any, command: str, **fill: str) -> Any:
    """Run a hinted command as printed, with only its placeholders filled in."""
    values = {"TEXT": "followed the hint", "applied|not-applied": "not-applied", **fill}
    words = [values.get(word, word) for word in shlex.split(command)]
    assert not [w for w in words if w.isupper() and len(w) > 2], f"unfilled: {command}"
    assert words[0] == "agentctl"
    return cli("--output", "json", *words[1:])


def _roll(cli: Any, path: Path, *extra: str) -> Any:
    return cli("--output", "json", "roll", path, *extra)


def test_approval_pause_hints_approve_then_resume(cli: Any, db: Path, ws: Path) -> None:
    paused = _roll(cli, _write(ws, GATED))
    assert paused.exit_code == 3, paused.stderr
    hints = _hinted(paused)
    assert [h.split()[1] for h in hints] == ["approvals", "resume"]
    approved = _follow(cli, _pick(hints, "agentctl approvals approve"))
    assert approved.exit_code == 0, approved.stderr
    assert approved.json()["data"]["approval"]["status"] == "approved"
    resume = _pick(_hinted(approved), "agentctl resume")
    assert resume == hints[-1]
    done = _follow(cli, resume)
    assert done.exit_code == 0, done.stderr
    assert done.json()["data"]["state"] == "succeeded"
    assert (ws / "out" / "a.txt").read_text() == "hi"


def test_question_hints_answer_not_approve(cli: Any, db: Path, ws: Path) -> None:
    paused = _roll(cli, _write(ws, ASK))
    assert paused.exit_code == 3, paused.stderr
    hints = _hinted(paused)
    assert not [h for h in hints if "approvals approve" in h]
    answered = _follow(cli, _pick(hints, "agentctl approvals answer"), VALUE="staging")
    assert answered.exit_code == 0, answered.stderr
    done = _follow(cli, _pick(_hinted(answered), "agentctl resume"))
    assert done.exit_code == 0, done.stderr
    assert done.json()["data"]["state"] == "succeeded"
    assert done.json()["data"]["output"]["env"]["answer"] == "staging"


def test_approving_a_question_hints_the_answer_command(cli: Any, db: Path, ws: Path) -> None:
    paused = _roll(cli, _write(ws, ASK))
    question = paused.json()["data"]["pendingApprovals"][0]
    refused = cli("--output", "json", "approvals", "approve", question, "--reason", "x")
    assert refused.exit_code == 2
    answered = _follow(cli, _pick(_hinted(refused), "agentctl approvals answer"), VALUE="staging")
    assert answered.exit_code == 0, answered.stderr
    assert answered.json()["data"]["approval"]["status"] == "answered"


def test_answering_an_approval_hints_approve_or_reject(cli: Any, db: Path, ws: Path) -> None:
    paused = _roll(cli, _write(ws, GATED))
    approval = paused.json()["data"]["pendingApprovals"][0]
    refused = cli("--output", "json", "approvals", "answer", approval, "yes")
    assert refused.exit_code == 2
    decided = _follow(cli, _pick(_hinted(refused), "agentctl approvals reject"))
    assert decided.exit_code == 0, decided.stderr
    assert decided.json()["data"]["approval"]["status"] == "rejected"


def test_uncertain_effect_hints_reconcile_then_resume(cli: Any, db: Path, ws: Path) -> None:
    blocked = _roll(cli, _write(ws, HANGS_ONCE.replace("{timeout}", "1")))
    assert blocked.exit_code == 3, blocked.stderr
    hints = _hinted(blocked)
    assert [h.split()[1] for h in hints] == ["reconcile", "resume"]
    concluded = _follow(cli, hints[0])
    assert concluded.exit_code == 0, concluded.stderr
    assert _hinted(concluded) == [hints[1]]
    done = _follow(cli, hints[1])
    assert done.exit_code == 0, done.stderr
    assert done.json()["data"]["state"] == "succeeded"


def test_failed_run_hints_retry_failed_repair_and_compensate(cli: Any, db: Path, ws: Path) -> None:
    (ws / "conf").mkdir()
    (ws / "conf" / "app.conf").write_text("version=1\n")
    path = _write(ws, NEEDS_OK)
    failed = _roll(cli, path)
    assert failed.exit_code == 4, failed.stderr
    source = failed.error_json()["error"]["runId"]
    hints = _hinted(failed)
    assert [h.split()[1] for h in hints] == ["inspect", "retry", "repair", "compensate"]

    inspected = _follow(cli, _pick(hints, "agentctl inspect"))
    assert inspected.exit_code == 0
    assert {t["taskId"]: t["state"] for t in inspected.json()["data"]["tasks"]}["check"] == (
        "failed"
    )

    (ws / "ok").write_text("")
    retried = _follow(cli, _pick(hints, "agentctl retry"))
    assert retried.exit_code == 0, retried.stderr
    assert retried.json()["data"]["state"] == "succeeded"

    path.write_text(path.read_text().replace("test -f ok", "test -f ok && true"))
    repaired = _follow(cli, _pick(hints, "agentctl repair"))
    assert repaired.exit_code == 0, repaired.stderr
    assert repaired.json()["data"]["state"] == "succeeded"

    compensated = _follow(cli, _pick(hints, "agentctl compensate"))
    assert compensated.exit_code == 0, compensated.stderr
    assert (ws / "conf" / "app.conf").read_text() == "version=1\n"
    run = cli("--output", "json", "inspect", compensated.json()["data"]["runId"]).json()
    assert run["data"]["run"]["sourceRunId"] == source


def test_cancelled_run_hints_reconcile_and_retry_never_resume(cli: Any, db: Path, ws: Path) -> None:
    path = _write(ws, HANGS_ONCE.replace("{timeout}", "60"))
    cancelled = _roll(cli, path, "--timeout-seconds", "1")
    assert cancelled.exit_code == 130, cancelled.stderr
    error = cancelled.error_json()["error"]
    assert "timed out" in error["message"] and "interrupted" not in error["message"]
    hints = _hinted(cancelled)
    assert not [h for h in hints if h.startswith("agentctl resume")]
    concluded = _follow(cli, _pick(hints, "agentctl reconcile"))
    assert concluded.exit_code == 0, concluded.stderr
    after = _hinted(concluded)
    # The run is finished: resuming it would do nothing, so it is not suggested.
    assert not [h for h in after if h.startswith("agentctl resume")]
    retried = _follow(cli, _pick(after, "agentctl retry"))
    assert retried.exit_code == 0, retried.stderr
    assert retried.json()["data"]["state"] == "succeeded"


def test_budget_refusal_hints_a_retry_that_reuses_the_spent_work(
    cli: Any, db: Path, ws: Path
) -> None:
    failed = _roll(cli, _write(ws, BUDGETED))
    assert failed.exit_code == 4, failed.stderr
    assert failed.error_json()["error"]["code"] == "budget.exceeded"
    retried = _follow(cli, _pick(_hinted(failed), "agentctl retry"))
    assert retried.exit_code == 0, retried.stderr
    assert retried.json()["data"]["state"] == "succeeded"


def test_missing_credential_hint_names_the_variable_to_export(
    cli: Any, db: Path, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTCTL_TEST_KEY", raising=False)
    with LoopbackServer() as server:
        server.script(JsonReply(responses_body(text="OK", response_id="resp_1")))
        path = _write(ws, CREDENTIAL.format(endpoint=server.url("/v1/responses")))
        missing = _roll(cli, path)
        assert missing.exit_code == 6
        hint = missing.error_json()["error"]["hint"]
        exported = re.fullmatch(r"export (\w+)=\.\.\. before running the workflow", hint)
        assert exported is not None, hint
        monkeypatch.setenv(exported.group(1), "sk-test")
        done = _roll(cli, path)
    assert done.exit_code == 0, done.stderr
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"


def test_locked_database_hint_retry_succeeds_once_the_lock_is_gone(
    cli: Any, db: Path, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paused = _roll(cli, _write(ws, GATED))
    approval = paused.json()["data"]["pendingApprovals"][0]
    monkeypatch.setenv("AGENTCTL_SQLITE_BUSY_TIMEOUT_MS", "50")
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        locked = cli("--output", "json", "approvals", "approve", approval, "--reason", "x")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert locked.exit_code == 5
    error = locked.error_json()["error"]
    assert error["code"] == "store.locked"
    assert "then retry" in error["hint"]
    again = cli("--output", "json", "approvals", "approve", approval, "--reason", "x")
    assert again.exit_code == 0, again.stderr


def test_changed_workflow_retry_hints_repair(cli: Any, db: Path, ws: Path) -> None:
    path = _write(ws, NEEDS_OK)
    (ws / "conf").mkdir()
    failed = _roll(cli, path)
    source = failed.error_json()["error"]["runId"]
    path.write_text(path.read_text().replace("test -f ok", "true"))
    refused = cli("--output", "json", "retry", path, source, "--failed")
    assert refused.exit_code == 3
    repaired = _follow(cli, _pick(_hinted(refused), "agentctl repair"), TASK="check")
    assert repaired.exit_code == 0, repaired.stderr
    assert repaired.json()["data"]["state"] == "succeeded"


def test_recovering_a_paused_run_hints_resume(cli: Any, db: Path, ws: Path) -> None:
    path = _write(ws, ASK)
    paused = _roll(cli, path)
    run_id = paused.json()["data"]["runId"]
    refused = cli("--output", "json", "retry", path, run_id, "--failed")
    assert refused.exit_code == 3
    resumed = _follow(cli, _pick(_hinted(refused), "agentctl resume"))
    assert resumed.exit_code == 3  # still waiting for its question, as before
    assert resumed.json()["data"]["state"] == "paused"


def test_hints_carry_the_database_given_with_db(
    cli: Any, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTCTL_DB", raising=False)
    chosen = tmp_path / "elsewhere" / "chosen.db"
    paused = _roll(cli, _write(ws, ASK), "--db", chosen)
    hints = _hinted(paused)
    assert all(h.endswith(f"--db {chosen}") for h in hints), hints
    answered = _follow(cli, _pick(hints, "agentctl approvals answer"), VALUE="production")
    assert answered.exit_code == 0, answered.stderr
    done = _follow(cli, _pick(_hinted(answered), "agentctl resume"))
    assert done.exit_code == 0, done.stderr
    assert done.json()["data"]["output"]["env"]["answer"] == "production"
    assert not (ws / ".agentctl").exists()
