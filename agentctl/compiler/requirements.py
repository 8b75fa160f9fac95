"""The plan's ``requirements`` (docs/compiler.md): what a run will need from the world.

Providers an agent references (with offered and required capabilities), the declared
tools, and every effect each task may record (docs/durable-execution.md) — enough for a preflight
check or an
approval preview without reading the workflow again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["EffectRequirement", "ProviderRequirement", "Requirements", "ToolRequirement"]


@dataclass(frozen=True, slots=True)
class ProviderRequirement:
    """A provider referenced by at least one agent: what it offers and what agents need."""

    name: str
    kind: str
    agents: tuple[str, ...]
    capabilities: tuple[str, ...]
    required: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "agents": list(self.agents),
            "capabilities": list(self.capabilities),
            "required": list(self.required),
        }


@dataclass(frozen=True, slots=True)
class ToolRequirement:
    name: str
    kind: str
    capability: str
    effect_class: str
    risk: str
    idempotency: str
    approval: str

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "capability": self.capability,
            "effectClass": self.effect_class,
            "risk": self.risk,
            "idempotency": self.idempotency,
            "approval": self.approval,
        }


@dataclass(frozen=True, slots=True)
class EffectRequirement:
    """One effect a task may record (docs/durable-execution.md); ``compensate:`` operations belong
    to its inverse."""

    task: str
    operation: str
    effect_class: str
    risk: str
    idempotency: str
    policy_label: str
    capability: str
    approval_possible: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "operation": self.operation,
            "effectClass": self.effect_class,
            "risk": self.risk,
            "idempotency": self.idempotency,
            "policyLabel": self.policy_label,
            "capability": self.capability,
            "approvalPossible": self.approval_possible,
        }


@dataclass(frozen=True, slots=True)
class Requirements:
    providers: tuple[ProviderRequirement, ...] = ()
    tools: tuple[ToolRequirement, ...] = ()
    effects: tuple[EffectRequirement, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "providers": [p.to_json() for p in self.providers],
            "tools": [t.to_json() for t in self.tools],
            "effects": [e.to_json() for e in self.effects],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Requirements:
        return cls(
            providers=tuple(
                ProviderRequirement(
                    name=p["name"],
                    kind=p["kind"],
                    agents=tuple(p.get("agents", ())),
                    capabilities=tuple(p.get("capabilities", ())),
                    required=tuple(p.get("required", ())),
                )
                for p in data.get("providers", ())
            ),
            tools=tuple(
                ToolRequirement(
                    name=t["name"],
                    kind=t["kind"],
                    capability=t["capability"],
                    effect_class=t["effectClass"],
                    risk=t["risk"],
                    idempotency=t["idempotency"],
                    approval=t["approval"],
                )
                for t in data.get("tools", ())
            ),
            effects=tuple(
                EffectRequirement(
                    task=e["task"],
                    operation=e["operation"],
                    effect_class=e["effectClass"],
                    risk=e["risk"],
                    idempotency=e["idempotency"],
                    policy_label=e["policyLabel"],
                    capability=e["capability"],
                    approval_possible=bool(e["approvalPossible"]),
                )
                for e in data.get("effects", ())
            ),
        )
