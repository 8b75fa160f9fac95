"""One task-attempt path (engine/run/attempts.py): the in-process executor and a worker's
claimed tasks execute tasks through the same object, and its defaults have one home."""

from __future__ import annotations

import inspect

from agentctl.engine.run import attempts, claimed_tasks, executor
from agentctl.spec.models_runtime import Runtime


def test_the_default_timeout_is_the_spec_models() -> None:
    assert attempts.default_timeout_seconds({}) == Runtime.default_of("default_timeout_seconds")
    assert attempts.default_timeout_seconds({"runtime": {}}) == Runtime.default_of(
        "default_timeout_seconds"
    )
    assert attempts.default_timeout_seconds({"runtime": {"defaultTimeoutSeconds": 7}}) == 7


def test_nothing_subclasses_the_executor_and_both_paths_build_task_attempts() -> None:
    assert executor.RunExecutor.__subclasses__() == []
    for module in (executor, claimed_tasks):
        source = inspect.getsource(module)
        assert "TaskAttempts(" in source, module.__name__
        assert "defaultTimeoutSeconds" not in source, module.__name__
