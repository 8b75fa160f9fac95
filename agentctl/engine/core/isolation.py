"""How a process action is launched: on the host, in a sandbox or in a container — never
weaker (docs/isolation.md).

``isolation: process`` (the default) runs the command on the host, bounded but not
sandboxed. ``isolation: sandbox`` runs it under bubblewrap with the action's limits
(:mod:`agentctl.sandbox`). ``isolation: container`` runs it through Docker or Podman
(:mod:`agentctl.tools.container`). When the declared level cannot start here, the run is
refused before it is created (``check_isolation``, exit 3) and a task reached later without
it fails with ``isolation.unavailable`` instead of falling back to the host.

Every launch goes through :func:`agentctl.process.run_process`; this module only decides
the command line around it and, for a sandbox, the cgroup of each run and what a failed
run breached (:func:`settle`).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError as PydanticValidationError

from agentctl import process
from agentctl import sandbox as sandboxes
from agentctl.compiler.plan import Plan, PlanTask
from agentctl.errors import BlockedError
from agentctl.policy.paths import WorkspacePolicy
from agentctl.sandbox_cgroups import Cgroup
from agentctl.signals import TaskFailure
from agentctl.spec.models_definitions import ContainerSpec, SandboxSpec
from agentctl.spec.models_policy import ISOLATION_LEVELS
from agentctl.tools import container as containers

__all__ = [
    "LEVELS",
    "Launch",
    "agent_cli",
    "check_isolation",
    "declared_level",
    "describe",
    "launch_for",
    "remove_container",
    "sandbox_settings",
    "settle",
]

#: Isolation levels from weakest to strongest (``policy.minimumIsolation`` compares them).
LEVELS = ISOLATION_LEVELS


@dataclass(frozen=True, slots=True)
class Launch:
    """What the effect records about isolation, and how to build the argv at dispatch."""

    isolation: str
    container: dict[str, Any] | None
    runtime: containers.ContainerRuntime | None
    executable: str
    sandbox: sandboxes.SandboxSettings | None = None
    tools: sandboxes.SandboxTools | None = None
    # The cgroup of each sandboxed run in flight, by container name (effect and phase).
    cgroups: dict[str, Cgroup] = field(default_factory=dict)

    def effect_fields(self) -> dict[str, Any]:
        fields = {
            "isolation": self.isolation,
            "container": self.container,
            "containerBackend": None if self.runtime is None else self.runtime.name,
        }
        if self.sandbox is not None:
            # Only sandboxed effects carry the key: the input of every other effect, and so
            # its identity, is what it was before sandboxes existed.
            fields["sandbox"] = self.sandbox.to_json()
        return fields

    def prompt_suffix(self) -> str:
        """What an approval prompt adds: the sandbox and whether it reaches the network."""
        return "" if self.sandbox is None else f" ({self.sandbox.describe()})"

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
        database: str | None = None,
    ) -> tuple[str, ...]:
        if self.sandbox is not None and self.tools is not None:
            return self._sandbox_argv(args, effect_id, workspace, cwd, phase, database)
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

    def _sandbox_argv(
        self,
        args: list[str],
        effect_id: str,
        workspace: WorkspacePolicy,
        cwd: Path,
        phase: str,
        database: str | None,
    ) -> tuple[str, ...]:
        assert self.sandbox is not None and self.tools is not None
        limits = self.sandbox.limits
        writable = list(workspace.writable_roots)
        for root in writable:
            root.mkdir(parents=True, exist_ok=True)
        roots = [workspace.workspace_root, *writable]
        cgroup = None
        if limits.needs_cgroup:
            try:
                cgroup = Cgroup.create(
                    effect_id[:16] + "-" + phase,
                    limits.memory_bytes,
                    None
                    if limits.processes is None
                    else limits.processes + sandboxes.BUBBLEWRAP_OVERHEAD_PROCESSES,
                )
            except BlockedError as exc:
                raise TaskFailure(exc.message, code=exc.code, stops_run=True) from exc
            self.cgroups[self.container_name(effect_id, phase)] = cgroup
        return sandboxes.sandbox_argv(
            self.tools,
            self.sandbox,
            (self.executable, *args),
            cwd=cwd,
            read_root=workspace.workspace_root,
            writable_roots=writable,
            hidden=sandboxes.hidden_database_paths(database or "", roots),
            cgroup=cgroup,
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


def agent_cli(spec: Mapping[str, Any], agent: str) -> Mapping[str, Any] | None:
    """The ``kind: command`` provider entry agent ``agent`` runs, if it runs one."""
    definition = (spec.get("agents") or {}).get(agent) or {}
    entry = (spec.get("providers") or {}).get(str(definition.get("provider"))) or {}
    return entry if entry.get("kind") == "command" else None


def declared_level(action: Mapping[str, Any]) -> str:
    """The isolation ``action`` declares (``process`` when it says nothing)."""
    return str(action.get("isolation") or "process")


def sandbox_settings(action: Mapping[str, Any]) -> sandboxes.SandboxSettings | None:
    """The ``sandbox`` of an action (or an agent CLI's provider entry) with the spec model's
    defaults (its one home)."""
    if action.get("isolation") != "sandbox":
        return None
    try:
        spec = SandboxSpec.model_validate(action.get("sandbox") or {})
    except PydanticValidationError as exc:
        raise TaskFailure(
            f"the action's `sandbox` does not fit the workflow language: {exc}",
            code="input.invalid",
        ) from exc
    return sandboxes.SandboxSettings.from_json(spec.model_dump(by_alias=True))


def describe(action: Mapping[str, Any]) -> str:
    """One line for ``plan``: the level and, for a sandbox, its network and limits."""
    level = declared_level(action)
    settings = sandbox_settings(action) if level == "sandbox" else None
    if settings is not None:
        return settings.describe()
    if level == "container":
        spec = _container_spec(action) or {}
        return f"container: {spec.get('image')}, no network"
    return "process: host, no sandbox"


async def launch_for(action: Mapping[str, Any], allowlist: list[str]) -> Launch:
    """Resolve how ``action`` runs: its host executable (bare or sandboxed), or a reachable
    container runtime.

    The command's basename must be in ``policy.processAllowlist`` either way; in a container
    the command is looked up inside the image, not on the host.
    """
    command = str(action.get("command") or "")
    settings = sandbox_settings(action)
    if settings is not None:
        executable = process.resolve_executable(command, allowlist, os.environ.get("PATH"))
        try:
            tools = await asyncio.to_thread(sandboxes.find_tools, settings.limits, os.environ)
        except BlockedError as exc:
            raise TaskFailure(exc.message, code=exc.code, stops_run=True) from exc
        return Launch("sandbox", None, None, executable, settings, tools)
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


def settle(
    launch: Launch, effect_id: str, phase: str, result: process.ProcessResult | None
) -> TaskFailure | None:
    """After a sandboxed run (``result`` None when it raised): remove its cgroup, and name
    the limit a failed run breached as the task's error. None for other levels, for a run
    that succeeded, and for a failure no limit explains."""
    if launch.sandbox is None:
        return None
    cgroup = launch.cgroups.pop(launch.container_name(effect_id, phase), None)
    counters = None if cgroup is None else cgroup.counters()
    if cgroup is not None:
        cgroup.remove()
    if result is None or (result.exit_code == 0 and not result.timed_out):
        return None
    found = sandboxes.breach(launch.sandbox, counters, result.exit_code, result.signal)
    if found is None:
        return None
    code, what = found
    return TaskFailure(
        f"`{os.path.basename(launch.executable)}` {what}",
        code=code,
        details={"limits": launch.sandbox.limits.to_json(), "exitCode": result.exit_code},
    )


def check_isolation(plan: Plan, workflow: Mapping[str, Any]) -> None:
    """Refuse, before a run exists, a plan whose container or sandbox tasks cannot start
    here (exit 3, ``isolation.unavailable``)."""
    document = workflow.get("spec") or {}
    actions = document.get("actions") or {}
    choices: list[str] = []
    sandboxed: list[sandboxes.SandboxSettings] = []
    # What a task needs depends only on what it uses: each action or agent is looked at
    # once, however many tasks use it (a foreach of 200 runs one action 200 times).
    used: dict[tuple[str, str], PlanTask] = {}
    for task_id in plan.order:
        task = plan.tasks[task_id]
        if task.uses.kind in ("agent", "action"):
            used.setdefault((task.uses.kind, str(task.uses.name)), task)
    for task in used.values():
        if task.uses.kind == "agent":
            entry = agent_cli(document, str(task.uses.name))
            settings = None if entry is None else sandbox_settings(entry)
            if settings is not None and settings not in sandboxed:
                sandboxed.append(settings)
            continue
        if task.uses.kind != "action":
            continue
        action = actions.get(str(task.uses.name)) or {}
        settings = sandbox_settings(action)
        if settings is not None and settings not in sandboxed:
            sandboxed.append(settings)
        spec = _container_spec(action)
        if spec is not None and spec["runtime"] not in choices:
            choices.append(str(spec["runtime"]))
    for choice in choices:
        containers.find_runtime(choice, os.environ)
    for settings in sandboxed:
        sandboxes.find_tools(settings.limits, os.environ)
