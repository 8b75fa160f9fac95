"""Document-model rules: defaults, cross-field rules and their located diagnostics."""

from __future__ import annotations

from textwrap import dedent, indent

import pytest
from pydantic import ValidationError

from agentctl.spec import (
    Action,
    Agent,
    EnvSecretRef,
    Foreach,
    LoadResult,
    Policy,
    Retry,
    Task,
    UsesRef,
    Workflow,
    parse_uses,
    parse_workflow_text,
)

HEADER = "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata:\n  name: m\nspec:\n"


def load(body: str) -> LoadResult:
    """Parse a document whose ``spec`` body starts on line 6."""
    return parse_workflow_text(HEADER + indent(dedent(body), "  "))


def problems(body: str) -> list[tuple[str | None, int | None, str]]:
    result = load(body)
    assert all(d.code == "schema_violation" for d in result.diagnostics)
    return [(d.path, d.line, d.message) for d in result.diagnostics]


def test_defaults_match_the_reference() -> None:
    result = load("tasks: [{id: a, uses: action:x}]\n")
    assert result.document is not None
    spec = result.document.spec
    assert spec.policy.approval == "mutations"
    assert spec.policy.non_interactive == "pause"
    assert spec.policy.workspace_root == "."
    assert spec.policy.network.allowed_schemes == ["https", "http"]
    assert spec.policy.network.connect_timeout_seconds == 10
    assert spec.runtime.max_concurrency == 1
    assert spec.runtime.default_timeout_seconds == 120
    assert spec.compensation.on_failure == "manual"
    assert spec.compensation.approval == "policy"
    assert spec.output.verbose is False and spec.output.show_diff is True
    assert spec.pack_trust.unsigned == "warn"
    task = spec.tasks[0]
    assert task.retry == Retry(max_attempts=1, backoff_ms=0)
    assert task.failure == "stop"
    assert task.needs == [] and task.with_ == {} and task.vars == {}
    assert task.timeout_seconds is None and task.memory_writes is None


def test_output_object_keeps_show_diff_true() -> None:
    result = load("output: {}\ntasks: [{id: a, uses: action:x}]\n")
    assert result.document is not None
    assert result.document.spec.output.show_diff is True


def test_agent_defaults_and_fields() -> None:
    agent = Agent(provider="p", model="m", instructions="hi")
    assert (agent.max_turns, agent.max_tool_calls, agent.max_output_tokens) == (8, 16, 2048)
    assert agent.timeout_seconds == 120 and agent.stream is False


def test_models_are_frozen_and_closed() -> None:
    task = Task(id="a", uses="action:x")
    with pytest.raises(ValidationError):
        task.id = "b"  # type: ignore[misc]
    with pytest.raises(ValidationError) as caught:
        Task.model_validate({"id": "a", "uses": "action:x", "whenn": "x"})
    assert caught.value.errors()[0]["type"] == "extra_forbidden"


def test_snake_case_names_and_camel_case_aliases() -> None:
    task = Task.model_validate(
        {"id": "a", "uses": "action:x", "with": {"k": 1}, "timeoutSeconds": 5}
    )
    assert task.with_ == {"k": 1} and task.timeout_seconds == 5
    dumped = task.model_dump(by_alias=True)
    assert dumped["with"] == {"k": 1} and dumped["timeoutSeconds"] == 5
    assert Foreach(items=[1], as_="x").model_dump(by_alias=True)["as"] == "x"


def test_parse_uses() -> None:
    assert parse_uses("action:set") == UsesRef("action", "set")
    assert parse_uses("workflow:pack.name.def") == UsesRef("workflow", "pack.name.def")
    assert parse_uses("router") == UsesRef("router", None)
    for bad in ("team:x", "action:", "set", "Router"):
        with pytest.raises(ValueError):
            parse_uses(bad)


def test_secret_reference_shapes() -> None:
    policy = Policy.model_validate({"network": {"customCa": {"env": "CA_PEM"}}})
    assert policy.network.custom_ca == EnvSecretRef(env="CA_PEM")


