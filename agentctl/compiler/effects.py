"""What each operation may do to the world and how predictable it is: the one effect table.

One table drives the compiler's decisions — the declared effects in the plan's
requirements, a task's predictability, whether a task is "potentially mutating" (so it may
declare ``compensate``) — and the engine's: every effect the engine journals takes its
class, risk, idempotency and policy label from here (``engine.effects.journal.classified``), and
the approval rule below is the one both sides apply. Keeping them in one place means a new
action kind cannot be half-known, and ``check`` cannot promise what ``roll`` does not do.
The effect classes are explained in docs/durable-execution.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, get_args

from agentctl.compiler.requirements import EffectRequirement
from agentctl.compiler.task_parts import Predictability
from agentctl.spec.models_common import EffectClass
from agentctl.spec.models_definitions import Tool

__all__ = [
    "ACTION_KINDS",
    "APPROVAL_EFFECT_CLASSES",
    "COMPENSATION_KINDS",
    "EFFECT_CLASSES",
    "INSTRUCTIONS_READ",
    "MCP_LIST_TOOLS",
    "MUTATING_EFFECT_CLASSES",
    "NON_MUTATING_EFFECT_CLASSES",
    "RECORDED_OPERATIONS",
    "REPEATABLE_BODIES",
    "STEP_ASK",
    "STEP_NOW",
    "STEP_UUID",
    "ActionKindInfo",
    "EffectSpec",
    "action_effects",
    "agent_effects",
    "approval_possible",
    "approval_required",
    "kind_effect",
    "mcp_tool_effect",
    "model_effect",
]


@dataclass(frozen=True, slots=True)
class EffectSpec:
    """One row: operation, effect class, risk, idempotency, policy and capability labels."""

    operation: str
    effect_class: str
    risk: str
    idempotency: str
    policy_label: str
    capability: str


@dataclass(frozen=True, slots=True)
class ActionKindInfo:
    effect: EffectSpec | None
    predictability: Predictability


def _spec(op: str, cls: str, risk: str, idem: str, label: str, cap: str) -> EffectSpec:
    return EffectSpec(op, cls, risk, idem, label, cap)


EFFECT_CLASSES = frozenset(get_args(EffectClass))
NON_MUTATING_EFFECT_CLASSES = frozenset({"pure", "observe", "model"})
MUTATING_EFFECT_CLASSES = EFFECT_CLASSES - NON_MUTATING_EFFECT_CLASSES
"""What counts as a mutation for compensation: every class but ``pure``, ``observe`` and
``model``."""
APPROVAL_EFFECT_CLASSES = frozenset(
    {"workspace_mutate", "external_mutate", "process_execution", "remote_agent"}
)
"""The classes policy ``approval: mutations`` (the default) gates."""

INSTRUCTIONS_READ = _spec(
    "agent.instructions.read", "observe", "low", "idempotent", "filesystem.read", "observe"
)
MCP_LIST_TOOLS = _spec(
    "mcp.list_tools", "observe", "low", "idempotent", "mcp.list_tools", "observe"
)


#: What a ``python.function`` step records through its ``ctx`` besides the actions, files,
#: processes and models it reaches (docs/python-steps.md): an answer, a time, an id.
STEP_ASK = _spec("step.ask", "internal_state", "low", "keyed", "step.ask", "internal_state")
STEP_NOW = _spec("step.now", "internal_state", "low", "keyed", "step.now", "internal_state")
STEP_UUID = _spec("step.uuid", "internal_state", "low", "keyed", "step.uuid", "internal_state")

#: The ``ctx`` operations that only record a value — the owner's clock, a random id, a
#: person's answer — and reach nothing outside: policy neither refuses nor gates them, so
#: ``approval: always`` asks about effects on the world, not about reading the time.
RECORDED_OPERATIONS = frozenset(row.operation for row in (STEP_ASK, STEP_NOW, STEP_UUID))

#: A function step's body is journaled as an effect of its own only when what it does
#: outside ``ctx`` may not be repeated; these bodies are re-run from the top instead.
REPEATABLE_BODIES = frozenset({"pure", "idempotent"})


def model_effect(provider: str) -> EffectSpec:
    """A model request through provider entry ``provider``."""
    return _spec(provider, "model", "medium", "at_most_once", provider, "model")


def mcp_tool_effect(entry: str) -> EffectSpec:
    """A call of an agent's ``mcp:SERVER/TOOL`` tool."""
    return _spec(f"tool.{entry}", "network", "medium", "unknown", entry, "network")


