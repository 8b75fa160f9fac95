"""A monitor's ``--command``, run under the monitored workflow's ``builtin.shell.exec`` rules.

The command observes the world for a workflow, so it gets no more than that workflow's own
shell commands would:

- its name must be in the workflow's ``spec.policy.processAllowlist`` (checked when the
  monitor is added and at every observation);
- when the workflow's ``builtin.shell.exec`` actions run in containers (``isolation:
  container``), the command runs in a container too — with the container settings of the
  first such action in ``spec.actions`` (image, runtime, limits) and the same hardened
  command line (:mod:`agentctl.engine.core.isolation`), the monitor's directory mounted
  read-only as the workspace — never on the host;
- else, when they run in a sandbox (``isolation: sandbox``), the command runs in the
  sandbox of the first such action (its network and limits), the monitor's directory its
  read-only workspace. A workflow whose shell actions mix levels gets the strictest;
- otherwise it runs on the host with the bounded process rules: no shell, a cleared
  environment, its own process group in the monitor's directory, a timeout, capped output.

When no container runtime answers or bubblewrap cannot start, observing raises
``isolation.unavailable`` (the daemon records it as an error observation) instead of
running the command on the host.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentctl import process, sandbox
from agentctl.engine.core import isolation
from agentctl.errors import BlockedError
from agentctl.policy.paths import WorkspacePolicy
from agentctl.signals import TaskFailure

__all__ = ["COMMAND_TIMEOUT_SECONDS", "check_command", "observe_command", "workflow_document"]

COMMAND_TIMEOUT_SECONDS = 60.0
_OUTPUT_LIMIT = 1 << 20


def workflow_document(workflow_file: str) -> dict[str, Any]:
    """The validated workflow document (``{}`` when it does not load: then no command is
    allowed, since its allow-list cannot be read)."""
    from agentctl.spec import load_workflow

    loaded = load_workflow(workflow_file)
    if loaded.document is None:
        return {}
    document: dict[str, Any] = loaded.document.model_dump(mode="json", by_alias=True)
    return document


def _strictest(workflow: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The first ``builtin.shell.exec`` action of the strictest isolation declared
    (container, then sandbox), if any declares more than ``process``."""
    actions = (workflow.get("spec") or {}).get("actions") or {}
    shells = [
        dict(action)
        for action in actions.values()
        if (action or {}).get("kind") == "builtin.shell.exec"
    ]
    for level in ("container", "sandbox"):
        for action in shells:
            if action.get("isolation") == level:
                return action
    return None


def _action_for(workflow: Mapping[str, Any], command: str) -> dict[str, Any]:
    """The monitor's command as the shell action it stands in for."""
    strictest = _strictest(workflow)
    if strictest is None:
        return {"kind": "builtin.shell.exec", "command": command}
    level = strictest["isolation"]
    return {
        "kind": "builtin.shell.exec",
        "command": command,
        "isolation": level,
        level: strictest.get(level),
    }


def _allowlist(workflow: Mapping[str, Any]) -> list[str]:
    policy = (workflow.get("spec") or {}).get("policy") or {}
    return [str(name) for name in policy.get("processAllowlist") or []]


def check_command(workflow: Mapping[str, Any], argv: Sequence[str]) -> str:
    """Refuse a command the workflow's shell actions could not run (exit 4,
    ``policy.process_not_allowed``); the isolation it will run under (``process``,
    ``sandbox`` or ``container``). A host or sandboxed command must also be found on
    ``PATH``; in a container it is looked up inside the image."""
    action = _action_for(workflow, argv[0])
    if action.get("isolation") == "container":
        process.check_allowed(argv[0], _allowlist(workflow))
        return "container"
    process.resolve_executable(argv[0], _allowlist(workflow))
    return str(action.get("isolation") or "process")


def observe_command(
    workflow: Mapping[str, Any], argv: Sequence[str], project: Path
) -> dict[str, Any]:
    """Run the command once; its observation: ``exitCode``, ``timedOut`` and
    ``outputDigest`` (of standard output)."""
    return asyncio.run(_observe(workflow, list(argv), project))


async def _observe(workflow: Mapping[str, Any], argv: list[str], project: Path) -> dict[str, Any]:
    command, args = argv[0], argv[1:]
    try:
        launch = await isolation.launch_for(_action_for(workflow, command), _allowlist(workflow))
    except TaskFailure as failure:  # the declared isolation cannot start: never the host
        hint = (
            sandbox.INSTALL_HINT
            if failure.code == "isolation.unavailable" and "sandbox" in failure.message
            else "start the container daemon (or point DOCKER_HOST / CONTAINER_HOST at one); "
            "the monitored workflow runs its commands in containers, so its monitor does too"
        )
        raise BlockedError(
            f"monitor command `{command}`: {failure.message}", code=failure.code, hint=hint
        ) from None
    name = secrets.token_hex(12)  # names the container, as an effect id would
    cwd = project.resolve()
    spec = process.ProcessSpec(
        argv=launch.argv(
            command,
            args,
            effect_id=name,
            workspace=WorkspacePolicy(cwd),
            cwd=cwd,
            env_names=[],
            phase="monitor",
        ),
        cwd=cwd,
        env=launch.child_env({}),
        timeout_seconds=COMMAND_TIMEOUT_SECONDS,
        stdout_limit_bytes=_OUTPUT_LIMIT,
        stderr_limit_bytes=_OUTPUT_LIMIT,
        combined_limit_bytes=2 * _OUTPUT_LIMIT,
    )
    ended = False
    result = None
    try:
        result = await process.run_process(spec)
        ended = not result.timed_out and result.limit_exceeded is None
    finally:
        if not ended:
            isolation.remove_container(launch, name, "monitor")
        isolation.settle(launch, name, "monitor", result)
    assert result is not None
    return {
        "exitCode": result.exit_code,
        "timedOut": result.timed_out,
        "outputDigest": "sha256:" + hashlib.sha256(result.stdout).hexdigest(),
    }
