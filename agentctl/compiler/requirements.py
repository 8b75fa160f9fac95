"""The plan's ``requirements`` (docs/compiler.md): what a run will need from the world.

Providers an agent references (with offered and required capabilities), the declared
tools, and every effect each task may record (docs/durable-execution.md) — enough for a preflight
check or an
approval preview without reading the workflow again.

They are typed records (:mod:`agentctl.typed_records`) stored inside the plan, so their
JSON form is part of the plan digest: keys in field order, tuples written as lists.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic.dataclasses import dataclass

from agentctl.typed_records import CAMEL, CamelRecord

__all__ = ["EffectRequirement", "ProviderRequirement", "Requirements", "ToolRequirement"]


@dataclass(frozen=True, slots=True, config=CAMEL)
class ProviderRequirement(CamelRecord):
    """A provider referenced by at least one agent: what it offers and what agents need."""

    name: str
    kind: str
    # Defaults only for plans stored before these keys were always written.
    agents: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = ()
    required: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, config=CAMEL)
class ToolRequirement(CamelRecord):
    name: str
    kind: str
    capability: str
    effect_class: str
    risk: str
    idempotency: str
    approval: str


@dataclass(frozen=True, slots=True, config=CAMEL)
class EffectRequirement(CamelRecord):
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


@dataclass(frozen=True, slots=True, config=CAMEL)
class Requirements(CamelRecord):
    record_name: ClassVar[str] = "plan requirements"

    providers: tuple[ProviderRequirement, ...] = ()
    tools: tuple[ToolRequirement, ...] = ()
    effects: tuple[EffectRequirement, ...] = ()
