"""OpenTelemetry end to end: real ``agentctl`` subprocesses export over OTLP/HTTP to a
loopback collector stand-in that decodes the protobuf requests; the span tree, the ids
stored on the records, ``inspect``, the propagated ``traceparent`` and the absence of
secrets and prompts in every exported byte are checked against each other."""

from __future__ import annotations

import json
import os
import pty
import select
import socket
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.engine.conftest import TOKEN
from tests.fixtures.otlp.collector import Collector, CollectorServer, ReceivedSpan
from tests.fixtures.protocol_servers.a2a_peer import A2APeer
from tests.forkserver import run_agentctl

SECRET = "s3cr3t-a2a-token-value"
PROMPT = "PROMPT-TEXT-THAT-MUST-NOT-BE-EXPORTED"
CI_TRACE = "0af7651916cd43dd8448eb211c80319c"
CI_SPAN = "b7ad6b7169203331"

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: traced}}
spec:
  policy:
    approval: never
    networkAllowlist: [127.0.0.1]
    environmentAllowlist: [A2A_TOKEN]
    processAllowlist: [sh]
    writableRoots: [notes]
  providers:
    fake: {{kind: fake}}
  runtime:
    pricing:
      version: test
      models:
        fake/scripted:
          inputMicrousdPerMillionTokens: 1000000
          outputMicrousdPerMillionTokens: 1000000
  a2aPeers:
    helper:
      cardUrl: "{card_url}"
      headers: {{Authorization: {{env: A2A_TOKEN}}}}
      pollIntervalMs: 10
      maxPolls: 5
  tools:
    write_note:
      kind: builtin.workspace.write
      description: Write a note into the workspace.
      inputSchema:
        type: object
        properties: {{path: {{type: string}}, content: {{type: string}}}}
        required: [path, content]
        additionalProperties: false
      outputSchema: {{type: object}}
      capability: filesystem.write
      risk: medium
      effectClass: workspace_mutate
      retrySafe: true
      timeoutSeconds: 10
      idempotency: idempotent
      approval: always
  agents:
    writer:
      provider: fake
      model: scripted
      instructions: Write the note.
      tools: [write_note]
      maxTurns: 2
      maxToolCalls: 1
      providerOptions:
        toolInput: {{path: notes/note.txt, content: hello}}
        finalText: done
  actions:
    delegate: {{kind: a2a.delegate}}
    show:
      kind: builtin.shell.exec
      command: sh
      args: [-c, 'printf %s "$TRACEPARENT"']
  tasks:
    - id: ask
      uses: action:delegate
      with: {{peer: helper, messageId: m-1, message: direct}}
    - id: show
      uses: action:show
    - id: write
      uses: agent:writer
      needs: [ask, show]
      with: {{prompt: {prompt}}}
