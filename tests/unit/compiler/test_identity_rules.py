"""The identity rules, walked over generated workflows (docs/durable-execution.md,
"Identities" and "What changes a fingerprint").

- *Equivalence*: keys shuffled at every level, block or flow YAML, comments: the plan
  digest and every task's fingerprint stay the same.
- *Change*: one field of one definition changed, for every field of the workflow model's
  definitions (``CHANGES`` must name each one, so a field added to the model fails here
  until someone decides whether it is identity): exactly the tasks that run that
  definition get a new fingerprint when the field is identity, and no task does when it
  is not.

``AGENTCTL_IDENTITY_EXAMPLES=N`` runs each property N times (a soak; the defaults keep
``make test`` quick).
"""

from __future__ import annotations

import copy
import os
import random
from collections.abc import Callable
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctl.compiler import CompileResult, compile_workflow
from agentctl.compiler.identity import (
    IDENTITY_FIELDS,
    NOT_IDENTITY_FIELDS,
    resolved_definitions,
    task_fingerprint,
)
from agentctl.spec import Workflow
from agentctl.spec.loader import parse_workflow_text
from agentctl.spec.models_definitions import Action, Agent, McpServer, Provider, Tool
from agentctl.spec.models_policy import Policy
from agentctl.spec.models_runtime import PythonSettings
from tests.generators import STYLES, shuffled, yaml_text

TOOL = {
    "kind": "builtin.workspace.read",
    "description": "Read a file.",
    "inputSchema": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": False,
    },
    "outputSchema": {"type": "object"},
    "capability": "filesystem.read",
    "risk": "low",
    "effectClass": "observe",
    "idempotency": "idempotent",
    "retrySafe": True,
    "timeoutSeconds": 10,
}

DEFINITIONS: dict[str, Any] = {
    "providers": {
        "scripted": {"kind": "fake"},
        "spare": {"kind": "fake"},
        "cli": {
            "kind": "command",
            "command": "claude",
            "args": ["-p"],
            "promptVia": "stdin",
            "timeoutSeconds": 60,
            "outputLimitBytes": 100000,
        },
        "remote": {
            "kind": "openai",
            "endpoint": "http://127.0.0.1:9/v1",
            "credential": {"env": "OPENAI_API_KEY"},
        },
    },
    "tools": {"read_file": copy.deepcopy(TOOL), "other_read": copy.deepcopy(TOOL)},
    "mcpServers": {
        "files": {"url": "http://127.0.0.1:9/mcp"},
        "spare": {"url": "http://127.0.0.1:9/spare"},
        "local": {"command": "npx", "args": ["srv"]},
    },
    "a2aPeers": {"reviewer": {"cardUrl": "http://127.0.0.1:9/card.json"}},
    "agents": {
        "rev": {
            "provider": "scripted",
            "model": "m",
            "instructions": "Review.",
            "tools": ["read_file", "action:set", "mcp:files/search", "mcp:local/list"],
        },
        "cli": {"provider": "cli", "model": "default", "instructions": "Go."},
        "remote": {"provider": "remote", "model": "gpt", "instructions": "Go."},
    },
    "actions": {
        "sh": {"kind": "builtin.shell.exec", "command": "echo", "args": ["one"]},
        "ext": {
            "kind": "extension.process",
            "command": "python3",
            "args": ["ext.py"],
            "idempotency": "idempotent",
            "protocolVersion": "agentctl.dev/process-extension/v1",
            "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object"},
            "capabilities": ["math"],
        },
        "set": {"kind": "builtin.assign"},
        "fn": {
            "kind": "python.function",
            "function": "steps:deploy",
            "sourceDigest": "sha256:" + "1" * 64,
        },
        "put": {"kind": "builtin.write"},
        "call": {"kind": "mcp.call", "with": {"server": "files", "tool": "search"}},
        "ask": {"kind": "a2a.delegate", "with": {"peer": "reviewer"}},
    },
    "policy": {
        "approval": "never",
        "processAllowlist": ["echo", "python3", "claude", "npx"],
        "environmentAllowlist": ["OPENAI_API_KEY", "TOKEN"],
        "networkAllowlist": ["127.0.0.1"],
        "writableRoots": ["out"],
    },
}


