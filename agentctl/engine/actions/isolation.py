"""How a process action is launched: on the host, or inside a container — never weaker.

``isolation: process`` (the default) runs the command on the host, bounded but not
sandboxed. ``isolation: container`` runs it through Docker or Podman
(:mod:`agentctl.tools.container`); when no runtime answers, the run is refused before it
is created (``check_isolation``, exit 3) and a task reached later without one fails with
``isolation.unavailable`` instead of falling back to the host.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError as PydanticValidationError

from agentctl import process
from agentctl.compiler.plan import Plan
from agentctl.errors import BlockedError
from agentctl.policy.paths import WorkspacePolicy
from agentctl.signals import TaskFailure
from agentctl.spec.models_definitions import ContainerSpec
from agentctl.tools import container as containers

__all__ = ["Launch", "check_isolation", "launch_for", "remove_container"]


@dataclass(frozen=True, slots=True)
class Launch:
    """What the effect records about isolation, and how to build the argv at dispatch."""

    isolation: str
    container: dict[str, Any] | None
    runtime: containers.ContainerRuntime | None
    executable: str

    def effect_fields(self) -> dict[str, Any]:
        return {
            "isolation": self.isolation,
            "container": self.container,
            "containerBackend": None if self.runtime is None else self.runtime.name,
        }

    def container_name(self, effect_id: str, phase: str) -> str:
        return f"agentctl-{effect_id[:24]}-{phase}"

    def argv(
        self,
        command: str,
        args: list[str],
        *,
        effect_id: str,
        workspace: WorkspacePolicy,
        cwd: Path,
        env_names: list[str],
        phase: str = "run",
    ) -> tuple[str, ...]:
        if self.runtime is None or self.container is None:
            return (self.executable, *args)
        root = workspace.workspace_root
        if "," in str(root):
            raise TaskFailure(
                f"the workspace path `{root}` contains a comma, which a container bind "
                "mount cannot express",
                code="isolation.unavailable",
                stops_run=True,
            )
        spec = self.container
        return containers.container_argv(
            self.runtime,
            image=str(spec["image"]),
            command=command,
            args=args,
            workspace_root=str(root),
            workdir=str(Path(cwd).relative_to(root)) if Path(cwd) != root else ".",
            env_names=env_names,
            memory_limit_bytes=int(spec["memoryLimitBytes"]),
            cpu_limit_millis=int(spec["cpuLimitMillis"]),
            pids_limit=int(spec["pidsLimit"]),
            name=self.container_name(effect_id, phase),
        )

    def child_env(self, values: Mapping[str, str]) -> dict[str, str]:
        """The launched process's environment: on the host exactly the action's env; for a
        container, the runtime client also needs its engine variables to reach its daemon."""
        if self.runtime is None:
            return dict(values)
        return {**containers.runtime_environment(os.environ), **values}


def _container_spec(action: Mapping[str, Any]) -> dict[str, Any] | None:
    """The action's ``container`` with the spec model's defaults (its one home)."""
    if action.get("isolation") != "container":
        return None
    try:
        container = ContainerSpec.model_validate(action.get("container") or {})
    except PydanticValidationError as exc:
        raise TaskFailure(
            f"the action's `container` does not fit the workflow language: {exc}",
            code="input.invalid",
        ) from exc
    return container.model_dump(by_alias=True)


async def launch_for(action: Mapping[str, Any], allowlist: list[str]) -> Launch:
    """Resolve how ``action`` runs: its host executable, or a reachable container runtime.

    The command's basename must be in ``policy.processAllowlist`` either way; in a container
    the command is looked up inside the image, not on the host.
    """
    command = str(action.get("command") or "")
    spec = _container_spec(action)
    if spec is None:
        executable = process.resolve_executable(command, allowlist, os.environ.get("PATH"))
        return Launch("process", None, None, executable)
    process.check_allowed(command, allowlist)
    try:
        runtime = await asyncio.to_thread(containers.find_runtime, spec["runtime"], os.environ)
    except BlockedError as exc:
        raise TaskFailure(exc.message, code=exc.code, stops_run=True) from exc
    return Launch("container", spec, runtime, command)


def remove_container(launch: Launch, effect_id: str, phase: str = "run") -> None:
    """Stop and remove a container whose client was killed (timeout, cap, cancellation):
    killing the client alone can leave the container running."""
    if launch.runtime is None:
        return
    try:
        subprocess.run(
            [launch.runtime.path, "rm", "--force", launch.container_name(effect_id, phase)],
            env=containers.runtime_environment(os.environ),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=containers.PROBE_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        pass  # best effort: the effect is already recorded as uncertain or failed


def check_isolation(plan: Plan, workflow: Mapping[str, Any]) -> None:
    """Refuse, before a run exists, a plan with container tasks and no runtime (exit 3)."""
    actions = (workflow.get("spec") or {}).get("actions") or {}
    choices: list[str] = []
    for task_id in plan.order:
        task = plan.tasks[task_id]
        if task.uses.kind != "action":
            continue
        spec = _container_spec(actions.get(str(task.uses.name)) or {})
        if spec is not None and spec["runtime"] not in choices:
            choices.append(str(spec["runtime"]))
    for choice in choices:
        containers.find_runtime(choice, os.environ)