"""


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("OTEL_") and k not in ("TRACEPARENT", "AGENTCTL_FAULT")
    }
    env.update(extra)
    return env


def _agentctl(
    workspace: Path, env: dict[str, str], *args: str | Path
) -> subprocess.CompletedProcess[str]:
    return run_agentctl(["--output", "json", *map(str, args)], cwd=workspace, env=env, timeout=120)


def _children(collector: Collector, parent: ReceivedSpan) -> list[ReceivedSpan]:
    return [s for s in collector.spans if s.parent_span_id == parent.span_id]


def _span(collector: Collector, span_id: str) -> ReceivedSpan:
    (found,) = [s for s in collector.spans if s.span_id == span_id]
    return found


def test_run_with_agent_tool_approval_and_a2a_exports_a_linked_span_tree(
    tmp_path: Path, workspace: Path, write_workflow: Any
) -> None:
    db = tmp_path / "r.db"
    with CollectorServer() as collector, A2APeer() as peer:
        path = write_workflow(WORKFLOW.format(card_url=peer.card_url, prompt=PROMPT))
        env = _env(
            OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
            OTEL_SERVICE_NAME="agentctl-under-test",
            OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test",
            A2A_TOKEN=SECRET,
            # A CI job's trace: the first execution joins it.
            TRACEPARENT=f"00-{CI_TRACE}-{CI_SPAN}-01",
        )
        first = _agentctl(workspace, env, "roll", path, "--db", db, "--workspace", workspace)
        assert first.returncode == 3, first.stderr
        paused = json.loads(first.stdout)["data"]
        run_id = paused["runId"]
        (approval_id,) = paused["pendingApprovals"]
        approve = ("approvals", "approve", approval_id, "--reason", "ok", "--db", db)
        assert _agentctl(workspace, env, *approve).returncode == 0
        env.pop("TRACEPARENT")
        resumed = _agentctl(workspace, env, "resume", run_id, "--db", db)
        assert resumed.returncode == 0, resumed.stderr
        shown = _agentctl(workspace, env, "inspect", run_id, "--db", db)
        audit = _agentctl(workspace, env, "audit", run_id, "--db", db)
        a2a_headers = peer.headers

    # Two executions, two root spans: the first continues the CI trace, the resume starts
    # a trace of its own that links back to the first.
    first_root, second_root = collector.by_name("run traced")
    assert (first_root.trace_id, first_root.parent_span_id) == (CI_TRACE, CI_SPAN)
    assert first_root.attributes["agentctl.run.state"] == "paused"
    assert second_root.parent_span_id == ""
    assert second_root.trace_id != CI_TRACE
    assert second_root.attributes["agentctl.run.state"] == "succeeded"
    assert second_root.links == [
        (CI_TRACE, first_root.span_id, {"agentctl.link": "earlier_execution"})
    ]
    assert first_root.resource["service.name"] == "agentctl-under-test"
    assert first_root.resource["deployment.environment"] == "test"

    # The first execution: task -> effect -> call, for the A2A delegation, the process and
    # the agent's first model call; the tool call waits for approval.
    tasks = {s.attributes["agentctl.task.id"]: s for s in _children(collector, first_root)}
    assert sorted(tasks) == ["ask", "show", "write"]
    (delegation,) = _children(collector, tasks["ask"])
    assert delegation.name == "effect a2a.delegate"
    assert delegation.attributes["agentctl.effect.class"] == "remote_agent"
    assert delegation.attributes["agentctl.effect.risk"] == "high"
    assert delegation.attributes["agentctl.effect.status"] == "succeeded"
    (a2a_call,) = _children(collector, delegation)
    assert a2a_call.name == "a2a.delegate helper"
    assert a2a_call.kind == 3  # SPAN_KIND_CLIENT
    # The peer received the call span's W3C trace context.
    (sent,) = a2a_headers
    assert sent["traceparent"] == f"00-{CI_TRACE}-{a2a_call.span_id}-01"
    (process_effect,) = _children(collector, tasks["show"])
    (process_call,) = _children(collector, process_effect)
    output = json.loads(resumed.stdout)["data"]["output"]
    assert output["show"]["stdout"] == f"00-{CI_TRACE}-{process_call.span_id}-01"
    first_write = sorted(_children(collector, tasks["write"]), key=lambda s: s.start_ns)
    assert [s.name for s in first_write] == ["effect fake", "effect tool.write_note"]
    (chat,) = _children(collector, first_write[0])
    assert chat.name == "chat scripted"
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.provider.name"] == "fake"
    assert chat.attributes["gen_ai.request.model"] == "scripted"
    assert chat.attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert chat.attributes["gen_ai.usage.input_tokens"] >= 1
    assert chat.attributes["gen_ai.usage.output_tokens"] >= 1
    # Priced at one micro-USD per token: one input and one output token.
    assert first_write[0].attributes["agentctl.provider.cost_usd"] == pytest.approx(2e-6)
    assert first_write[1].attributes["agentctl.effect.status"] == "waiting_for_approval"
    assert tasks["write"].attributes["agentctl.task.status"] == "waiting_for_approval"

    # The resume: the journaled model call is reused (no call span), the approval wait is a
    # span from request to decision, then the tool runs and the model answers.
    (write_again,) = _children(collector, second_root)
    resumed_effects = sorted(_children(collector, write_again), key=lambda s: s.start_ns)
    assert [s.name for s in resumed_effects] == [
        "effect fake",
        "effect tool.write_note",
        "effect fake",
    ]
    assert resumed_effects[0].attributes["agentctl.effect.reused"] is True
    assert "agentctl.provider.cost_usd" not in resumed_effects[0].attributes  # paid before
    assert _children(collector, resumed_effects[0]) == []
    tool_children = {s.name: s for s in _children(collector, resumed_effects[1])}
    assert sorted(tool_children) == ["approval wait tool.write_note", "execute_tool write_note"]
    wait = tool_children["approval wait tool.write_note"]
    assert wait.attributes["agentctl.approval.id"] == approval_id
    assert wait.attributes["agentctl.approval.status"] == "approved"
    assert tool_children["execute_tool write_note"].attributes["gen_ai.tool.name"] == "write_note"
    assert resumed_effects[1].attributes["agentctl.effect.reused"] is False

    # The ids on the records are the ids of the spans that describe them.
    data = json.loads(shown.stdout)["data"]
    assert (data["run"]["traceId"], data["run"]["spanId"]) == (
        second_root.trace_id,
        second_root.span_id,
    )
    task_rows = {t["taskId"]: t for t in data["tasks"]}
    assert task_rows["ask"]["spanId"] == tasks["ask"].span_id
    assert task_rows["write"]["spanId"] == write_again.span_id
    assert len(data["effects"]) == 5
    for effect in data["effects"]:
        span = _span(collector, effect["spanId"])
        assert span.trace_id == effect["traceId"]
        assert span.attributes["agentctl.effect.id"] == effect["effectId"]
    events = json.loads(audit.stdout)["data"]["events"]
    requested = [e for e in events if e["kind"] == "effect.requested"]
    assert len(requested) == 5
    for event in requested:
        span = _span(collector, event["spanId"])
        assert span.attributes["agentctl.effect.id"] == event["effectId"]
    # An operator's approval is not part of any execution: it carries no trace.
    (resolved,) = [e for e in events if e["kind"] == "approval.resolved"]
    assert "traceId" not in resolved

    # Metrics: runs by state, task attempts, effects, tokens, approval waits.
    runs = collector.metrics["agentctl.runs"]
    assert {a["agentctl.run.state"] for a, _ in runs} == {"started", "paused", "succeeded"}
    token_types = {
        a["gen_ai.token.type"] for a, _ in collector.metrics["gen_ai.client.token.usage"]
    }
    assert token_types == {"input", "output"}
    assert collector.metrics["agentctl.approval.wait"]
    # Each execution's process exports its own counter: one dispatched call priced in each.
    costs = collector.metrics["agentctl.provider.cost"]
    assert [value for _, value in costs] == [pytest.approx(2e-6)] * 2
    assert costs[0][0] == {"gen_ai.provider.name": "fake", "gen_ai.request.model": "scripted"}
    assert collector.metrics["agentctl.task.duration"]
    statuses = {a["agentctl.effect.status"] for a, _ in collector.metrics["agentctl.effects"]}
    assert statuses == {"succeeded", "waiting_for_approval"}

    # Neither the header secret nor the prompt is in any exported byte.
    assert collector.raw
    for body in collector.raw:
        assert SECRET.encode() not in body
        assert PROMPT.encode() not in body


def test_mcp_requests_carry_the_call_span_as_traceparent(
    tmp_path: Path,
    workspace: Path,
    write_workflow: Any,
    mcp_url: str,
) -> None:
    path = write_workflow(f"""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {{name: mcp}}
        spec:
          policy:
            approval: never
            networkAllowlist: [127.0.0.1]
            environmentAllowlist: [MCP_TOKEN]
          mcpServers:
            calc: {{url: "{mcp_url}", headers: {{Authorization: {{env: MCP_TOKEN}}}}}}
          actions:
            call: {{kind: mcp.call}}
          tasks:
            - id: add
              uses: action:call
              with: {{server: calc, tool: add, arguments: {{a: 2, b: 40}}}}
    """)
    with CollectorServer() as collector:
        env = _env(OTEL_EXPORTER_OTLP_ENDPOINT=collector.url, MCP_TOKEN=f"Bearer {TOKEN}")
        result = _agentctl(workspace, env, "roll", path, "--db", tmp_path / "r.db")
    assert result.returncode == 0, result.stderr
    call = collector.one("tools/call add")
    assert call.attributes["mcp.method.name"] == "tools/call"
    assert call.attributes["gen_ai.tool.name"] == "add"
    assert call.attributes["agentctl.mcp.server"] == "calc"
    received = (tmp_path / "calls.log.traceparent").read_text().split()
    # Every HTTP request of the call (initialize, notifications, tools/call) carries it.
    assert received and {value[:-3] for value in received} == {f"00-{call.trace_id}-{call.span_id}"}
    assert all(int(value[-2:], 16) & 1 for value in received)  # sampled
    for body in collector.raw:
        assert TOKEN.encode() not in body


FAILING = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: failing}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    boom: {kind: builtin.shell.exec, command: sh, args: [-c, 'exit 7']}
  tasks:
    - id: boom
      uses: action:boom
"""