def _examples(default: int) -> int:
    """Examples per property: ``AGENTCTL_IDENTITY_EXAMPLES=5000`` makes it a soak."""
    return int(os.environ.get("AGENTCTL_IDENTITY_EXAMPLES", default))


USES = [f"action:{name}" for name in DEFINITIONS["actions"]] + [
    f"agent:{name}" for name in DEFINITIONS["agents"]
]
SCALARS = st.one_of(st.integers(-3, 3), st.text("abz", max_size=3), st.booleans())
KEYS = st.sampled_from(["zeta", "alpha", "mid", "b", "a"])


def _input_for(uses: str, draw: st.DrawFn) -> dict[str, Any]:
    nested = draw(st.dictionaries(KEYS, SCALARS, max_size=3))
    if uses == "action:put":
        return {"path": "out/x.txt", "content": "c"}
    if uses == "action:call":
        return {"arguments": nested}
    if uses == "action:ask":
        return {"messageId": "m1", "message": "hi"}
    if uses.startswith("agent:"):
        return {"prompt": "p", "context": nested}
    return {"zeta": draw(SCALARS), "alpha": nested}


@st.composite
def workflows(draw: st.DrawFn) -> dict[str, Any]:
    """A random task graph over every kind of definition, with foreach, matrix, loop, a
    router and a sub-workflow, and `with:` objects whose keys are in no particular order."""
    count = draw(st.integers(1, 6))
    tasks: list[dict[str, Any]] = []
    for index in range(count):
        earlier = [t["id"] for t in tasks]
        needs = draw(st.lists(st.sampled_from(earlier), unique=True, max_size=2)) if earlier else []
        uses = draw(st.sampled_from(USES))
        task: dict[str, Any] = {"id": f"t{index}", "uses": uses, "needs": needs}
        task["with"] = _input_for(uses, draw)
        shape = draw(st.sampled_from(["plain", "foreach", "matrix", "loop"]))
        if shape == "foreach":
            task["foreach"] = {"items": draw(st.lists(SCALARS, min_size=1, max_size=3))}
        elif shape == "matrix":
            task["matrix"] = {"axes": {"y": [1, 2], "x": ["a"]}}
        elif shape == "loop":
            task["loop"] = {"maxIterations": 2, "while": "${{ vars.loopIndex < 1 }}"}
        tasks.append(task)
    if draw(st.booleans()):
        tasks.append(
            {
                "id": "pick",
                "uses": "router",
                "route": {
                    "select": "${{ inputs.channel }}",
                    "cases": [{"equals": "a", "tasks": ["routed"]}],
                    "default": [],
                },
            }
        )
        tasks.append({"id": "routed", "uses": "action:sh", "needs": ["pick"]})
    if draw(st.booleans()):
        tasks.append({"id": "sub", "uses": "workflow:inner", "with": {"n": 1}})
    spec = copy.deepcopy(DEFINITIONS)
    spec["inputs"] = {"channel": "a"}
    spec["subworkflows"] = {
        "inner": {
            "version": "1.0.0",
            "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object"},
            "outputs": {"v": "${{ tasks.step.output.stdout }}"},
            "tasks": [{"id": "step", "uses": "action:sh"}],
        }
    }
    spec["tasks"] = tasks
    return {
        "apiVersion": "agentctl.dev/v1",
        "kind": "Workflow",
        "metadata": {"name": "id"},
        "spec": spec,
    }


def _compile(data: dict[str, Any]) -> CompileResult:
    result = compile_workflow(Workflow.model_validate(data))
    assert result.plan is not None, [d.to_json() for d in result.diagnostics if d.is_error]
    return result


def _fingerprints(result: CompileResult) -> dict[str, str]:
    assert result.plan is not None
    return {tid: task.definition_fingerprint for tid, task in result.plan.tasks.items()}


@settings(max_examples=_examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    workflows(),
    st.randoms(use_true_random=False),
    st.sampled_from(STYLES),
)
def test_equal_documents_have_equal_identities(
    data: dict[str, Any], rng: random.Random, style: str
) -> None:
    first = _compile(data)
    loaded = parse_workflow_text(yaml_text(shuffled(data, rng), style), "shuffled.yaml")
    assert loaded.document is not None, [d.to_json() for d in loaded.diagnostics]
    again = compile_workflow(loaded.document, source=loaded.source)
    assert again.plan is not None and first.plan is not None
    assert again.plan.plan_digest == first.plan.plan_digest
    assert again.plan.workflow_digest == first.plan.workflow_digest
    assert _fingerprints(again) == _fingerprints(first)