def approval_required(
    mode: str, effect_class: str, risk: str, tool_approval: str | None = "policy"
) -> bool:
    """Whether approval mode ``mode`` — or a tool's ``approval: always`` — makes a person
    decide an effect of this class and risk. The compiler and the engine both ask here."""
    if tool_approval == "always" or mode == "always":
        return True
    if mode == "never":
        return False
    if mode == "high_risk":
        return risk in ("high", "critical")
    return effect_class in APPROVAL_EFFECT_CLASSES


ACTION_KINDS: Mapping[str, ActionKindInfo] = {
    "builtin.assign": ActionKindInfo(None, "fully_predictable"),
    "builtin.assert": ActionKindInfo(None, "fully_predictable"),
    "builtin.memory.read": ActionKindInfo(None, "fully_predictable"),
    # Ours (beyond upstream): a question parks the run until a person answers; it has no
    # external effect, but its outcome depends on that person.
    "builtin.ask": ActionKindInfo(None, "requires_execution"),
    # Ours: a deliberate failure (final with `retry: false`, like Marbles' bail).
    "builtin.fail": ActionKindInfo(None, "fully_predictable"),
    # Ours: parks the run until an operator resumes it.
    "builtin.pause": ActionKindInfo(None, "requires_execution"),
    "builtin.read": ActionKindInfo(
        _spec("builtin.read", "observe", "low", "idempotent", "filesystem.read", "observe"),
        "partially_predictable",
    ),
    "builtin.write": ActionKindInfo(
        _spec(
            "builtin.write",
            "workspace_mutate",
            "medium",
            "idempotent",
            "filesystem.write",
            "mutate",
        ),
        "partially_predictable",
    ),
    "builtin.shell.exec": ActionKindInfo(
        _spec("builtin.shell.exec", "process_execution", "high", "unknown", "process.exec", "act"),
        "requires_execution",
    ),
    "extension.process": ActionKindInfo(
        _spec(
            "extension.process",
            "process_execution",
            "high",
            "unknown",
            "extension.process",
            "process.execute",
        ),
        "requires_execution",
    ),
    "builtin.memory.write": ActionKindInfo(
        _spec(
            "builtin.memory.write",
            "internal_state",
            "low",
            "keyed",
            "memory.write",
            "internal_state",
        ),
        "fully_predictable",
    ),
    "builtin.long_term_memory.read": ActionKindInfo(
        _spec("builtin.long_term_memory.read", "observe", "low", "keyed", "memory.read", "observe"),
        "requires_execution",
    ),
    "builtin.long_term_memory.search": ActionKindInfo(
        _spec(
            "builtin.long_term_memory.search", "observe", "low", "keyed", "memory.search", "observe"
        ),
        "requires_execution",
    ),
    "builtin.long_term_memory.write": ActionKindInfo(
        _spec(
            "builtin.long_term_memory.write",
            "external_mutate",
            "medium",
            "keyed",
            "memory.write",
            "mutate",
        ),
        "requires_execution",
    ),
    "builtin.long_term_memory.promote": ActionKindInfo(
        _spec(
            "builtin.long_term_memory.promote",
            "internal_state",
            "low",
            "keyed",
            "memory.promote",
            "internal_state",
        ),
        "fully_predictable",
    ),
    "mcp.call": ActionKindInfo(
        _spec("mcp.call", "network", "medium", "unknown", "mcp.call", "network"),
        "requires_execution",
    ),
    "a2a.delegate": ActionKindInfo(
        _spec("a2a.delegate", "remote_agent", "high", "at_most_once", "a2a.delegate", "network"),
        "requires_execution",
    ),
    # Ours: a step written as a Python function (docs/python-steps.md). The row is its body;
    # what it does through `ctx` is journaled under those operations' own rows.
    "python.function": ActionKindInfo(
        _spec(
            "python.function",
            "process_execution",
            "high",
            "idempotent",
            "python.function",
            "process.execute",
        ),
        "requires_execution",
    ),
}