def test_a_failed_effect_is_an_error_status_with_an_exception_event(
    tmp_path: Path, workspace: Path, write_workflow: Any
) -> None:
    path = write_workflow(FAILING)
    with CollectorServer() as collector:
        env = _env(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{collector.url}/v1/traces")
        env["OTEL_METRICS_EXPORTER"] = "none"
        failed = _agentctl(workspace, env, "--otel", "roll", path, "--db", tmp_path / "r.db")
    assert failed.returncode == 4, failed.stderr
    assert collector.paths == ["/v1/traces"]
    root = collector.one("run failing")
    (task,) = _children(collector, root)
    (effect,) = _children(collector, task)
    for span in (root, task, effect):
        assert span.status_code == 2, span.name  # STATUS_CODE_ERROR
    assert effect.attributes["agentctl.effect.status"] == "failed"
    ((name, attributes),) = effect.events
    assert name == "exception"
    assert attributes["exception.type"] == effect.attributes["error.type"]
    assert task.attributes["agentctl.task.status"] == "failed"
    assert root.attributes["agentctl.run.state"] == "failed"
    # `effects list` names each effect's span, as `inspect` does.
    run_id = json.loads(failed.stderr)["error"]["runId"]
    listed = _agentctl(workspace, _env(), "effects", "list", run_id, "--db", tmp_path / "r.db")
    (row,) = json.loads(listed.stdout)["data"]["effects"]
    assert (row["traceId"], row["spanId"]) == (effect.trace_id, effect.span_id)


def test_an_effect_left_started_by_a_crash_is_uncertain_in_the_resumed_trace(
    tmp_path: Path, workspace: Path, write_workflow: Any
) -> None:
    path = write_workflow(SIMPLE)
    db = tmp_path / "r.db"
    with CollectorServer() as collector:
        env = _env(OTEL_EXPORTER_OTLP_ENDPOINT=collector.url)
        killed = _agentctl(
            workspace, {**env, "AGENTCTL_FAULT": "effect.started"}, "roll", path, "--db", db
        )
        assert killed.returncode == -9, killed.stderr
        listing = _agentctl(workspace, env, "runs", "list", "--db", db)
        (listed,) = json.loads(listing.stdout)["data"]["runs"]
        resumed = _agentctl(workspace, env, "resume", listed["runId"], "--db", db)
    assert resumed.returncode == 3, resumed.stderr  # blocked until an operator reconciles
    # The killed process exported nothing; the resume's trace shows the uncertain effect.
    effect = collector.one("effect builtin.shell.exec")
    assert effect.attributes["agentctl.effect.status"] == "uncertain"
    assert effect.status_code == 2
    assert [name for name, _ in effect.events] == ["exception"]
    assert effect.events[0][1]["exception.type"] == "effect.uncertain"
    statuses = [a["agentctl.effect.status"] for a, _ in collector.metrics["agentctl.effects"]]
    assert statuses == ["uncertain"]
    assert collector.one("run plain").attributes["agentctl.run.state"] == "paused"


def test_jsonl_events_carry_time_and_the_span_they_report(
    tmp_path: Path, workspace: Path, write_workflow: Any
) -> None:
    path = write_workflow(SIMPLE)
    with CollectorServer() as collector:
        env = _env(OTEL_EXPORTER_OTLP_ENDPOINT=collector.url)
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "agentctl",
                "--output",
                "jsonl",
                "roll",
                str(path),
                "--db",
                str(tmp_path / "r.db"),
            ],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert result.returncode == 0, result.stderr
    events = [json.loads(line)["data"] for line in result.stdout.splitlines()[:-1]]
    root = collector.one("run plain")
    task = collector.one("task hello")
    by_kind = {("task" if "taskId" in e else "run"): e for e in events}
    assert (by_kind["task"]["traceId"], by_kind["task"]["spanId"]) == (task.trace_id, task.span_id)
    assert (by_kind["run"]["traceId"], by_kind["run"]["spanId"]) == (root.trace_id, root.span_id)
    for event in events:
        assert datetime.fromisoformat(event["at"]).utcoffset() == timedelta(0)