# -- change mutations -------------------------------------------------------------------

Change = Callable[[dict[str, Any]], None]


def _set(section: str, name: str, field: str, value: Any) -> Change:
    def change(spec: dict[str, Any]) -> None:
        spec[section][name][field] = value

    return change


def _policy(field: str, value: Any) -> Change:
    def change(spec: dict[str, Any]) -> None:
        spec["policy"][field] = value

    return change


def _COVERED_ELSEWHERE(spec: dict[str, Any]) -> None:  # noqa: N802 - a marker
    """The field cannot change alone (a tool's kind fixes it, or the CLI reads it): its
    side of the rule is still declared, and the test named in the comment covers it."""


def _echo_tool(spec: dict[str, Any]) -> None:
    spec["tools"]["read_file"].update(
        {"kind": "builtin.echo", "capability": "internal", "effectClass": "pure"}
    )
    spec["tools"]["read_file"]["idempotency"] = "pure"


def _instructions_file(spec: dict[str, Any]) -> None:
    del spec["agents"]["cli"]["instructions"]
    spec["agents"]["cli"]["instructionsFile"] = "prompts/cli.md"


def _python_path(spec: dict[str, Any]) -> None:
    spec["python"] = {"path": ["lib"]}


def _sandboxed(section: str, name: str) -> Change:
    def change(spec: dict[str, Any]) -> None:
        spec[section][name]["isolation"] = "sandbox"
        spec[section][name]["sandbox"] = {"network": True, "limits": {"cpuSeconds": 5}}

    return change


def _container(spec: dict[str, Any]) -> None:
    spec["actions"]["sh"]["isolation"] = "container"
    spec["actions"]["sh"]["container"] = {"image": "alpine@sha256:" + "a" * 64}


