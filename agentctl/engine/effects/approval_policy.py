"""Policy decisions for one effect: deny first, then whether a person must approve.

The approval rule and the classes it gates are the compiler's (``compiler.effects``), so a
plan's ``approvalPossible`` and the gate at run time cannot disagree (docs/running.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentctl.compiler.effects import (
    APPROVAL_EFFECT_CLASSES,
    RECORDED_OPERATIONS,
    approval_required,
)
from agentctl.spec.models_policy import Policy

__all__ = ["MUTATING_CLASSES", "deny_reason", "needs_approval"]

MUTATING_CLASSES = APPROVAL_EFFECT_CLASSES


def deny_reason(
    policy: Mapping[str, Any], label: str, *, model: bool, operation: str | None = None
) -> str | None:
    """Why policy denies an effect with this label, or None when it is allowed. A step's
    recorded operation (``RECORDED_OPERATIONS``: a time, an id, an answer) reaches nothing
    that policy guards, so it is never denied."""
    if operation in RECORDED_OPERATIONS:
        return None
    if model:
        providers = list(policy.get("providers") or [])
        if providers and label not in providers:
            return f"provider `{label}` is not in policy.providers"
        return None
    if label in (policy.get("toolsDeny") or []):
        return f"`{label}` is in policy.toolsDeny"
    allow = list(policy.get("toolsAllow") or [])
    if allow and label not in allow:
        return f"`{label}` is not in policy.toolsAllow"
    return None


def needs_approval(
    policy: Mapping[str, Any],
    *,
    effect_class: str,
    risk: str,
    tool_approval: str | None = None,
    mode_override: str | None = None,
    operation: str | None = None,
) -> bool:
    """Whether the approval mode (or a tool's ``approval: always``) gates this effect. A
    step's recorded operation (``RECORDED_OPERATIONS``) is never gated: even ``always``
    asks about effects on the outside world, not about reading the clock."""
    if operation in RECORDED_OPERATIONS:
        return False
    mode = mode_override or str(policy.get("approval") or Policy.default_of("approval"))
    return approval_required(mode, effect_class, risk, tool_approval)


def non_interactive_mode(policy: Mapping[str, Any]) -> str:
    """What an effect needing approval does when nobody can answer now
    (``policy.nonInteractive``; an omitted key means the spec model's default)."""
    return str(policy.get("nonInteractive") or Policy.default_of("non_interactive"))