TERMINAL_APPROVAL = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: interactive}
spec:
  policy: {approval: mutations, writableRoots: [out]}
  actions:
    save: {kind: builtin.write}
  tasks:
    - id: write
      uses: action:save
      with: {path: out/ok.txt, content: approved at the terminal}
"""


def _read_until(fd: int, needle: bytes) -> bytes:
    """Read the terminal until ``needle`` shows or the child closes it (a stuck child
    fails the test after a generous bound instead of hanging it)."""
    seen = b""
    deadline = time.monotonic() + 60
    while needle not in seen:
        assert time.monotonic() < deadline, seen
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    return seen


def test_an_approval_at_the_terminal_is_a_wait_span(
    tmp_path: Path, workspace: Path, write_workflow: Any
) -> None:
    path = write_workflow(TERMINAL_APPROVAL)
    with CollectorServer() as collector:
        env = _env(OTEL_EXPORTER_OTLP_ENDPOINT=collector.url)
        argv = [sys.executable, "-m", "agentctl", "roll", str(path), "--db", str(tmp_path / "r.db")]
        pid, fd = pty.fork()
        if pid == 0:  # the child: agentctl with a terminal on stdin, stdout and stderr
            os.execve(sys.executable, [*argv, "--interactive"], env)
        try:
            _read_until(fd, b"[y/N]")
            os.write(fd, b"y\n")
            rest = _read_until(fd, b"\x00")  # everything until the child closes the terminal
        finally:
            _, status = os.waitpid(pid, 0)
            os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, rest
    effect = collector.one("effect builtin.write")
    wait, call = sorted(_children(collector, effect), key=lambda s: s.start_ns)
    assert wait.name == "approval wait builtin.write"
    assert wait.attributes["agentctl.approval.status"] == "approved"
    assert call.start_ns >= wait.end_ns  # dispatched after the decision
    (waited,) = collector.metrics["agentctl.approval.wait"]
    assert waited[0] == {"agentctl.approval.status": "approved"}


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("mode", ["json", "human"])
def test_an_unreachable_collector_changes_neither_the_outcome_nor_the_error_document(
    mode: str, tmp_path: Path, workspace: Path, write_workflow: Any
) -> None:
    """The SDK's export failures never break machine output (stderr holds exactly the one
    error document); in human mode they are one warning per signal."""
    path = write_workflow(FAILING)
    env = _env(
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{_closed_port()}",
        OTEL_EXPORTER_OTLP_TIMEOUT="1",
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentctl",
            "--output",
            mode,
            "roll",
            str(path),
            "--db",
            str(tmp_path / "r.db"),
        ],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 4
    if mode == "json":
        assert json.loads(result.stderr)["error"]["code"] == "subprocess.failed"
    else:
        warnings = [line for line in result.stderr.splitlines() if "telemetry:" in line]
        assert warnings and all(line.startswith("warning: telemetry:") for line in warnings)
        assert "Traceback" not in result.stderr


SIMPLE = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: plain}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    hello: {kind: builtin.shell.exec, command: sh, args: [-c, 'printf %s "${TRACEPARENT:-none}"']}
  tasks:
    - id: hello
      uses: action:hello
"""


