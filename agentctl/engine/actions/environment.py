"""What a child process or protocol client of an action may see: environment and timeout.

Shared by the builtin actions (``builtin.shell.exec``), the protocol actions (MCP, A2A,
extensions) and agent tasks, so each of them imports it here rather than from another.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from agentctl.engine.actions.context import TaskEnv
from agentctl.errors import AgentctlError
from agentctl.signals import TaskFailure

__all__ = ["allowed_environ", "process_timeout", "resolve_environment"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def allowed_environ(env: TaskEnv) -> dict[str, str]:
    """The host environment a protocol client may see: ``policy.environmentAllowlist`` only."""
    allow = set(env.policy.get("environmentAllowlist") or [])
    return {k: v for k, v in env.environ.items() if k in allow}


def resolve_environment(env: TaskEnv, action: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """Child name -> (source description, value), through the one secret resolver.

    The child-side name, and for ``{env:}`` references the source variable, must be in
    ``policy.environmentAllowlist``.
    """
    from agentctl.policy.secrets import resolve_secret

    allow = set(env.policy.get("environmentAllowlist") or [])
    resolved: dict[str, tuple[str, str]] = {}
    for name, ref in sorted((action.get("env") or {}).items()):
        checked = [name]
        if isinstance(ref, Mapping) and "env" in ref:
            checked.append(str(ref["env"]))
        for variable in checked:
            if variable not in allow or not _ENV_NAME.match(variable):
                raise TaskFailure(
                    f"policy denied effect: environment variable `{variable}` is not in "
                    "policy.environmentAllowlist",
                    code="policy.denied",
                )
        try:
            secret = resolve_secret(ref, environ=env.environ, what=f"action env `{name}`")
        except AgentctlError as exc:
            raise TaskFailure(exc.message, code=exc.code) from exc
        resolved[name] = (secret.source, secret.value)
    return resolved


def process_timeout(env: TaskEnv, action: Mapping[str, Any]) -> int:
    """The action's own ``timeoutSeconds``, else its task's, else the run default."""
    explicit = action.get("timeoutSeconds")
    if isinstance(explicit, int):
        return explicit
    # Unlike upstream (docs/compiler.md): expanded and sub-workflow children keep their
    # source task's timeout, which the compiler copied onto every child.
    return int(env.task.timeout_seconds or env.default_timeout_seconds)
