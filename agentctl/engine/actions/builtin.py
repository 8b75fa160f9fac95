"""The built-in action kinds of docs/actions.md, each as one task body.

Every non-pure kind goes through the effect gate with the operation, class, risk,
idempotency and policy label of docs/durable-execution.md, so journaling, policy and approvals are
uniform.
Kinds that need the MCP, A2A, long-term memory or process-extension clients are refused
before a run is created (``unsupported_action_kinds``), never half-run.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from agentctl import process
from agentctl.engine.actions import workspace_writers, written_files
from agentctl.engine.actions.context import (
    IDEMPOTENCY_KEY_VARIABLE,
    TaskEnv,
    TaskResult,
    effect_process_env,
)
from agentctl.engine.actions.environment import process_timeout, resolve_environment
from agentctl.engine.actions.long_term import LONG_TERM_BODIES
from agentctl.engine.actions.protocol import PROTOCOL_BODIES
from agentctl.engine.core import isolation
from agentctl.engine.effects.journal import EffectSpec
from agentctl.redaction import redact
from agentctl.signals import PAUSE_PREFIX, ApprovalPending, OutcomeUnknown, TaskFailure
from agentctl.spec.models_definitions import (
    DEFAULT_COMBINED_OUTPUT_LIMIT_BYTES,
    DEFAULT_OUTPUT_LIMIT_BYTES,
)
from agentctl.tools import files

__all__ = ["RUNNABLE_ACTION_KINDS", "run_action", "unsupported_action_kinds"]

READ_LIMIT = 1 << 20

ActionBody = Callable[[TaskEnv, Mapping[str, Any]], Awaitable[TaskResult]]


def _require_string(env: TaskEnv, name: str) -> str:
    value = env.input.get(name) if isinstance(env.input, Mapping) else None
    if not isinstance(value, str):
        raise TaskFailure(
            f"task {env.task.id}: input requires string `{name}`", code="input.invalid"
        )
    return value


async def _assign(env: TaskEnv, action: Mapping[str, Any]) -> TaskResult:
    value = env.input
    return TaskResult(
        {
            "status": "unchanged",
            "changed": False,
            "before": None,
            "after": value,
            "diff": None,
            "output": value,
            "predictability": "fully_predictable",
        }
    )


async def _assert(env: TaskEnv, action: Mapping[str, Any]) -> TaskResult:
    that = env.input.get("that") if isinstance(env.input, Mapping) else None
    if not isinstance(that, bool):
        raise TaskFailure(
            f"task {env.task.id}: input requires boolean `that` (got {type(that).__name__})",
            code="input.invalid",
        )
    if not that:
        message = env.input.get("message")
        raise TaskFailure(
            message if isinstance(message, str) and message else "assertion failed",
            code="assertion.failed",
        )
    return TaskResult({"status": "unchanged", "changed": False, "passed": True})


_FAIL_CODE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$")


async def _fail(env: TaskEnv, action: Mapping[str, Any]) -> TaskResult:
    """Fail the attempt on purpose; ``retry: false`` makes the failure final (no retry)."""
    given = env.input if isinstance(env.input, Mapping) else {}
    message = given.get("message")
    retry = given.get("retry", True)
    code = given.get("code", "task.fail")
    if not isinstance(retry, bool):
        raise TaskFailure(
            f"task {env.task.id}: input `retry` must be a boolean (got {type(retry).__name__})",
            code="input.invalid",
        )
    if not isinstance(code, str) or not _FAIL_CODE.match(code):
        raise TaskFailure(
            f"task {env.task.id}: input `code` must be a dotted lowercase error code like "
            "`deploy.refused`",
            code="input.invalid",
        )
    raise TaskFailure(
        message if isinstance(message, str) and message else f"task {env.task.id} failed",
        code=code,
        permanent=not retry,
        details={"retry": retry},
    )


async def _pause(env: TaskEnv, action: Mapping[str, Any]) -> TaskResult:
    """Park the run until an operator resumes it (``agentctl resume RUN``)."""
    given = env.input if isinstance(env.input, Mapping) else {}
    message = given.get("message")
    if message is not None and not isinstance(message, str):
        raise TaskFailure(
            f"task {env.task.id}: input `message` must be a string", code="input.invalid"
        )
    output = {"status": "unchanged", "changed": False, "message": message}
    if env.check:
        return TaskResult({**output, "paused": False})
    if env.resumed:
        return TaskResult({**output, "paused": True})
    raise ApprovalPending(PAUSE_PREFIX + env.task.id, kind="pause", message=message)


async def _read(env: TaskEnv, action: Mapping[str, Any]) -> TaskResult:
    path_text = _require_string(env, "path")
    target = env.workspace.resolve_read(path_text)
    spec = EffectSpec.classified("builtin.read", {"path": path_text})

    async def dispatch(_effect_id: str) -> Any:
        return {
            "status": "unchanged",
            "changed": False,
            "content": files.read_text(target, READ_LIMIT),
        }

    return TaskResult(await env.gate.perform(env.attempt, spec, dispatch))


async def _write(env: TaskEnv, action: Mapping[str, Any]) -> TaskResult:
    path_text = _require_string(env, "path")
    content = _require_string(env, "content")
    target = env.workspace.resolve_write(path_text)
    before = files.read_existing_for_write(target, READ_LIMIT)
    changed = before != content
    output = {
        "status": "changed" if changed else "unchanged",
        "changed": changed,
        "before": before,
        "after": content,
        "diff": files.naive_diff(before, content) if env.diff else None,
        "path": path_text,
        "predictability": "fully_predictable",
    }
    spec = EffectSpec.classified(
        "builtin.write",
        {"path": path_text, "contentDigest": hashlib.sha256(content.encode()).hexdigest()},
        request={"path": path_text, "bytes": len(content.encode())},
    )
    # In a compensation run the inverse write is recorded even when the content is already
    # in place (docs/durable-execution.md): the compensation must be provable from the journal.
    unchanged = not changed and not env.compensation
    if env.check or (unchanged and not env.gate.journaled(env.attempt, spec)):
        return TaskResult(output)

    async def dispatch(_effect_id: str) -> Any:
        # A writer window: a process scanning this workspace meanwhile must not take the
        # file for its own (see workspace_writers).
        with workspace_writers.writing(env.workspace.workspace_root, expected_seconds=60):
            files.write_atomic(target, content)
        return output

    result = await env.gate.perform(
        env.attempt, spec, dispatch, prompt=f"write {len(content.encode())} bytes to {path_text}"
    )
    env.written.append((path_text, target))
    return TaskResult(result)


async def _shell(env: TaskEnv, action: Mapping[str, Any]) -> TaskResult:
    command = str(action.get("command") or "")
    args = [str(a) for a in action.get("args") or []]
    cwd_raw = action.get("cwd")
    stdout_limit = int(action.get("stdoutLimitBytes") or DEFAULT_OUTPUT_LIMIT_BYTES)
    stderr_limit = int(action.get("stderrLimitBytes") or DEFAULT_OUTPUT_LIMIT_BYTES)
    combined_limit = int(
        action.get("combinedOutputLimitBytes") or DEFAULT_COMBINED_OUTPUT_LIMIT_BYTES
    )
    environment = resolve_environment(env, action)
    effect_input = {
        "command": command,
        "args": args,
        "cwd": cwd_raw,
        "environment": {
            name: {"source": source, "valueDigest": hashlib.sha256(value.encode()).hexdigest()}
            for name, (source, value) in environment.items()
        },
        "stdoutLimitBytes": stdout_limit,
        "stderrLimitBytes": stderr_limit,
        "combinedOutputLimitBytes": combined_limit,
        "isolation": "process",
        "container": None,
        "containerBackend": None,
    }
    if env.check:
        return TaskResult(
            {
                "status": "requires_execution",
                "changed": False,
                "predictability": "requires_execution",
            }
        )
    launch = await isolation.launch_for(action, list(env.policy.get("processAllowlist") or []))
    effect_input.update(launch.effect_fields())
    cwd = env.workspace.resolve_read(str(cwd_raw)) if cwd_raw else env.workspace.workspace_root
    secrets = [value for _, value in environment.values()]
    env.secrets.extend(secrets)
    timeout = process_timeout(env, action)
    spec = EffectSpec.classified("builtin.shell.exec", effect_input)

    # The process's scans are attributed to it only if no other task wrote in the workspace
    # from the first scan to the last (workspace_writers); without writable roots nothing is
    # scanned and there is nothing to attribute.
    window = (
        workspace_writers.open_window(env.workspace.workspace_root, expected_seconds=timeout)
        if env.workspace.writable_roots
        else None
    )
    before = written_files.snapshot(env.workspace)

    def attributed() -> tuple[list[tuple[str, Path]], list[str]]:
        """(files to ingest, files that appeared but may be another writer's)."""
        after = written_files.snapshot(env.workspace)
        if window is not None and window.close():
            return [], written_files.appeared(before, after, env.workspace)
        return written_files.changed_files(env.workspace, before, after), []

    async def dispatch(effect_id: str) -> Any:
        spec = process.ProcessSpec(
            argv=launch.argv(
                command,
                args,
                effect_id=effect_id,
                workspace=env.workspace,
                cwd=Path(cwd),
                env_names=sorted({*environment, IDEMPOTENCY_KEY_VARIABLE}),
                database=env.gate.store.path,
            ),
            cwd=Path(cwd),
            env=launch.child_env(
                effect_process_env(
                    {name: value for name, (_, value) in environment.items()}, effect_id
                )
            ),
            timeout_seconds=timeout,
            stdout_limit_bytes=stdout_limit,
            stderr_limit_bytes=stderr_limit,
            combined_limit_bytes=combined_limit,
        )
        ended = False
        result = None
        try:
            result = await process.run_process(spec)
            ended = not result.timed_out and result.limit_exceeded is None
        finally:
            if not ended:
                isolation.remove_container(launch, effect_id)
            breached = isolation.settle(launch, effect_id, "run", result)
        assert result is not None
        stdout = redact(process.decode_lossy(result.stdout), secrets)
        stderr = redact(process.decode_lossy(result.stderr), secrets)
        if result.timed_out:
            # A sandbox's wall time is the action's timeoutSeconds; like any timeout after
            # dispatch it leaves the effect uncertain (docs/isolation.md).
            limit = {"limit": "sandbox.wall_time_limit"} if launch.sandbox is not None else {}
            raise OutcomeUnknown(
                f"`{command}` timed out after {timeout}s and was killed",
                details={"stdout": stdout[-2000:], "stderr": stderr[-2000:], **limit},
            )
        if breached is not None:
            breached.details = {
                **breached.details,
                "stdout": stdout[-2000:],
                "stderr": stderr[-2000:],
            }
            raise breached
        if result.limit_exceeded is not None:
            raise TaskFailure(
                f"`{command}` exceeded its {result.limit_exceeded} output limit and was killed",
                code="subprocess_output_limit_exceeded",
                details={"stream": result.limit_exceeded},
            )
        output = {
            "status": "changed",
            "changed": True,
            "exitCode": result.exit_code,
            "stdout": stdout,
            "stderr": stderr,
        }
        if result.exit_code != 0:
            how = (
                f"exit code {result.exit_code}"
                if result.exit_code is not None
                else f"signal {result.signal}"
            )
            raise TaskFailure(
                f"subprocess exited with {how}: {command}", code="subprocess.failed", details=output
            )
        # Which files it wrote is part of what the effect did: journaled with its outcome,
        # so a resume after a crash ingests them exactly as this attempt would have.
        mine, unattributed = attributed()
        output[written_files.WRITTEN_FILES] = written_files.signatures(mine)
        if unattributed:
            output["unattributedFiles"] = unattributed
        return output

    def output_bytes(result: Any) -> dict[str, float]:
        produced = len(str(result.get("stdout", "")).encode()) + len(
            str(result.get("stderr", "")).encode()
        )
        return {"processOutputBytes": produced}

    try:
        result = await env.gate.perform(
            env.attempt,
            spec,
            dispatch,
            # Quoted as a shell would read it: `sh -c 'echo a; echo b'`, not `sh -c echo a; …`.
            prompt="run " + shlex.join([command, *args]) + launch.prompt_suffix(),
            reservation={"processOutputBytes": combined_limit},
            usage=output_bytes,
        )
        # Files the process created or changed under the writable roots become artifacts.
        recorded = (
            result.pop(written_files.WRITTEN_FILES, None) if isinstance(result, dict) else None
        )
        if recorded is None:  # an outcome an operator reconciled: look at the workspace
            env.written.extend(attributed()[0])
        else:
            env.written.extend(written_files.recorded_files(env.workspace, recorded))
    finally:
        if window is not None:
            window.close()
    return TaskResult(result)


async def _memory_read(env: TaskEnv, action: Mapping[str, Any]) -> TaskResult:
    key = _require_string(env, "key")
    if key not in env.memory:
        raise TaskFailure(f"working memory has no key `{key}`", code="memory.missing")
    return TaskResult({"status": "unchanged", "changed": False, "value": env.memory[key]})


async def _memory_write(env: TaskEnv, action: Mapping[str, Any]) -> TaskResult:
    key = _require_string(env, "key")
    output = env.memory_write(key)
    value = output["after"]
    if env.check:
        return TaskResult(output, {key: value})
    spec = EffectSpec.classified("builtin.memory.write", dict(env.input))

    async def dispatch(_effect_id: str) -> Any:
        return output

    result = await env.gate.perform(env.attempt, spec, dispatch)
    return TaskResult(result, {key: value})


_BODIES: dict[str, ActionBody] = {
    "builtin.assign": _assign,
    "builtin.assert": _assert,
    "builtin.fail": _fail,
    "builtin.pause": _pause,
    "builtin.read": _read,
    "builtin.write": _write,
    "builtin.shell.exec": _shell,
    "builtin.memory.read": _memory_read,
    "builtin.memory.write": _memory_write,
}
_BODIES.update(LONG_TERM_BODIES)
_BODIES.update(PROTOCOL_BODIES)
RUNNABLE_ACTION_KINDS = frozenset(_BODIES) | {"builtin.ask"}


def unsupported_action_kinds(workflow: Mapping[str, Any], used: set[str]) -> list[str]:
    """Action kinds used by the plan that this build cannot execute."""
    actions = (workflow.get("spec") or {}).get("actions") or {}
    kinds = {str((actions.get(name) or {}).get("kind")) for name in used}
    return sorted(kind for kind in kinds if kind not in RUNNABLE_ACTION_KINDS)


async def run_action(env: TaskEnv, action_name: str) -> TaskResult:
    action = ((env.spec.get("actions") or {}).get(action_name)) or {}
    kind = str(action.get("kind"))
    if kind == "builtin.ask":
        from agentctl.engine.actions.questions import ask

        return await ask(env, action)
    body = _BODIES.get(kind)
    if body is None:
        raise TaskFailure(
            f"action kind `{kind}` cannot run in this build", code="action.unsupported"
        )
    return await body(env, action)
