"""``mcp.call``, ``a2a.delegate`` and ``extension.process`` as task bodies (docs/actions.md,
docs/durable-execution.md).

Each is one effect through the gate with the class, risk, idempotency and policy label of
docs/durable-execution.md. Endpoints must be allowed by ``policy.networkAllowlist``; header secrets
resolve
only from variables in ``policy.environmentAllowlist``. The protocol clients decide what
is retryable and what is uncertain (an ambiguous A2A send is never repeated; an MCP call is
resent once only when its idempotency allows it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agentctl import process
from agentctl.digest import canonical_json
from agentctl.engine.actions.context import (
    IDEMPOTENCY_KEY_VARIABLE,
    TaskEnv,
    TaskResult,
    effect_process_env,
)
from agentctl.engine.actions.environment import (
    allowed_environ,
    process_timeout,
    resolve_environment,
)
from agentctl.engine.core import isolation
from agentctl.engine.core.preflight import host_allowed
from agentctl.engine.effects.journal import EffectSpec
from agentctl.signals import TaskFailure
from agentctl.spec.models_definitions import (
    DEFAULT_COMBINED_OUTPUT_LIMIT_BYTES,
    DEFAULT_OUTPUT_LIMIT_BYTES,
    MCP_DEFAULT_TIMEOUT_SECONDS,
)

__all__ = ["PROTOCOL_BODIES"]


def _require(env: TaskEnv, name: str) -> str:
    value = env.input.get(name) if isinstance(env.input, Mapping) else None
    if not isinstance(value, str) or not value:
        raise TaskFailure(
            f"task {env.task.id}: input requires string `{name}`", code="input.invalid"
        )
    return value


def _declared(action: Mapping[str, Any]) -> str | None:
    """The idempotency an action declared, if any."""
    declared = action.get("idempotency")
    return None if declared is None else str(declared)


def _check_host(env: TaskEnv, url: str, what: str) -> None:
    host = urlsplit(url).hostname or ""
    if not host_allowed(host, list(env.policy.get("networkAllowlist") or [])):
        raise TaskFailure(
            f"policy denied effect: {what} at {host} is not in spec.policy.networkAllowlist",
            code="policy.network_denied",
        )


def prepare_mcp_server(env: TaskEnv, name: str, server: Mapping[str, Any]) -> dict[str, Any]:
    """An HTTP server's host must be allowed; a stdio server runs in the workspace (or its
    ``cwd``, resolved inside it)."""
    prepared = dict(server)
    if prepared.get("url"):
        _check_host(env, str(prepared["url"]), f"MCP server `{name}`")
    elif prepared.get("command"):
        cwd = prepared.get("cwd")
        prepared["cwd"] = str(
            env.workspace.resolve_read(str(cwd)) if cwd else env.workspace.workspace_root
        )
    return prepared


async def _mcp_call(env: TaskEnv, action: Mapping[str, Any]) -> TaskResult:
    from agentctl.tools.mcp import call_mcp_tool

    server_name, tool = _require(env, "server"), _require(env, "tool")
    server = (env.spec.get("mcpServers") or {}).get(server_name)
    if server is None:
        raise TaskFailure(
            f"task {env.task.id}: unknown MCP server `{server_name}`", code="input.invalid"
        )
    arguments = env.input.get("arguments") or {}
    if not isinstance(arguments, Mapping):
        raise TaskFailure("`arguments` must be an object", code="input.invalid")
    if env.check:
        return TaskResult({"status": "requires_execution", "changed": False})
    server = prepare_mcp_server(env, server_name, server)
    # An undeclared idempotency is the effect table's (compiler/effects.py).
    spec = EffectSpec.classified("mcp.call", dict(env.input), idempotency=_declared(action))

    async def dispatch(_effect_id: str) -> Any:
        return await call_mcp_tool(
            server,
            tool,
            arguments,
            idempotency=spec.idempotency,
            environ=allowed_environ(env),
            timeout_seconds=float(server.get("timeoutSeconds") or MCP_DEFAULT_TIMEOUT_SECONDS),
            process_allowlist=list(env.policy.get("processAllowlist") or []),
        )

    return TaskResult(
        await env.gate.perform(
            env.attempt, spec, dispatch, prompt=f"call MCP tool {server_name}/{tool}"
        )
    )


async def _a2a_delegate(env: TaskEnv, action: Mapping[str, Any]) -> TaskResult:
    from agentctl.tools.a2a import a2a_delegate

    peer_name = _require(env, "peer")
    message_id, message = _require(env, "messageId"), _require(env, "message")
    peer = (env.spec.get("a2aPeers") or {}).get(peer_name)
    if peer is None:
        raise TaskFailure(
            f"task {env.task.id}: unknown A2A peer `{peer_name}`", code="input.invalid"
        )
    if env.check:
        return TaskResult({"status": "requires_execution", "changed": False})
    _check_host(env, str(peer.get("cardUrl")), f"A2A peer `{peer_name}`")
    spec = EffectSpec.classified("a2a.delegate", dict(env.input))

    async def dispatch(effect_id: str) -> Any:
        def accepted(task: Mapping[str, Any]) -> None:
            if task.get("id") is None:
                return
            env.gate.note_remote_task(
                env.attempt,
                effect_id,
                {
                    "protocol": "a2a",
                    "peer": peer_name,
                    "taskId": str(task["id"]),
                    "contextId": task.get("contextId"),
                },
            )

        return await a2a_delegate(
            peer, message_id, message, environ=allowed_environ(env), on_task=accepted
        )

    return TaskResult(
        await env.gate.perform(
            env.attempt, spec, dispatch, prompt=f"delegate to A2A peer {peer_name}"
        )
    )


def _schema_digest(schema: Any) -> str:
    return hashlib.sha256(canonical_json(schema).encode()).hexdigest()


async def _extension(env: TaskEnv, action: Mapping[str, Any]) -> TaskResult:
    from agentctl.tools.extension import run_extension

    if env.check:
        return TaskResult(
            {
                "status": "requires_execution",
                "changed": False,
                "predictability": "requires_execution",
            }
        )
    command = str(action.get("command") or "")
    environment = resolve_environment(env, action)
    effect_input = {
        "command": command,
        "args": [str(a) for a in action.get("args") or []],
        "cwd": action.get("cwd"),
        "environment": {
            name: {"source": source, "valueDigest": hashlib.sha256(value.encode()).hexdigest()}
            for name, (source, value) in environment.items()
        },
        "protocolVersion": action.get("protocolVersion"),
        "inputSchemaDigest": _schema_digest(action.get("inputSchema")),
        "outputSchemaDigest": _schema_digest(action.get("outputSchema")),
        "capabilities": list(action.get("capabilities") or []),
        "input": env.input,
        "stdoutLimitBytes": int(action.get("stdoutLimitBytes") or DEFAULT_OUTPUT_LIMIT_BYTES),
        "stderrLimitBytes": int(action.get("stderrLimitBytes") or DEFAULT_OUTPUT_LIMIT_BYTES),
        "combinedOutputLimitBytes": int(
            action.get("combinedOutputLimitBytes") or DEFAULT_COMBINED_OUTPUT_LIMIT_BYTES
        ),
        "isolation": "process",
        "container": None,
        "containerBackend": None,
    }
    launch = await isolation.launch_for(action, list(env.policy.get("processAllowlist") or []))
    effect_input.update(launch.effect_fields())
    cwd_raw = action.get("cwd")
    cwd = env.workspace.resolve_read(str(cwd_raw)) if cwd_raw else env.workspace.workspace_root
    env.secrets.extend(value for _, value in environment.values())
    spec = EffectSpec.classified("extension.process", effect_input, idempotency=_declared(action))
    name = str(env.task.uses.name)

    values = {k: v for k, (_, v) in environment.items()}
    args = [str(a) for a in action.get("args") or []]
    dispatched: list[str] = []

    def argv_for(phase: str) -> tuple[str, ...]:
        return launch.argv(
            command,
            args,
            effect_id=dispatched[-1],
            workspace=env.workspace,
            cwd=Path(cwd),
            env_names=sorted({*values, IDEMPOTENCY_KEY_VARIABLE}),
            phase=phase,
            database=env.gate.store.path,
        )

    async def dispatch(effect_id: str) -> Any:
        dispatched.append(effect_id)

        def record_handshake(announced: str) -> None:
            # The announced name is informational (one helper serves many actions), so it
            # is recorded on the effect's audit trail rather than compared.
            gate = env.gate
            now = gate.clock.now()
            with gate.store.write() as conn:
                gate.log.event(
                    conn,
                    "extension.handshake",
                    {"action": name, "command": command, "announcedName": announced},
                    now=now,
                    task_id=env.task.id,
                    effect_id=effect_id,
                )

        child = effect_process_env(values, effect_id)
        wrapped = launch.runtime is not None or launch.sandbox is not None
        results: dict[str, process.ProcessResult] = {}
        try:
            return await run_extension(
                action,
                env.input,
                effect_id=effect_id,
                executable=launch.executable,
                cwd=Path(cwd),
                env=child,
                timeout_seconds=float(process_timeout(env, action)),
                on_handshake=record_handshake,
                argv_for=argv_for if wrapped else None,
                launch_env=launch.child_env(child) if wrapped else None,
                on_result=results.__setitem__,
            )
        except BaseException as exc:
            # A killed runtime client can leave its container running: remove it.
            if not (isinstance(exc, TaskFailure) and exc.code != LIMIT_EXCEEDED):
                for phase in ("handshake", "invoke"):
                    isolation.remove_container(launch, effect_id, phase)
            # A sandboxed phase that failed at one of its limits says so.
            if isinstance(exc, TaskFailure):
                for phase in ("handshake", "invoke"):
                    breached = isolation.settle(launch, effect_id, phase, results.get(phase))
                    if breached is not None:
                        raise breached from exc
            raise
        finally:
            for phase in ("handshake", "invoke"):
                isolation.settle(launch, effect_id, phase, None)

    return TaskResult(
        await env.gate.perform(
            env.attempt, spec, dispatch, prompt=f"run extension {name}{launch.prompt_suffix()}"
        )
    )


LIMIT_EXCEEDED = "subprocess_output_limit_exceeded"

PROTOCOL_BODIES = {
    "mcp.call": _mcp_call,
    "a2a.delegate": _a2a_delegate,
    "extension.process": _extension,
}