def test_without_telemetry_no_opentelemetry_module_is_imported(
    tmp_path: Path, workspace: Path, write_workflow: Any
) -> None:
    path = write_workflow(SIMPLE)
    db = tmp_path / "r.db"
    result = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "agentctl",
            "--output",
            "json",
            "roll",
            path,
            "--db",
            db,
        ],
        cwd=workspace,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "agentctl.engine.run.executor" in result.stderr  # importtime did report the imports
    assert "opentelemetry" not in result.stderr
    assert json.loads(result.stdout)["data"]["output"]["hello"]["stdout"] == "none"
    shown = _agentctl(
        workspace, _env(), "inspect", json.loads(result.stdout)["data"]["runId"], "--db", db
    )
    data = json.loads(shown.stdout)["data"]
    assert data["run"]["traceId"] is None
    assert [e["traceId"] for e in data["effects"]] == [None]


# Hides the SDK the way an install without the `otel` extra lacks it.
_WITHOUT_SDK = """
import sys
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.startswith("opentelemetry.sdk") or name.startswith("opentelemetry.exporter"):
            raise ModuleNotFoundError(name)
        return None
sys.meta_path.insert(0, Hide())
from agentctl.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("flag", [True, False])
def test_without_the_extra(
    flag: bool, tmp_path: Path, workspace: Path, write_workflow: Any
) -> None:
    """``--otel`` without the SDK is a usage error naming the extra; the environment
    variables alone leave telemetry off and the run goes ahead."""
    path = write_workflow(SIMPLE)
    args = ["--output", "json", *(["--otel"] if flag else []), "roll", str(path)]
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_SDK, *args, "--db", str(tmp_path / "r.db")],
        cwd=workspace,
        env=_env(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if flag:
        assert result.returncode == 2, result.stderr
        error = json.loads(result.stderr or result.stdout)["error"]
        assert "agentctl[otel]" in error["hint"]
    else:
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["data"]["state"] == "succeeded"


def test_an_exporter_agentctl_cannot_use_is_refused(
    cli: Any, write_workflow: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    result = cli("--output", "json", "roll", write_workflow(SIMPLE), "--db", tmp_path / "r.db")
    assert result.exit_code == 2
    error = result.error_json()["error"]
    assert "OTEL_TRACES_EXPORTER" in error["message"] and "zipkin" in error["message"]
