"""Output contracts: an object meets the plain ``{"type": "object"}`` contract without a
validator pass, and every other case is decided (and worded) by the validator."""

from __future__ import annotations

from typing import Any

import pytest

from agentctl.compiler.plan import PlanTask
from agentctl.engine.run.tasks import check_contract
from agentctl.signals import TaskFailure


def _task(schema: dict[str, Any] | None) -> PlanTask:
    return PlanTask.from_row(
        "t",
        {
            "uses": {"kind": "action", "name": "step"},
            "timeoutSeconds": 60,
            "predictability": "fully_predictable",
            "outputSchema": schema,
        },
    )


def test_an_object_meets_the_plain_object_contract() -> None:
    check_contract(_task({"type": "object"}), {"any": ["thing"]})
    check_contract(_task(None), [1, 2])


@pytest.mark.parametrize("output", [[1], "text", 5, None])
def test_a_non_object_fails_the_plain_object_contract_in_the_validators_words(
    output: Any,
) -> None:
    with pytest.raises(TaskFailure) as info:
        check_contract(_task({"type": "object"}), output)
    assert info.value.code == "output.contract"
    assert f"{output!r} is not of type 'object' at (root)" in info.value.message


def test_a_richer_object_contract_is_still_validated() -> None:
    with pytest.raises(TaskFailure) as info:
        check_contract(_task({"type": "object", "required": ["a"]}), {"b": 1})
    assert "'a' is a required property" in info.value.message