@pytest.mark.parametrize(
    ("task", "message"),
    [
        (
            "{id: a, uses: action:x, foreach: {items: [1]}, matrix: {axes: {k: [1]}}}",
            "`foreach` and `matrix` cannot be used together",
        ),
        ("{id: a, uses: router}", "a `uses: router` task requires `route`"),
        (
            "{id: a, uses: action:x, route: {select: x, cases: [{equals: 1, tasks: [b]}]}}",
            "`route` is only allowed with `uses: router`",
        ),
        (
            "{id: a, uses: router, loop: {maxIterations: 2, while: x}, "
            "route: {select: x, cases: [{equals: 1, tasks: [b]}]}}",
            "a router cannot use `loop`",
        ),
        (
            "{id: a, uses: action:x, when: x, loop: {maxIterations: 2, while: x}}",
            "a loop task cannot also have `when`",
        ),
        (
            "{id: a, uses: 'workflow:s', when: x, retry: {maxAttempts: 2}}",
            "a sub-workflow invocation accepts only id, uses, needs, with and failure; "
            "remove retry, when",
        ),
        ("{id: a, uses: action:x, memoryWrites: [k, k]}", "memoryWrites keys must be unique"),
        ("{id: a, uses: action:x, memoryWrites: ['']}", "memoryWrites keys must be non-empty"),
        (
            "{id: a, uses: router, route: {select: x, cases: [{equals: s, tasks: [b]}, "
            "{equals: s, tasks: [c]}]}}",
            'two route cases have the same `equals` value "s"',
        ),
        (
            "{id: a, uses: router, route: {select: x, cases: [{equals: 1, tasks: [b]}], "
            "default: [b]}}",
            "route destination `b` is listed more than once",
        ),
    ],
)
def test_task_construct_rules(task: str, message: str) -> None:
    found = problems(f"tasks:\n  - {{id: z, uses: action:x}}\n  - {task}\n")
    assert len(found) == 1, found
    path, line, text = found[0]
    assert path is not None and path.startswith("spec.tasks[1]")
    assert line == 8
    assert text.endswith(message)


def test_router_cases_compare_json_values_by_type() -> None:
    body = (
        "tasks:\n  - {id: r, uses: router, route: {select: x, cases: ["
        "{equals: 1, tasks: [a]}, {equals: 1.0, tasks: [b]}, {equals: '1', tasks: [c]}, "
        "{equals: true, tasks: [d]}, {equals: {k: 1}, tasks: [e]}]}}\n"
    )
    assert load(body).ok


def test_subworkflow_invocation_may_set_default_retry_and_failure() -> None:
    body = (
        "subworkflows:\n  s: {version: 1.0.0, inputSchema: {}, outputSchema: {}, tasks: []}\n"
        "tasks:\n  - {id: a, uses: 'workflow:s', retry: {maxAttempts: 1}, failure: continue,"
        " needs: [], with: {k: 1}}\n"
    )
    assert load(body).ok