#: (model, field) -> (the definitions whose tasks it concerns, the change). Every field of
#: the models below must be here: a new field fails ``test_every_model_field_is_classified``.
CHANGES: dict[tuple[str, str], tuple[set[str], Change]] = {
    ("Action", "kind"): ({"action:put"}, _set("actions", "put", "kind", "builtin.assign")),
    ("Action", "description"): ({"action:sh"}, _set("actions", "sh", "description", "d")),
    # ``set`` is also one of agent ``rev``'s tools: its definition is part of rev's identity.
    ("Action", "with"): (
        {"action:set", "agent:rev"},
        _set("actions", "set", "with", {"extra": 1}),
    ),
    ("Action", "command"): ({"action:sh"}, _set("actions", "sh", "command", "python3")),
    ("Action", "args"): ({"action:sh"}, _set("actions", "sh", "args", ["two"])),
    ("Action", "cwd"): ({"action:sh"}, _set("actions", "sh", "cwd", "out")),
    ("Action", "env"): ({"action:sh"}, _set("actions", "sh", "env", {"T": {"env": "TOKEN"}})),
    ("Action", "timeoutSeconds"): ({"action:sh"}, _set("actions", "sh", "timeoutSeconds", 7)),
    ("Action", "stdoutLimitBytes"): (
        {"action:sh"},
        _set("actions", "sh", "stdoutLimitBytes", 4096),
    ),
    ("Action", "stderrLimitBytes"): (
        {"action:sh"},
        _set("actions", "sh", "stderrLimitBytes", 4096),
    ),
    ("Action", "combinedOutputLimitBytes"): (
        {"action:sh"},
        _set("actions", "sh", "combinedOutputLimitBytes", 4096),
    ),
    ("Action", "idempotency"): (
        {"action:ext"},
        _set("actions", "ext", "idempotency", "at_most_once"),
    ),
    ("Action", "isolation"): ({"action:sh"}, _set("actions", "sh", "isolation", "process")),
    ("Action", "container"): ({"action:sh"}, _container),
    ("Action", "sandbox"): ({"action:sh"}, _sandboxed("actions", "sh")),
    # One protocol version exists; the field is identity like every action field.
    ("Action", "protocolVersion"): (set(), _COVERED_ELSEWHERE),
    ("Action", "inputSchema"): (
        {"action:ext"},
        _set("actions", "ext", "inputSchema", {"type": "object", "required": ["alpha"]}),
    ),
    ("Action", "outputSchema"): (
        {"action:ext"},
        _set("actions", "ext", "outputSchema", {"type": "object", "required": ["ok"]}),
    ),
    ("Action", "capabilities"): ({"action:ext"}, _set("actions", "ext", "capabilities", [])),
    ("Action", "function"): ({"action:fn"}, _set("actions", "fn", "function", "steps:ship")),
    ("Action", "python"): ({"action:fn"}, _set("actions", "fn", "python", "python3.12")),
    # The function's source digest: changed code changes the step's fingerprint, so
    # `repair` re-runs it and what depends on it.
    ("Action", "sourceDigest"): (
        {"action:fn"},
        _set("actions", "fn", "sourceDigest", "sha256:" + "2" * 64),
    ),
    ("Agent", "provider"): ({"agent:rev"}, _set("agents", "rev", "provider", "spare")),
    ("Agent", "model"): ({"agent:rev"}, _set("agents", "rev", "model", "m2")),
    ("Agent", "description"): ({"agent:rev"}, _set("agents", "rev", "description", "d")),
    ("Agent", "instructions"): ({"agent:rev"}, _set("agents", "rev", "instructions", "Be brief.")),
    ("Agent", "instructionsFile"): (
        {"agent:cli"},
        _instructions_file,
    ),
    ("Agent", "vars"): ({"agent:rev"}, _set("agents", "rev", "vars", {"tone": "dry"})),
    # Read by the CLI into the task's vars, which the task record holds.
    ("Agent", "varsFiles"): (set(), _COVERED_ELSEWHERE),
    ("Agent", "tools"): ({"agent:rev"}, _set("agents", "rev", "tools", ["read_file"])),
    ("Agent", "maxTurns"): ({"agent:rev"}, _set("agents", "rev", "maxTurns", 3)),
    ("Agent", "maxToolCalls"): ({"agent:rev"}, _set("agents", "rev", "maxToolCalls", 2)),
    ("Agent", "maxOutputTokens"): ({"agent:rev"}, _set("agents", "rev", "maxOutputTokens", 99)),
    ("Agent", "timeoutSeconds"): ({"agent:rev"}, _set("agents", "rev", "timeoutSeconds", 30)),
    ("Agent", "retry"): ({"agent:rev"}, _set("agents", "rev", "retry", {"maxAttempts": 2})),
    ("Agent", "reasoning"): (
        {"agent:remote"},
        _set("agents", "remote", "reasoning", {"effort": "low"}),
    ),
    ("Agent", "structuredOutput"): (
        {"agent:rev"},
        _set("agents", "rev", "structuredOutput", {"type": "object"}),
    ),
    ("Agent", "usageLimit"): (
        {"agent:rev"},
        _set("agents", "rev", "usageLimit", {"maxOutputTokens": 10}),
    ),
    ("Agent", "stream"): ({"agent:rev"}, _set("agents", "rev", "stream", True)),
    ("Agent", "providerOptions"): (
        {"agent:rev"},
        _set("agents", "rev", "providerOptions", {"finalText": "done"}),
    ),
    ("Provider", "kind"): ({"agent:remote"}, _set("providers", "remote", "kind", "anthropic")),
    ("Provider", "endpoint"): (
        {"agent:remote"},
        _set("providers", "remote", "endpoint", "http://127.0.0.1:8/v1"),
    ),
    ("Provider", "credential"): (
        {"agent:remote"},
        _set("providers", "remote", "credential", {"env": "TOKEN"}),
    ),
    ("Provider", "apiVersion"): (
        {"agent:remote"},
        _set("providers", "remote", "apiVersion", "2025-01-01"),
    ),
    ("Provider", "headers"): (
        {"agent:remote"},
        _set("providers", "remote", "headers", {"X-Team": {"env": "TOKEN"}}),
    ),
    ("Provider", "command"): ({"agent:cli"}, _set("providers", "cli", "command", "python3")),
    ("Provider", "args"): ({"agent:cli"}, _set("providers", "cli", "args", ["--print"])),
    ("Provider", "promptVia"): ({"agent:cli"}, _set("providers", "cli", "promptVia", "argv")),
    ("Provider", "timeoutSeconds"): ({"agent:cli"}, _set("providers", "cli", "timeoutSeconds", 9)),
    ("Provider", "outputLimitBytes"): (
        {"agent:cli"},
        _set("providers", "cli", "outputLimitBytes", 2048),
    ),
    ("Provider", "isolation"): ({"agent:cli"}, _set("providers", "cli", "isolation", "sandbox")),
    ("Provider", "sandbox"): ({"agent:cli"}, _sandboxed("providers", "cli")),
    ("Provider", "env"): ({"agent:cli"}, _set("providers", "cli", "env", {"T": {"env": "TOKEN"}})),
    ("Tool", "kind"): ({"agent:rev"}, _echo_tool),
    ("Tool", "description"): ({"agent:rev"}, _set("tools", "read_file", "description", "Read.")),
    ("Tool", "inputSchema"): (
        {"agent:rev"},
        _set(
            "tools",
            "read_file",
            "inputSchema",
            {
                "type": "object",
                "properties": {"file": {"type": "string"}},
                "required": ["file"],
                "additionalProperties": False,
            },
        ),
    ),
    ("Tool", "outputSchema"): (
        {"agent:rev"},
        _set("tools", "read_file", "outputSchema", {"type": "object", "required": ["path"]}),
    ),
    ("Tool", "capability"): (set(), _COVERED_ELSEWHERE),  # fixed by the kind: Tool.kind
    ("Tool", "risk"): ({"agent:rev"}, _set("tools", "read_file", "risk", "medium")),
    ("Tool", "effectClass"): (set(), _COVERED_ELSEWHERE),  # fixed by the kind: Tool.kind
    ("Tool", "idempotency"): (set(), _COVERED_ELSEWHERE),  # fixed by the kind: Tool.kind
    ("Tool", "retrySafe"): ({"agent:rev"}, _set("tools", "read_file", "retrySafe", False)),
    ("Tool", "timeoutSeconds"): ({"agent:rev"}, _set("tools", "read_file", "timeoutSeconds", 5)),
    # Built-in tool kinds (the only ones) may not declare secrets or network.
    ("Tool", "secrets"): (set(), _COVERED_ELSEWHERE),
    ("Tool", "network"): (set(), _COVERED_ELSEWHERE),
    ("Tool", "approval"): ({"agent:rev"}, _set("tools", "read_file", "approval", "always")),
    ("McpServer", "url"): (
        {"agent:rev", "action:call"},
        _set("mcpServers", "files", "url", "http://127.0.0.1:8/mcp"),
    ),
    ("McpServer", "headers"): (
        {"agent:rev", "action:call"},
        _set("mcpServers", "files", "headers", {"Authorization": {"env": "TOKEN"}}),
    ),
    ("McpServer", "timeoutSeconds"): (
        {"agent:rev", "action:call"},
        _set("mcpServers", "files", "timeoutSeconds", 5),
    ),
    ("McpServer", "protocolVersion"): (
        {"agent:rev", "action:call"},
        _set("mcpServers", "files", "protocolVersion", "2025-06-18"),
    ),
    ("McpServer", "command"): ({"agent:rev"}, _set("mcpServers", "local", "command", "python3")),
    ("McpServer", "args"): ({"agent:rev"}, _set("mcpServers", "local", "args", ["srv2"])),
    ("McpServer", "env"): (
        {"agent:rev"},
        _set("mcpServers", "local", "env", {"T": {"env": "TOKEN"}}),
    ),
    ("McpServer", "cwd"): ({"agent:rev"}, _set("mcpServers", "local", "cwd", "out")),
    # Where a function step imports from decides which code runs: its steps only.
    ("PythonSettings", "path"): ({"action:fn"}, _python_path),
    ("Policy", "workspaceRoot"): ({"*"}, _policy("workspaceRoot", "out")),
    ("Policy", "writableRoots"): (set(), _policy("writableRoots", ["out", "tmp"])),
    ("Policy", "environmentAllowlist"): (
        {"*"},
        _policy("environmentAllowlist", ["OPENAI_API_KEY", "TOKEN", "HOME"]),
    ),
    ("Policy", "networkAllowlist"): (set(), _policy("networkAllowlist", ["127.0.0.1", "::1"])),
    ("Policy", "network"): ({"*"}, _policy("network", {"connectTimeoutSeconds": 3})),
    ("Policy", "processAllowlist"): (
        set(),
        _policy("processAllowlist", ["echo", "python3", "claude", "npx", "sh"]),
    ),
    ("Policy", "secretFileRoots"): (set(), _policy("secretFileRoots", ["secrets"])),
    ("Policy", "secretProcessAllowlist"): (set(), _policy("secretProcessAllowlist", ["pass"])),
    ("Policy", "providers"): (set(), _policy("providers", ["fake", "command", "openai"])),
    ("Policy", "toolsAllow"): (set(), _policy("toolsAllow", ["read_file"])),
    ("Policy", "toolsDeny"): (set(), _policy("toolsDeny", ["other_read"])),
    ("Policy", "approval"): (set(), _policy("approval", "mutations")),
    ("Policy", "minimumIsolation"): (set(), _policy("minimumIsolation", "process")),
    ("Policy", "nonInteractive"): (set(), _policy("nonInteractive", "deny_approval")),
}

