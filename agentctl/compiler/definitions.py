"""Checks of the named definitions (docs/providers.md, docs/workflow-language.md, docs/budgets.md):
tools, agents with their
provider capabilities and price entries, and statically certain policy denials.

Policy findings are warnings (``policy_denied``): upstream decides them per effect at run
time, so a workflow that upstream runs (and that fails one task) must still compile here.
The warning just says it earlier.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from agentctl.compiler.capabilities import (
    PROVIDER_OPTIONS,
    option_type_error,
    provider_capabilities,
    required_capabilities,
)
from agentctl.compiler.drafts import Reporter, sub_path
from agentctl.compiler.effects import ACTION_KINDS
from agentctl.compiler.resolve import Node
from agentctl.compiler.schemas import SchemaChecker
from agentctl.spec.models_definitions import PROCESS_ACTION_KINDS
from agentctl.spec.models_policy import ISOLATION_LEVELS

__all__ = ["check_agents", "check_policy", "check_tools", "negotiated_capabilities"]

_TOOL_KINDS: Mapping[str, tuple[str, str, tuple[str, ...]]] = {
    "builtin.workspace.read": ("filesystem.read", "observe", ("idempotent",)),
    "builtin.workspace.write": ("filesystem.write", "workspace_mutate", ("idempotent", "keyed")),
    "builtin.echo": ("internal", "pure", ("pure",)),
}

_CAPABILITY_FIELDS: Mapping[str, tuple[str | int, ...]] = {
    "function_tools": ("tools",),
    "continuation": ("tools",),
    "structured_output": ("structuredOutput",),
    "reasoning_effort": ("reasoning",),
    "reasoning_mode": ("reasoning", "mode"),
    "cost_metadata": ("usageLimit", "maxCostUsd"),
    "persisted_reasoning": ("providerOptions", "reasoningContext"),
    "prompt_caching": ("providerOptions",),
    "multiple_function_calls": ("providerOptions", "parallelToolCalls"),
    "response_storage": ("providerOptions", "store"),
    "streaming": ("stream",),
}


def check_tools(spec: Mapping[str, Any], reporter: Reporter, schemas: SchemaChecker) -> None:
    for name, tool in (spec.get("tools") or {}).items():
        base = sub_path("spec.tools", name)
        for field in ("inputSchema", "outputSchema"):
            schemas.check(tool.get(field), sub_path(base, field), f"tool `{name}` {field}")
        schema = tool.get("inputSchema")
        # Only a valid schema is judged for strictness (an invalid one is reported above).
        if isinstance(schema, dict) and schemas.problem(schema) is None:
            properties = schema.get("properties") or {}
            required = set(schema.get("required") or ())
            if (
                schema.get("type") != "object"
                or schema.get("additionalProperties") is not False
                or not isinstance(properties, dict)
                or not set(properties) <= required
            ):
                reporter.error(
                    "schema_violation",
                    f"tool `{name}` inputSchema must be a strict object: type object, "
                    "additionalProperties false and every property required",
                    sub_path(base, "inputSchema"),
                    help="add `additionalProperties: false` and list every property in required",
                )
        fixed = _TOOL_KINDS.get(str(tool.get("kind")))
        if fixed is not None:
            capability, effect_class, idempotency = fixed
            for field, expected in (
                ("capability", (capability,)),
                ("effectClass", (effect_class,)),
                ("idempotency", idempotency),
            ):
                if tool.get(field) not in expected:
                    reporter.error(
                        "schema_violation",
                        f"tool `{name}` of kind {tool.get('kind')} must declare {field} "
                        + " or ".join(f"`{value}`" for value in expected),
                        sub_path(base, field),
                        help=f"the {field} of a built-in tool kind is fixed",
                    )
            for field in ("secrets", "network"):
                if tool.get(field):
                    reporter.error(
                        "schema_violation",
                        f"built-in tool `{name}` must not declare {field}",
                        sub_path(base, field),
                        help=f"remove {field}",
                    )


def negotiated_capabilities(spec: Mapping[str, Any]) -> dict[str, list[str]]:
    """Per agent, the capabilities it requires (in the upstream check order)."""
    pricing_present = (spec.get("runtime") or {}).get("pricing") is not None
    return {
        name: required_capabilities(agent, pricing_present=pricing_present)
        for name, agent in (spec.get("agents") or {}).items()
    }


#: Action kinds an agent may call as a tool (`action:<name>` in its tools). Memory and
#: question kinds change run state or wait for a person, which a model turn cannot.
ACTION_TOOL_KINDS = frozenset(
    {
        "builtin.read",
        "builtin.write",
        "builtin.shell.exec",
        "builtin.assign",
        "builtin.assert",
        "mcp.call",
        "a2a.delegate",
        "extension.process",
    }
)


def check_agents(spec: Mapping[str, Any], reporter: Reporter, schemas: SchemaChecker) -> None:
    providers: Mapping[str, Any] = spec.get("providers") or {}
    tools: Mapping[str, Any] = spec.get("tools") or {}
    runtime = spec.get("runtime") or {}
    pricing = runtime.get("pricing")
    priced_models: Mapping[str, Any] = (pricing or {}).get("models") or {}
    cost_budget = (runtime.get("budgets") or {}).get("maxCostMicrousd") is not None
    required_by_agent = negotiated_capabilities(spec)
    for name, agent in (spec.get("agents") or {}).items():
        base = sub_path("spec.agents", name)
        servers: Mapping[str, Any] = spec.get("mcpServers") or {}
        for index, tool in enumerate(agent.get("tools") or ()):
            if str(tool).startswith("mcp:"):
                # Ours: `mcp:<server>/<tool>` offers a tool of a declared MCP server.
                server, _, remote = str(tool)[4:].partition("/")
                if server not in servers or not remote:
                    reporter.error(
                        "missing_reference",
                        f"agent `{name}` lists MCP tool `{tool}`, but `{server}` is not in "
                        "spec.mcpServers"
                        if remote
                        else f"agent `{name}` lists `{tool}`, which names no remote tool",
                        sub_path(base, "tools", index),
                        "write `mcp:<server>/<tool>` with a server from spec.mcpServers",
                    )
            elif str(tool).startswith("action:"):
                # Ours: `action:<name>` offers a named action to the model as a tool.
                action = (spec.get("actions") or {}).get(str(tool)[7:])
                if action is None:
                    reporter.error(
                        "missing_reference",
                        f"agent `{name}` lists `{tool}`, but no such action is defined",
                        sub_path(base, "tools", index),
                        "define it under spec.actions",
                    )
                elif action.get("kind") not in ACTION_TOOL_KINDS:
                    reporter.error(
                        "unsupported_capability",
                        f"agent `{name}` lists `{tool}` ({action.get('kind')}), which cannot "
                        "be offered as a tool",
                        sub_path(base, "tools", index),
                        "offer read, write, shell, assign, assert, MCP, A2A or extension actions",
                    )
            elif tool not in tools:
                reporter.error(
                    "missing_reference",
                    f"agent `{name}` lists unknown tool `{tool}`",
                    sub_path(base, "tools", index),
                    "define it under spec.tools, or name an MCP tool as mcp:<server>/<tool>",
                )
        if agent.get("structuredOutput") is not None:
            schemas.check(
                agent["structuredOutput"],
                sub_path(base, "structuredOutput"),
                f"agent `{name}` structuredOutput",
            )
        provider_name = str(agent.get("provider"))
        provider = providers.get(provider_name)
        if provider is None:
            reporter.error(
                "missing_reference",
                f"agent `{name}` refers to unknown provider `{provider_name}`",
                sub_path(base, "provider"),
                "define it under spec.providers",
            )
            continue
        kind = str(provider.get("kind"))
        allowed_options = PROVIDER_OPTIONS.get(kind, {})
        for option, value in (agent.get("providerOptions") or {}).items():
            shape = allowed_options.get(option)
            option_path = sub_path(base, "providerOptions", option)
            if shape is None:
                reporter.error(
                    "unsupported_capability",
                    f"provider kind `{kind}` has no option `{option}` (agent `{name}`)",
                    option_path,
                    help="allowed options: " + (", ".join(sorted(allowed_options)) or "none"),
                )
            elif (why := option_type_error(shape, value)) is not None:
                reporter.error(
                    "schema_violation", f"agent `{name}` option `{option}` {why}", option_path
                )
        offered = provider_capabilities(provider)
        missing = [cap for cap in required_by_agent[name] if cap not in offered]
        if missing:
            reporter.error(
                "unsupported_capability",
                f"provider `{provider_name}` ({kind}) does not support requested capability "
                f"`{missing[0]}` for agent `{name}`",
                sub_path(base, *_CAPABILITY_FIELDS.get(missing[0], ())),
                help=f"remove what needs `{missing[0]}` or use a provider kind that offers it",
            )
        wants_price = cost_budget or (
            pricing is not None and (agent.get("usageLimit") or {}).get("maxCostUsd") is not None
        )
        price_key = f"{provider_name}/{agent.get('model')}"
        if wants_price and price_key not in priced_models:
            reporter.error(
                "missing_reference",
                f"agent `{name}` has no price entry `{price_key}` in runtime.pricing.models",
                sub_path(base, "model"),
                help=f"add `{price_key}` to runtime.pricing.models",
            )


def check_policy(spec: Mapping[str, Any], nodes: Mapping[str, Node], reporter: Reporter) -> None:
    """Warn about effects the policy is certain to deny (once per definition)."""
    policy = spec.get("policy") or {}
    allowed_providers = set(policy.get("providers") or ())
    tools_allow = set(policy.get("toolsAllow") or ())
    tools_deny = set(policy.get("toolsDeny") or ())
    processes = set(policy.get("processAllowlist") or ())
    actions: Mapping[str, Any] = spec.get("actions") or {}
    agents: Mapping[str, Any] = spec.get("agents") or {}
    warned: set[str] = set()
    for node in nodes.values():
        name = str(node.uses.name)
        _check_minimum_isolation(spec, node, reporter, warned)
        if node.uses.kind == "agent" and allowed_providers and f"agent:{name}" not in warned:
            warned.add(f"agent:{name}")
            provider = str(agents[name].get("provider"))
            if provider not in allowed_providers:
                reporter.warning(
                    "policy_denied",
                    f"agent `{name}` calls provider `{provider}`, which policy.providers does "
                    "not allow; its tasks will fail",
                    sub_path("spec.agents", name, "provider"),
                    help=f"add `{provider}` to policy.providers",
                )
        if node.uses.kind == "agent" and f"tools:{name}" not in warned:
            warned.add(f"tools:{name}")
            for index, tool in enumerate(agents[name].get("tools") or ()):
                if tool in tools_deny or (tools_allow and tool not in tools_allow):
                    reporter.warning(
                        "policy_denied",
                        f"agent `{name}` may call tool `{tool}`, which policy denies; such a "
                        "call fails the task",
                        sub_path("spec.agents", name, "tools", index),
                        help=f"allow `{tool}` in policy.toolsAllow / remove it from "
                        "policy.toolsDeny, or drop the tool from the agent",
                    )
        if node.uses.kind != "action" or f"action:{name}" in warned:
            continue
        warned.add(f"action:{name}")
        action = actions[name]
        info = ACTION_KINDS.get(str(action.get("kind")))
        label = info.effect.policy_label if info is not None and info.effect else None
        if label is not None and (
            label in tools_deny or (tools_allow and label not in tools_allow)
        ):
            reporter.warning(
                "policy_denied",
                f"action `{name}` records `{label}` effects, which policy denies; its tasks "
                "will fail",
                sub_path("spec.actions", name, "kind"),
                help=f"allow `{label}` in policy.toolsAllow / remove it from policy.toolsDeny",
            )
        command = action.get("command")
        if isinstance(command, str) and posixpath.basename(command) not in processes:
            reporter.warning(
                "policy_denied",
                f"action `{name}` runs `{posixpath.basename(command)}`, which is not in "
                "policy.processAllowlist; its tasks will fail",
                sub_path("spec.actions", name, "command"),
                help=f"add `{posixpath.basename(command)}` to policy.processAllowlist",
            )


def _check_minimum_isolation(
    spec: Mapping[str, Any], node: Node, reporter: Reporter, seen: set[str]
) -> None:
    """Refuse a process the task would start with less isolation than
    ``policy.minimumIsolation`` (once per definition): a process action's declared
    ``isolation``, or the ``isolation`` of an agent's ``command`` provider (an agent CLI)."""
    minimum = str((spec.get("policy") or {}).get("minimumIsolation") or "process")
    if minimum == ISOLATION_LEVELS[0]:
        return
    name = str(node.uses.name)
    key = f"isolation:{node.uses.kind}:{name}"
    if key in seen:
        return
    seen.add(key)
    if node.uses.kind == "action":
        action = (spec.get("actions") or {}).get(name) or {}
        if action.get("kind") not in PROCESS_ACTION_KINDS:
            return
        level = str(action.get("isolation") or "process")
        if ISOLATION_LEVELS.index(level) < ISOLATION_LEVELS.index(minimum):
            reporter.error(
                "policy_denied",
                f"action `{name}` runs with `isolation: {level}`, less than "
                f"policy.minimumIsolation `{minimum}`",
                sub_path("spec.actions", name, "isolation"),
                help=f"declare `isolation: {minimum}` (or stronger) on the action; see "
                "docs/isolation.md",
            )
    elif node.uses.kind == "agent":
        agent = (spec.get("agents") or {}).get(name) or {}
        provider = str(agent.get("provider"))
        entry = (spec.get("providers") or {}).get(provider) or {}
        level = str(entry.get("isolation") or "process")
        if entry.get("kind") == "command" and ISOLATION_LEVELS.index(
            level
        ) < ISOLATION_LEVELS.index(minimum):
            reporter.error(
                "policy_denied",
                f"agent `{name}` runs provider `{provider}` (kind command) with `isolation: "
                f"{level}`, less than policy.minimumIsolation `{minimum}`",
                sub_path("spec.agents", name, "provider"),
                help=f"declare `isolation: {minimum}` on provider `{provider}` (agent CLIs "
                "go as far as `sandbox`), or use an API provider; see docs/isolation.md",
            )
