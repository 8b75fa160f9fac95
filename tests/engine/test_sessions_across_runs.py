"""An agent task continues the provider session of an earlier run's task: the transcript
is restored from the records and the provider's continuation (previous response id) is
sent; a task re-executed by repair starts fresh."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.llm_servers.openai_wire import responses_body
from tests.fixtures.llm_servers.server import JsonReply, LoopbackServer

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: review}}
spec:
  policy: {{approval: never, networkAllowlist: [127.0.0.1]}}
  providers:
    remote: {{kind: openai, endpoint: "{endpoint}", credential: {{env: MODEL_KEY}}}}
  agents:
    reviewer:
      provider: remote
      model: small
      instructions: review briefly
      providerOptions: {{store: true}}
  tasks:
    - id: review
      uses: agent:reviewer
      with: {{prompt: "{prompt}"}}
{session}
"""


def _write(
    tmp_path: Path,
    server: LoopbackServer,
    prompt: str,
    session: str = "",
) -> Path:
    path = tmp_path / "wf.yaml"
    path.write_text(
        WORKFLOW.format(
            endpoint=server.url("/v1/responses"),
            prompt=prompt,
            session=f"      session: {session}" if session else "",
        )
    )
    return path


def _texts(items: list[Any]) -> list[tuple[str, str]]:
    found = []
    for item in items:
        content = item.get("content")
        text = content if isinstance(content, str) else content[0]["text"]
        found.append((item["role"], text))
    return found


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODEL_KEY", "k")


def test_a_named_session_continues_across_runs_with_the_previous_response_id(
    cli: Any, tmp_path: Path
) -> None:
    db = tmp_path / "r.db"
    with LoopbackServer() as server:
        server.script(
            JsonReply(responses_body(text="first look", response_id="resp_a")),
            JsonReply(responses_body(text="second look", response_id="resp_b")),
        )
        path = _write(tmp_path, server, "look at v1", "{name: reviewer-main}")
        first = cli("--output", "json", "roll", path, "--db", db)
        assert first.exit_code == 0, first.stderr
        path = _write(tmp_path, server, "now v2", "{name: reviewer-main}")
        second = cli("--output", "json", "roll", path, "--db", db)
        assert second.exit_code == 0, second.stderr
        bodies = [request.json for request in server.requests]
    assert "previous_response_id" not in bodies[0]
    # The second run continues where the first left: the provider is sent the previous
    # response id and only the new turn.
    assert bodies[1]["previous_response_id"] == "resp_a"
    assert _texts(bodies[1]["input"]) == [("user", "now v2")]
    first_run, second_run = first.json()["data"]["runId"], second.json()["data"]["runId"]
    shown = cli("--output", "json", "sessions", "show", second_run, "review", "--db", db)
    assert shown.exit_code == 0, shown.stderr
    session = shown.json()["data"]
    assert session["name"] == "reviewer-main"
    assert session["state"]["continuedFrom"] == {"runId": first_run, "taskId": "review"}
    assert [(m["role"], m.get("text")) for m in session["transcript"]] == [
        ("user", "look at v1"),
        ("assistant", "first look"),
        ("user", "now v2"),
        ("assistant", "second look"),
    ]
    listed = cli("--output", "json", "sessions", "list", "--name", "reviewer-main", "--db", db)
    assert [s["runId"] for s in listed.json()["data"]["sessions"]] == [second_run, first_run]
    human = cli("sessions", "list", "--db", db)
    assert f"continues {first_run} review" in human.stdout


def test_session_from_a_run_or_the_latest_restores_the_whole_transcript(
    cli: Any, tmp_path: Path
) -> None:
    db = tmp_path / "r.db"
    with LoopbackServer() as server:
        server.script(
            JsonReply(responses_body(text="one", response_id="resp_1")),
            JsonReply(responses_body(text="two", response_id="resp_2")),
            JsonReply(responses_body(text="three", response_id="resp_3")),
        )
        first = cli("--output", "json", "roll", _write(tmp_path, server, "p1"), "--db", db)
        first_run = first.json()["data"]["runId"]
        by_id = f"{{from: {{run: {first_run}, task: review}}}}"
        second = cli("--output", "json", "roll", _write(tmp_path, server, "p2", by_id), "--db", db)
        assert second.exit_code == 0, second.stderr
        latest = "{from: {run: latest, task: review}}"
        third = cli("--output", "json", "roll", _write(tmp_path, server, "p3", latest), "--db", db)
        assert third.exit_code == 0, third.stderr
        bodies = [request.json for request in server.requests]
    assert bodies[1]["previous_response_id"] == "resp_1"
    assert bodies[2]["previous_response_id"] == "resp_2"  # the newest run's session
    shown = cli(
        "--output",
        "json",
        "sessions",
        "show",
        third.json()["data"]["runId"],
        "review",
        "--db",
        db,
    ).json()["data"]
    assert [m.get("text") for m in shown["transcript"]] == ["p1", "one", "p2", "two", "p3", "three"]


