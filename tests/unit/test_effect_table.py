"""One effect-classification table: the compiler declares and the engine journals the same
class, risk, idempotency and label for an operation, and both apply one approval rule."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path
from typing import get_args

import pytest

from agentctl.compiler.effects import (
    ACTION_KINDS,
    APPROVAL_EFFECT_CLASSES,
    EFFECT_CLASSES,
    MUTATING_EFFECT_CLASSES,
    NON_MUTATING_EFFECT_CLASSES,
    EffectSpec,
    approval_possible,
    kind_effect,
)
from agentctl.engine.effects import journal
from agentctl.engine.effects.approval_policy import needs_approval
from agentctl.engine.recovery.compensation import NON_MUTATING
from agentctl.spec.models_common import EffectClass, Risk

ENGINE = Path(__file__).resolve().parents[2] / "agentctl" / "engine"


def test_no_engine_module_classifies_an_effect_by_hand() -> None:
    """Operations the engine knows take their classification from the table; only a
    workflow-declared tool (whose class the workflow states) builds one from fields."""
    by_hand = []
    for path in sorted(ENGINE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "EffectSpec"):
                continue
            for keyword in node.keywords:
                if keyword.arg in ("effect_class", "risk") and isinstance(
                    keyword.value, ast.Constant
                ):
                    by_hand.append(f"{path.name}:{node.lineno}")
    assert by_hand == []


@pytest.mark.parametrize(
    "kind", sorted(k for k, info in ACTION_KINDS.items() if info.effect is not None)
)
def test_the_engine_journals_what_the_compiler_declares(kind: str) -> None:
    row = kind_effect(kind)
    spec = journal.EffectSpec.classified(kind, {"x": 1})
    assert (spec.operation, spec.effect_class, spec.risk, spec.idempotency, spec.policy_label) == (
        row.operation,
        row.effect_class,
        row.risk,
        row.idempotency,
        row.policy_label,
    )
    declared = journal.EffectSpec.classified(kind, {}, idempotency="keyed")
    assert declared.idempotency == "keyed"


def test_pure_kinds_record_no_effect() -> None:
    with pytest.raises(KeyError):
        kind_effect("builtin.assign")


def test_classes_partition_the_language() -> None:
    assert EFFECT_CLASSES == set(get_args(EffectClass))
    assert MUTATING_EFFECT_CLASSES | NON_MUTATING_EFFECT_CLASSES == EFFECT_CLASSES
    assert not MUTATING_EFFECT_CLASSES & NON_MUTATING_EFFECT_CLASSES
    assert APPROVAL_EFFECT_CLASSES <= MUTATING_EFFECT_CLASSES
    assert NON_MUTATING == NON_MUTATING_EFFECT_CLASSES


def test_plan_and_gate_agree_on_approval() -> None:
    modes = ("never", "mutations", "high_risk", "always")
    for mode, effect_class, risk, tool in itertools.product(
        modes, sorted(EFFECT_CLASSES), get_args(Risk), ("policy", "never", "always")
    ):
        row = EffectSpec("op", effect_class, risk, "unknown", "label", "cap")
        planned = approval_possible(mode, row, tool)
        gated = needs_approval(
            {"approval": mode}, effect_class=effect_class, risk=risk, tool_approval=tool
        )
        assert planned == gated, (mode, effect_class, risk, tool)
    # The default mode is `mutations` on both sides.
    assert needs_approval({}, effect_class="workspace_mutate", risk="low")
    assert not needs_approval({}, effect_class="observe", risk="critical")
