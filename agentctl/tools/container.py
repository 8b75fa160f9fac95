"""Container isolation for process actions: Docker or Podman, or no run at all.

A task that declares ``isolation: container`` never runs on the host. ``find_runtime``
looks for the declared runtime (``auto``: Docker, then Podman) on agentctl's ``PATH`` and
asks it whether its daemon answers (``<runtime> info``); when none does, the task is
refused with ``isolation.unavailable``, naming everything that was looked at.

``container_argv`` builds the one command line a container run uses:

- ``--read-only`` root filesystem; the workspace bind-mounted read-only at ``/workspace``;
  a bounded, ``noexec`` tmpfs at ``/tmp`` is the only writable place;
- ``--network none``; ``--user 65534:65534`` (nobody); ``--cap-drop ALL``;
  ``--security-opt no-new-privileges``;
- the action's memory, CPU and pids limits (swap disabled: ``--memory-swap`` equals
  ``--memory``);
- the image pinned by digest, never pulled (``--pull never``);
- the action's ``env`` passed by name only (``--env NAME``): values travel in the runtime
  client's environment, never on a command line another user could read in ``ps``.

The runtime client itself gets only the engine variables it needs to find its daemon
(``DOCKER_HOST``, ``CONTAINER_HOST``, ``HOME``, ``PATH`` …) from agentctl's environment,
plus the action's ``env``, which may not set any of those.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from agentctl.errors import BlockedError
from agentctl.process import probe
from agentctl.spec.models_definitions import CONTAINER_ENGINE_VARIABLES

__all__ = [
    "CONTAINER_USER",
    "ENGINE_VARIABLES",
    "PROBE_TIMEOUT_SECONDS",
    "TMPFS_BYTES",
    "WORKSPACE_MOUNT",
    "ContainerRuntime",
    "container_argv",
    "find_runtime",
    "runtime_environment",
]

#: Variables that steer the runtime client; an action's `env` may not set them.
ENGINE_VARIABLES = CONTAINER_ENGINE_VARIABLES

RUNTIMES = ("docker", "podman")
WORKSPACE_MOUNT = "/workspace"
CONTAINER_USER = "65534:65534"
TMPFS_BYTES = 64 * 1024 * 1024
PROBE_TIMEOUT_SECONDS = 15.0

# Runtimes that answered in this process: a container task does not pay one probe each.
_REACHABLE: dict[tuple[str, str, tuple[tuple[str, str], ...]], ContainerRuntime] = {}


@dataclass(frozen=True, slots=True)
class ContainerRuntime:
    name: str
    path: str


def runtime_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The engine variables of agentctl's environment, for the runtime client."""
    return {name: environ[name] for name in sorted(ENGINE_VARIABLES) if name in environ}


def _probe(path: str, env: Mapping[str, str]) -> str | None:
    """None when the runtime's daemon answers ``info``; else what went wrong."""
    return probe([path, "info"], env, f"`{path} info`", PROBE_TIMEOUT_SECONDS)


def find_runtime(choice: str, environ: Mapping[str, str]) -> ContainerRuntime:
    """The runtime to run containers with; ``BlockedError`` (isolation.unavailable) if none.

    ``choice`` is ``auto`` (Docker, then Podman) or an explicit runtime, which never falls
    back to the other one.
    """
    candidates: Sequence[str] = RUNTIMES if choice == "auto" else (choice,)
    search = environ.get("PATH", os.defpath)
    env = runtime_environment(environ)
    looked: list[str] = []
    for name in candidates:
        path = shutil.which(name, path=search)
        if path is None:
            looked.append(f"`{name}` is not on PATH")
            continue
        key = (name, path, tuple(sorted(env.items())))
        known = _REACHABLE.get(key)
        if known is not None:
            return known
        problem = _probe(path, env)
        if problem is None:
            found = _REACHABLE[key] = ContainerRuntime(name, path)
            return found
        looked.append(problem)
    wanted = "Docker or Podman" if choice == "auto" else choice.capitalize()
    raise BlockedError(
        f"container isolation needs {wanted} with a reachable daemon; looked for "
        f"{', '.join(candidates)} on PATH `{search}`: " + "; ".join(looked),
        code="isolation.unavailable",
        hint="start the container daemon (or point DOCKER_HOST / CONTAINER_HOST at one); the "
        "task never runs with weaker isolation than it declares",
    )


def container_argv(
    runtime: ContainerRuntime,
    *,
    image: str,
    command: str,
    args: Sequence[str],
    workspace_root: str,
    workdir: str,
    env_names: Sequence[str],
    memory_limit_bytes: int,
    cpu_limit_millis: int,
    pids_limit: int,
    name: str,
) -> tuple[str, ...]:
    """The full runtime command line of one container run (see the module docstring).

    ``workdir`` is the working directory relative to the workspace root (``.`` for it).
    """
    inside = PurePosixPath(WORKSPACE_MOUNT)
    if workdir not in ("", "."):
        inside = inside / PurePosixPath(workdir)
    argv = [
        runtime.path,
        "run",
        "--rm",
        "--interactive",
        "--name",
        name,
        "--pull",
        "never",
        "--network",
        "none",
        "--read-only",
        "--user",
        CONTAINER_USER,
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--tmpfs",
        f"/tmp:rw,noexec,nosuid,nodev,size={TMPFS_BYTES}",
        "--memory",
        str(memory_limit_bytes),
        "--memory-swap",
        str(memory_limit_bytes),
        "--cpus",
        f"{cpu_limit_millis / 1000:g}",
        "--pids-limit",
        str(pids_limit),
        "--mount",
        f"type=bind,source={workspace_root},target={WORKSPACE_MOUNT},readonly",
        "--workdir",
        str(inside),
    ]
    for env_name in env_names:
        argv += ["--env", env_name]
    argv += [image, command, *args]
    return tuple(argv)