def test_a_missing_source_session_fails_the_task_naming_it(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with LoopbackServer() as server:
        latest = "{from: {run: latest, task: review}}"
        result = cli("--output", "json", "roll", _write(tmp_path, server, "p", latest), "--db", db)
        requests = len(server.requests)
    assert result.exit_code == 4
    error = result.error_json()["error"]
    assert error["code"] == "session.not_found"
    assert "no session is recorded" in error["message"] and "review" in error["message"]
    assert requests == 0


def test_a_task_re_executed_by_repair_starts_a_new_session(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with LoopbackServer() as server:
        server.script(
            JsonReply(responses_body(text="one", response_id="resp_1")),
            JsonReply(responses_body(text="two", response_id="resp_2")),
        )
        named = "{name: reviewer-main}"
        first = cli("--output", "json", "roll", _write(tmp_path, server, "p", named), "--db", db)
        source = first.json()["data"]["runId"]
        changed = _write(tmp_path, server, "p again", named)
        repaired = cli("--output", "json", "repair", changed, source, "--db", db)
        assert repaired.exit_code == 0, repaired.stdout + repaired.stderr
        bodies = [request.json for request in server.requests]
    assert len(bodies) == 2
    assert "previous_response_id" not in bodies[1]
    assert _texts(bodies[1]["input"]) == [("user", "p again")]
    shown = cli(
        "--output",
        "json",
        "sessions",
        "show",
        repaired.json()["data"]["runId"],
        "review",
        "--db",
        db,
    ).json()["data"]
    assert shown["state"]["continuedFrom"] is None
    assert "repair" in shown["state"]["startedFresh"]


def test_only_agent_tasks_declare_a_session_and_the_form_is_checked(
    cli: Any, tmp_path: Path
) -> None:
    path = tmp_path / "wf.yaml"
    base = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: s}}
spec:
  actions:
    save: {{kind: builtin.write}}
  tasks:
    - id: t
      uses: action:save
      with: {{path: x, content: y}}
      session: {session}
"""
    for session, expected in {
        "{name: main}": "only an agent task",
        "{name: main, from: {run: latest, task: t}}": "either `from",
        "{from: {run: yesterday, task: t}}": "not a run id",
    }.items():
        path.write_text(base.format(session=session))
        result = cli("--output", "json", "check", path)
        assert result.exit_code == 2, session
        assert expected in result.stdout + result.stderr, (session, result.stdout)


PAUSED = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: review-later}}
spec:
  policy: {{approval: never, networkAllowlist: [127.0.0.1]}}
  providers:
    remote: {{kind: openai, endpoint: "{endpoint}", credential: {{env: MODEL_KEY}}}}
  agents:
    reviewer:
      provider: remote
      model: small
      instructions: review briefly
      providerOptions: {{store: true}}
  actions:
    hold: {{kind: builtin.pause}}
  tasks:
    - {{id: hold, uses: "action:hold", with: {{message: resume when ready}}}}
    - id: review
      uses: agent:reviewer
      needs: [hold]
      with: {{prompt: later}}
      session: {{name: reviewer-main}}
"""


def test_a_resumed_run_continues_the_session_that_was_newest_when_it_started(
    cli: Any, tmp_path: Path
) -> None:
    db = tmp_path / "r.db"
    named = "{name: reviewer-main}"
    with LoopbackServer() as server:
        server.script(
            JsonReply(responses_body(text="a", response_id="resp_a")),
            JsonReply(responses_body(text="c", response_id="resp_c")),
            JsonReply(responses_body(text="b", response_id="resp_b")),
        )
        assert cli("roll", _write(tmp_path, server, "a", named), "--db", db).exit_code == 0
        held = tmp_path / "held.yaml"
        held.write_text(PAUSED.format(endpoint=server.url("/v1/responses")))
        parked = cli("--output", "json", "roll", held, "--db", db)
        assert parked.exit_code == 3, parked.stderr
        # A run that starts later records a newer session of the same name…
        assert cli("roll", _write(tmp_path, server, "c", named), "--db", db).exit_code == 0
        resumed = cli("resume", parked.json()["data"]["runId"], "--db", db)
        assert resumed.exit_code == 0, resumed.stderr
        bodies = [request.json for request in server.requests]
    assert bodies[1]["previous_response_id"] == "resp_a"
    # …but the parked run continues the session that was newest when it was created.
    assert bodies[2]["previous_response_id"] == "resp_a"
    assert _texts(bodies[2]["input"]) == [("user", "later")]


def test_sessions_commands_have_help_with_examples(cli: Any) -> None:
    for command, example in (
        ("list", "agentctl sessions list --name"),
        ("show", "agentctl sessions show"),
    ):
        result = cli("sessions", command, "--help")
        assert result.exit_code == 0 and "--db" in result.stdout, command
        assert example in " ".join(result.stdout.split()), command