COMPENSATION_KINDS = frozenset(
    {
        "builtin.write",
        "builtin.shell.exec",
        "builtin.memory.write",
        "builtin.long_term_memory.promote",
        "builtin.long_term_memory.write",
        "mcp.call",
        "a2a.delegate",
    }
)
"""Kinds a ``compensate.uses`` action may have, and what makes an action task mutating."""


def kind_effect(kind: str) -> EffectSpec:
    """The table row of an action kind that records an effect (KeyError for pure kinds)."""
    info = ACTION_KINDS[kind]
    if info.effect is None:
        raise KeyError(f"action kind {kind} records no effect")
    return info.effect


def approval_possible(mode: str, spec: EffectSpec, tool_approval: str = "policy") -> bool:
    """Whether policy ``mode`` — or a tool's ``approval: always`` — may ask a human."""
    return approval_required(mode, spec.effect_class, spec.risk, tool_approval)


def _requirement(
    task: str, spec: EffectSpec, mode: str, *, prefix: str = "", tool_approval: str = "policy"
) -> EffectRequirement:
    return EffectRequirement(
        task=task,
        operation=prefix + spec.operation,
        effect_class=spec.effect_class,
        risk=spec.risk,
        idempotency=spec.idempotency,
        policy_label=spec.policy_label,
        capability=spec.capability,
        approval_possible=approval_possible(mode, spec, tool_approval),
    )


def action_effects(
    task: str, action: Mapping[str, Any], mode: str, *, prefix: str = ""
) -> list[EffectRequirement]:
    """The effect an action task may record (none for pure kinds); ``prefix`` marks inverses."""
    info = ACTION_KINDS.get(str(action.get("kind")))
    if info is None or info.effect is None:
        return []
    spec = info.effect
    declared = action.get("idempotency")
    if action.get("kind") == "python.function" and (declared or spec.idempotency) in (
        REPEATABLE_BODIES
    ):
        return []  # re-run from the top: only what it asks `ctx` for is an effect
    if declared is not None and action.get("kind") in (
        "mcp.call",
        "extension.process",
        "python.function",
    ):
        spec = EffectSpec(
            spec.operation,
            spec.effect_class,
            spec.risk,
            str(declared),
            spec.policy_label,
            spec.capability,
        )
    return [_requirement(task, spec, mode, prefix=prefix)]


def agent_effects(
    task: str,
    agent: Mapping[str, Any],
    tools: Mapping[str, Mapping[str, Any]],
    mode: str,
    spec_actions: Mapping[str, Any] | None = None,
) -> list[EffectRequirement]:
    """Instruction-file read, the model requests (operation = provider name), tool calls."""
    out: list[EffectRequirement] = []
    if agent.get("instructionsFile") is not None:
        out.append(_requirement(task, INSTRUCTIONS_READ, mode))
    provider = str(agent.get("provider", ""))
    out.append(_requirement(task, model_effect(provider), mode))
    for name in agent.get("tools", ()):
        if str(name).startswith("action:"):
            action = (spec_actions or {}).get(str(name)[7:]) or {}
            info = ACTION_KINDS.get(str(action.get("kind")))
            if info is not None and info.effect is not None:
                out.append(_requirement(task, info.effect, mode))
            continue
        if str(name).startswith("mcp:"):
            out.append(_requirement(task, mcp_tool_effect(str(name)), mode))
            continue
        tool = tools.get(name)
        if tool is None:
            continue
        spec = _spec(
            f"tool.{name}",
            str(tool.get("effectClass")),
            str(tool.get("risk")),
            str(tool.get("idempotency")),
            name,
            str(tool.get("capability")),
        )
        out.append(
            _requirement(
                task,
                spec,
                mode,
                tool_approval=str(tool.get("approval", Tool.default_of("approval"))),
            )
        )
    return out