MODELS: dict[str, type[pydantic.BaseModel]] = {
    "Action": Action,
    "Agent": Agent,
    "Provider": Provider,
    "Tool": Tool,
    "McpServer": McpServer,
    "Policy": Policy,
    "PythonSettings": PythonSettings,
}


def _is_identity(model: str, field: str) -> bool:
    fields = IDENTITY_FIELDS.get(model, frozenset())
    if field in NOT_IDENTITY_FIELDS.get(model, {}):
        return False
    return field in fields or "*" in fields


def test_every_model_field_is_classified() -> None:
    """A field added to the model must be given a change here and a side in the rule."""
    for model, cls in MODELS.items():
        for name, info in cls.model_fields.items():
            field = info.alias or name
            assert (model, field) in CHANGES, f"{model}.{field}: add a change mutation"
            in_rule = field in NOT_IDENTITY_FIELDS.get(model, {}) or bool(
                IDENTITY_FIELDS.get(model)
            )
            assert in_rule, f"{model}.{field} is in neither identity list"
    known = {
        (m, f)
        for m, cls in MODELS.items()
        for n, i in cls.model_fields.items()
        for f in [i.alias or n]
    }
    assert set(CHANGES) <= known, sorted(set(CHANGES) - known)


def _affected(result: CompileResult, definitions: set[str]) -> set[str]:
    assert result.plan is not None
    out = set()
    for task_id, task in result.plan.tasks.items():
        if task.uses.kind not in ("action", "agent"):
            continue
        if "*" in definitions or f"{task.uses.kind}:{task.uses.name}" in definitions:
            out.add(task_id)
    return out