@pytest.mark.parametrize(
    ("definition", "path", "message"),
    [
        (
            "agents: {a: {provider: p, model: m}}",
            "spec.agents.a",
            "exactly one of `instructions` and `instructionsFile` must be set",
        ),
        (
            "agents: {a: {provider: p, model: m, instructions: x, instructionsFile: y}}",
            "spec.agents.a",
            "exactly one of `instructions` and `instructionsFile` must be set",
        ),
        (
            "agents: {a: {provider: p, model: m, instructions: x, reasoning: {effort: huge}}}",
            "spec.agents.a.reasoning.effort",
            "must be 'none', 'low', 'medium', 'high', 'xhigh' or 'max', got \"huge\"",
        ),
        (
            "providers: {az: {kind: azure_openai}}",
            "spec.providers.az",
            "an `azure_openai` provider requires `endpoint`",
        ),
        (
            "actions: {w: {kind: builtin.write, idempotency: keyed}}",
            "spec.actions.w",
            "`idempotency` may only be declared on mcp.call, extension.process and python.function",
        ),
        (
            "actions: {w: {kind: builtin.assign, command: ls, cwd: x}}",
            "spec.actions.w",
            "command, cwd only apply to builtin.shell.exec and extension.process",
        ),
        (
            "actions: {s: {kind: builtin.shell.exec}}",
            "spec.actions.s",
            "a `builtin.shell.exec` action requires `command`",
        ),
        (
            "actions: {s: {kind: builtin.shell.exec, command: make, timeoutSeconds: 90000}}",
            "spec.actions.s",
            "timeoutSeconds must be between 1 and 86400, got 90000",
        ),
        (
            "actions: {s: {kind: builtin.shell.exec, command: make, isolation: container}}",
            "spec.actions.s",
            "`container` is required exactly when `isolation: container`",
        ),
        (
            "actions: {s: {kind: builtin.shell.exec, command: make, stdoutLimitBytes: 0}}",
            "spec.actions.s.stdoutLimitBytes",
            "must be between 1 and 16777216, got 0",
        ),
        (
            "actions: {s: {kind: builtin.shell.exec, command: make, isolation: container, "
            "container: {image: 'alpine:3'}}}",
            "spec.actions.s.container.image",
            "a container image must be pinned: `NAME@sha256:<64 hex>`",
        ),
        (
            "actions: {e: {kind: extension.process, command: x, idempotency: keyed}}",
            "spec.actions.e",
            "`protocolVersion` must be `agentctl.dev/process-extension/v1`",
        ),
        (
            "actions: {e: {kind: extension.process, command: x}}",
            "spec.actions.e",
            "an extension.process action requires `idempotency`",
        ),
        (
            "actions: {m: {kind: mcp.call, capabilities: [x]}}",
            "spec.actions.m",
            "capabilities only apply to extension.process",
        ),
        ("actions: {m: {kind: builtin.nope}}", "spec.actions.m.kind", "must be 'builtin.assign'"),
        (
            "runtime: {budgets: {maxCostMicrousd: 5}}",
            "spec.runtime",
            "`budgets.maxCostMicrousd` requires `runtime.pricing`",
        ),
        (
            "runtime: {budgets: {maxTasks: 0}}",
            "spec.runtime.budgets.maxTasks",
            "must be greater than 0, got 0",
        ),
        (
            "runtime: {pricing: {version: v1, models: {gpt: {inputMicrousdPerMillionTokens: 1, "
            "outputMicrousdPerMillionTokens: 1}}}}",
            "spec.runtime.pricing.models",
            "pricing key `gpt` must look like `<provider name>/<model>`",
        ),
        (
            "memory: {longTerm: {retentionDays: 40000}}",
            "spec.memory.longTerm.retentionDays",
            "must be between 1 and 36500, got 40000",
        ),
        (
            "mcpServers: {m: {url: 'https://x', timeoutSeconds: 0}}",
            "spec.mcpServers.m.timeoutSeconds",
            "must be between 1 and 86400, got 0",
        ),
        (
            "a2aPeers: {p: {cardUrl: 'https://x', maxPolls: 1001}}",
            "spec.a2aPeers.p.maxPolls",
            "must be between 1 and 1000, got 1001",
        ),
        (
            "policy: {network: {allowedSchemes: []}}",
            "spec.policy.network.allowedSchemes",
            "must have at least 1 item",
        ),
        (
            "policy: {network: {allowedPorts: [0]}}",
            "spec.policy.network.allowedPorts[0]",
            "must be between 1 and 65535, got 0",
        ),
        (
            "subworkflows: {s: {version: v1, inputSchema: {}, outputSchema: {}, tasks: []}}",
            "spec.subworkflows.s.version",
            "version `v1` is not a semantic version such as 1.2.0",
        ),
        (
            "packs: [{name: p, version: 1.0.0}]",
            "spec.packs[0]",
            "a pack needs either `path` and `integrity`, or `source`",
        ),
        (
            "packs: [{name: p, version: 1.0.0, source: {git: 'https://g', rev: main}}]",
            "spec.packs[0].source.rev",
            "rev must be a full 40-hex commit id",
        ),
        ("packTrust: {unsigned: maybe}", "spec.packTrust.unsigned", "must be 'deny', 'warn'"),
    ],
)
def test_definition_rules(definition: str, path: str, message: str) -> None:
    found = problems(f"{definition}\ntasks: [{{id: a, uses: action:x}}]\n")
    assert len(found) == 1, found
    got_path, line, text = found[0]
    assert got_path == path
    assert line == 6
    assert message in text


