"""What a task body gets to work with, and what it hands back to the scheduler."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentctl import tracecontext
from agentctl.compiler.plan import PlanTask
from agentctl.engine.core.records import Attempt
from agentctl.engine.effects.gate import EffectGate
from agentctl.error_codes import ErrorCode
from agentctl.policy.paths import WorkspacePolicy
from agentctl.signals import TaskFailure

__all__ = ["IDEMPOTENCY_KEY_VARIABLE", "TaskEnv", "TaskResult", "effect_process_env"]

#: The variable through which a process learns its effect's idempotency key.
IDEMPOTENCY_KEY_VARIABLE = "AGENTCTL_IDEMPOTENCY_KEY"


def effect_process_env(resolved: Mapping[str, str], idempotency_key: str) -> dict[str, str]:
    """The environment of a process that performs an effect: the action's resolved ``env``
    plus the effect's idempotency key, so a script can hand it to an API that drops
    duplicate requests. The key is the effect id: the same on every dispatch of that effect
    (a resume that runs a never-started request again included), new for a fresh attempt.
    It is not part of the effect's recorded input (it is derived from it), and agentctl's
    value wins over an action ``env`` entry of the same name. With telemetry on, the
    process also gets ``TRACEPARENT``: the W3C trace context of the call that runs it."""
    return tracecontext.with_environment({**resolved, IDEMPOTENCY_KEY_VARIABLE: idempotency_key})


@dataclass
class TaskEnv:
    run_id: str
    task: PlanTask
    attempt: Attempt
    input: Any
    vars: Mapping[str, Any]
    memory: Mapping[str, Any]
    workflow: Mapping[str, Any]
    gate: EffectGate
    workspace: WorkspacePolicy
    base_dir: Path
    environ: Mapping[str, str]
    check: bool = False
    diff: bool = False
    max_concurrency: int = 1
    default_timeout_seconds: int = 120
    top_level_timeouts: Mapping[str, int] = field(default_factory=dict)
    secrets: list[str] = field(default_factory=list)
    compensation: bool = False
    # Workspace files this attempt changed: (artifact name, real path), ingested at commit.
    written: list[tuple[str, Path]] = field(default_factory=list)
    run_created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    # The task's evaluated `when` or loop guard (a condition record), when it has one.
    condition: Mapping[str, Any] | None = None
    # The task parked this run (a question, an approval or a pause) and is being resumed.
    resumed: bool = False
    # The folder of the workflow file the run was made from (a function step's modules).
    workflow_dir: Path | None = None

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.workflow.get("spec") or {}

    @property
    def policy(self) -> Mapping[str, Any]:
        return self.spec.get("policy") or {}

    def memory_write(self, key: str) -> dict[str, Any]:
        """What writing ``input.value`` to working-memory ``key`` reports (``status``,
        ``changed``, ``before``, ``after``, ``key``), after the one check of a declared
        write: a task that declares ``memoryWrites``, or any task of a run whose tasks may
        run concurrently, writes only the keys it declares."""
        declared = self.task.memory_writes
        if (declared or self.max_concurrency > 1) and key not in declared:
            raise TaskFailure(
                f"memory key `{key}` is not in the task's memoryWrites {list(declared)}",
                code=ErrorCode.MEMORY_UNDECLARED_WRITE,
            )
        value = self.input.get("value")
        before = self.memory.get(key)
        changed = key not in self.memory or before != value
        return {
            "status": "changed" if changed else "unchanged",
            "changed": changed,
            "before": before,
            "after": value,
            "key": key,
        }


@dataclass
class TaskResult:
    output: Any
    memory_delta: dict[str, Any] = field(default_factory=dict)
    # The output's canonical JSON, when the body has it at hand (an aggregate writes it
    # around its children's recorded texts); None: the attempt encodes the output.
    output_json: str | None = None