REAL_CHANGES = sorted(
    key for key, (_, change) in CHANGES.items() if change is not _COVERED_ELSEWHERE
)


@settings(max_examples=_examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workflows(), st.sampled_from(REAL_CHANGES))
def test_a_change_reaches_exactly_the_tasks_it_affects(
    data: dict[str, Any], key: tuple[str, str]
) -> None:
    before = _compile(data)
    changed = copy.deepcopy(data)
    definitions, change = CHANGES[key]
    change(changed["spec"])
    after = _compile(changed)
    old, new = _fingerprints(before), _fingerprints(after)
    assert set(old) == set(new)
    moved = {task_id for task_id in old if old[task_id] != new[task_id]}
    expected = _affected(after, definitions) if _is_identity(*key) else set()
    assert moved == expected, key
    # Repair's comparison (both sides under this release's rule) agrees with the plans.
    assert before.plan is not None and after.plan is not None
    source = resolved_definitions(data["spec"])
    target = resolved_definitions(changed["spec"])
    for task_id, task in before.plan.tasks.items():
        same = task_fingerprint(task, source) == task_fingerprint(after.plan.tasks[task_id], target)
        assert same == (task_id not in expected)


@pytest.mark.parametrize("key", sorted(CHANGES))
def test_each_change_keeps_the_workflow_valid(key: tuple[str, str]) -> None:
    data = {
        "apiVersion": "agentctl.dev/v1",
        "kind": "Workflow",
        "metadata": {"name": "id"},
        "spec": {**copy.deepcopy(DEFINITIONS), "tasks": [{"id": "a", "uses": "action:sh"}]},
    }
    CHANGES[key][1](data["spec"])
    _compile(data)