def test_legacy_tool_compensation_field_has_a_specific_help() -> None:
    body = """\
    tools:
      t:
        kind: builtin.echo
        description: echo
        inputSchema: {}
        outputSchema: {}
        capability: internal
        risk: low
        effectClass: pure
        idempotency: pure
        retrySafe: true
        timeoutSeconds: 5
        compensation: {uses: action:x}
    tasks: [{id: a, uses: action:x}]
    """
    (d,) = load(body).diagnostics
    assert (d.path, d.line) == ("spec.tools.t.compensation", 18)
    assert d.help is not None and "`compensation` was removed from tools" in d.help


def test_valid_advanced_sections_parse() -> None:
    digest = "sha256:" + "a" * 64
    body = f"""\
    packs:
      - {{name: example.utility, version: 1.0.0, path: packs/u, integrity: "{digest}"}}
      - name: remote
        version: 2.0.0
        source: {{url: "https://x/p.tgz", integrity: "{digest}"}}
        signature: {{bundle: b, identity: i, issuer: s}}
    packTrust: {{unsigned: deny, identities: [{{identity: i, issuer: s}}]}}
    actions:
      ext:
        kind: extension.process
        command: tool
        idempotency: keyed
        protocolVersion: agentctl.dev/process-extension/v1
        inputSchema: {{type: object}}
        outputSchema: {{type: object}}
        capabilities: [scan]
        isolation: container
        container: {{image: "repo/img@{digest}", runtime: podman}}
    memory:
      longTerm: {{namespace: team, embedding: {{provider: local_hash, dimensions: 128}}}}
    policy:
      network: {{allowPrivate: true, customCa: {{file: /etc/ca.pem}}}}
      secretProcessAllowlist: [pass]
    providers:
      o: {{kind: openai, credential: {{process: {{command: pass, args: [show, key]}}}}}}
    tasks: [{{id: a, uses: action:ext}}]
    """
    result = load(body)
    assert result.diagnostics == []
    assert result.document is not None
    action = result.document.spec.actions["ext"]
    assert isinstance(action, Action)
    assert action.container is not None and action.container.runtime == "podman"
    assert action.container.memory_limit_bytes == 268435456


def test_workflow_round_trips_through_its_dump() -> None:
    result = load("tasks: [{id: a, uses: action:x, loop: {maxIterations: 2, while: x}}]\n")
    assert result.document is not None
    dumped = result.document.model_dump(by_alias=True)
    assert Workflow.model_validate(dumped) == result.document


def test_command_provider_kind_fields() -> None:
    from agentctl.spec import parse_workflow_text

    def load(provider: str) -> list[tuple[str, str | None]]:
        text = (
            "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: x}\nspec:\n"
            f"  providers:\n    p: {provider}\n  tasks: [{{id: a, uses: 'action:x'}}]\n"
            "  actions: {x: {kind: builtin.assign}}\n"
        )
        return [(d.code, d.path) for d in parse_workflow_text(text).diagnostics]

    assert load("{kind: command, command: claude, args: [-p], promptVia: argv}") == []
    assert load("{kind: command}") == [("schema_violation", "spec.providers.p")]
    assert load("{kind: command, command: x, endpoint: 'http://h'}") == [
        ("schema_violation", "spec.providers.p")
    ]
    assert load("{kind: fake, command: cat}") == [("schema_violation", "spec.providers.p")]
    assert load("{kind: command, command: x, promptVia: file}")[0][0] == "schema_violation"
