"""What a task's fingerprint covers beyond its own record: the definition it runs.

A task names its body (``uses: action:deploy`` or ``agent:reviewer``); what that body does
is decided by the named definition and everything behind it. :func:`resolved_definitions`
gives, for every action and agent of a workflow, the digest of that resolved definition:

- an action: every field but its description — for a ``python.function`` step that
  includes ``sourceDigest``, the digest of the function's source, so changed code is a
  changed step, and ``spec.python`` (the folders it imports from) —, the MCP server an
  ``mcp.call`` names, and the workflow's policy items that change what a step does
  (``IDENTITY_POLICY``);
- an agent: every field but its description, its provider, each tool it is offered (a
  declared tool, an action offered as a tool, or an MCP server's tool), and the same
  policy items.

The compiler puts that digest in the task record (``resolvedDefinition``), so it is part
of ``definitionFingerprint``. The rule, field by field, is in docs/durable-execution.md
("What changes a fingerprint"); ``IDENTITY_FIELDS`` and ``NOT_IDENTITY_FIELDS`` are its
table, and a test fails when a field of the workflow model is in neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from agentctl.compiler.plan import PlanTask
from agentctl.digest import digest_json
from agentctl.spec.models_definitions import A2APeer, Action, Agent, McpServer, Provider, Tool
from agentctl.spec.models_policy import Policy
from agentctl.spec.models_runtime import PythonSettings

__all__ = [
    "IDENTITY_FIELDS",
    "IDENTITY_POLICY",
    "NOT_IDENTITY_FIELDS",
    "resolved_definitions",
    "task_fingerprint",
]

#: Policy fields that change what a step does (the environment it sees, where it runs,
#: what a fetch may return), as opposed to whether it may run at all.
IDENTITY_POLICY = ("environmentAllowlist", "network", "workspaceRoot")

#: Fields, per part of the workflow model, whose change changes the fingerprint of the
#: tasks that use them. ``*`` means every field of that part not listed as not-identity.
IDENTITY_FIELDS: Mapping[str, frozenset[str]] = {
    "Action": frozenset({"*"}),
    "Agent": frozenset({"*"}),
    "Provider": frozenset({"*"}),
    "Tool": frozenset({"*"}),
    "McpServer": frozenset({"*"}),
    "Policy": frozenset(IDENTITY_POLICY),
    # Where a function step imports from decides which code runs; other actions ignore it.
    "PythonSettings": frozenset({"*"}),
}

#: Fields that do not change what a task does, and why (the docs table says the same).
NOT_IDENTITY_FIELDS: Mapping[str, Mapping[str, str]] = {
    "Action": {"description": "documentation only"},
    "Agent": {"description": "documentation only; never sent to the model"},
    "Policy": {
        "writableRoots": "permits or refuses a write; a reused result was allowed when made",
        "networkAllowlist": "permits or refuses a host",
        "processAllowlist": "permits or refuses a command",
        "secretFileRoots": "permits or refuses a secret file",
        "secretProcessAllowlist": "permits or refuses a secret command",
        "providers": "permits or refuses a provider",
        "toolsAllow": "permits or refuses a tool",
        "toolsDeny": "permits or refuses a tool",
        "approval": "decides who must agree, not what runs",
        "nonInteractive": "decides how a pending approval waits",
        "minimumIsolation": "refuses weaker steps at check; a step's own level is identity",
    },
}

_NOT_IDENTITY_ACTION = frozenset(NOT_IDENTITY_FIELDS["Action"])
_NOT_IDENTITY_AGENT = frozenset(NOT_IDENTITY_FIELDS["Agent"])


def _without(definition: Mapping[str, Any], names: frozenset[str]) -> dict[str, Any]:
    return {key: value for key, value in definition.items() if key not in names}


def _declared(model: type[BaseModel], definition: Any) -> Any:
    """The definition as declared: fields at their defaults left out.

    A stored workflow is a full dump (every field, nulls included), and a release that adds
    a field adds it to every dump at its default; leaving defaults out makes the digest
    depend on what a definition says, so a new field at its default changes no identity
    (and an explicit default equals an omitted one).
    """
    if not isinstance(definition, Mapping):
        return definition
    try:
        parsed = model.model_validate(dict(definition))
    except ValueError:
        return {key: value for key, value in definition.items() if value is not None}
    return parsed.model_dump(by_alias=True, exclude_defaults=True, mode="json")


def resolved_definitions(spec: Mapping[str, Any]) -> dict[str, str]:
    """``{"action:NAME" | "agent:NAME": "sha256:…"}`` for every definition of ``spec``."""
    declared_policy = _declared(Policy, spec.get("policy") or {})
    identity_policy = {
        key: declared_policy[key] for key in IDENTITY_POLICY if key in declared_policy
    }
    actions = {name: _declared(Action, a) for name, a in (spec.get("actions") or {}).items()}
    agents = {name: _declared(Agent, a) for name, a in (spec.get("agents") or {}).items()}
    servers = {name: _declared(McpServer, m) for name, m in (spec.get("mcpServers") or {}).items()}
    peers = {name: _declared(A2APeer, p) for name, p in (spec.get("a2aPeers") or {}).items()}
    python = _declared(PythonSettings, spec.get("python") or {})
    action_bodies = {
        name: _action(action, servers, peers, python) for name, action in actions.items()
    }
    out: dict[str, str] = {}
    for name, body in action_bodies.items():
        out[f"action:{name}"] = digest_json({"action": body, "policy": identity_policy})
    providers = {name: _declared(Provider, p) for name, p in (spec.get("providers") or {}).items()}
    tools = {name: _declared(Tool, t) for name, t in (spec.get("tools") or {}).items()}
    for name, agent in agents.items():
        body = {
            "agent": _without(agent, _NOT_IDENTITY_AGENT),
            "provider": providers.get(str(agent.get("provider"))),
            "tools": {
                str(tool): _tool(str(tool), tools, action_bodies, servers)
                for tool in agent.get("tools") or ()
            },
            "policy": identity_policy,
        }
        out[f"agent:{name}"] = digest_json(body)
    return out


def _action(
    action: Mapping[str, Any],
    servers: Mapping[str, Any],
    peers: Mapping[str, Any],
    python: Any,
) -> dict[str, Any]:
    body = _without(action, _NOT_IDENTITY_ACTION)
    if action.get("kind") == "python.function" and python:
        body["python"] = python
    named = {
        "mcp.call": ("server", "mcpServers", servers),
        "a2a.delegate": ("peer", "a2aPeers", peers),
    }
    found = named.get(str(action.get("kind")))
    if found is not None:
        field, section, definitions = found
        name = (action.get("with") or {}).get(field)
        # Named by the task or by a template, the server is only known at run time: every
        # one of the section counts.
        body[section] = (
            {name: definitions.get(name)}
            if isinstance(name, str) and "${{" not in name
            else dict(definitions)
        )
    return body


def _tool(
    name: str,
    tools: Mapping[str, Any],
    actions: Mapping[str, Any],
    servers: Mapping[str, Any],
) -> Any:
    if name.startswith("action:"):
        return {"action": actions.get(name.removeprefix("action:"))}
    if name.startswith("mcp:"):
        server = name.removeprefix("mcp:").split("/", 1)[0]
        return {"mcpServer": servers.get(server)}
    return {"tool": tools.get(name)}


def task_fingerprint(task: PlanTask, resolved: Mapping[str, str]) -> str:
    """``definitionFingerprint`` of ``task`` under this release's rule, with the resolved
    definition taken from ``resolved`` (:func:`resolved_definitions` of the workflow the
    task belongs to).

    Repair computes both sides with this one function — the source run's stored task
    record and workflow, and the changed workflow — so a fingerprint recorded by an older
    release (which covered less) never makes an unchanged task look changed, and a change
    an older release did not cover is still seen.
    """
    record = task.definition_json()
    record.pop("resolvedDefinition", None)
    if task.uses.kind in ("action", "agent"):
        definition = resolved.get(f"{task.uses.kind}:{task.uses.name}", "")
        if definition:
            record["resolvedDefinition"] = definition
    return digest_json(record)
