"""``extension.process``: a local executable speaking the process-extension protocol
(docs/actions.md).

Two bounded runs of the same argv (through :mod:`agentctl.process`: cleared
environment, own process group, output caps, timeout):

1. ``command args… --agentctl-handshake`` prints ``{protocolVersion, name, inputSchema,
   outputSchema, capabilities}``. The protocol version, both schemas and the capability list
   must be identical to the action's (JSON values compared with their types, so ``1`` and
   ``1.0`` differ). The ``name`` is informational: one helper program commonly serves several
   actions under the one name it announces, so it is handed to the caller to record and
   never compared with the action's name. The handshake has no effect, so any failure here,
   a timeout included, is a plain task failure: the invoke never ran.
2. ``command args… --agentctl-invoke`` reads ``{protocolVersion, effectId, input}`` on stdin
   and prints ``{protocolVersion, effectId, output}``. This run is the effect: a timeout
   raises ``OutcomeUnknown`` (the effect becomes uncertain); a non-zero exit, an output cap,
   or an answer that breaks the protocol or ``outputSchema`` fails the task.

The input is validated against ``inputSchema`` before anything runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agentctl import process
from agentctl.errors import AgentctlError, UsageError
from agentctl.json_schemas import compile_schema, first_error
from agentctl.redaction import redact
from agentctl.signals import OutcomeUnknown, TaskFailure, as_task_failure

__all__ = ["EXTENSION_PROTOCOL_VERSION", "HANDSHAKE_FLAG", "INVOKE_FLAG", "run_extension"]

EXTENSION_PROTOCOL_VERSION = "agentctl.dev/process-extension/v1"
HANDSHAKE_FLAG = "--agentctl-handshake"
INVOKE_FLAG = "--agentctl-invoke"

_HANDSHAKE_KEYS = ("protocolVersion", "inputSchema", "outputSchema", "capabilities")


async def run_extension(
    action: Mapping[str, Any],
    input: Any,
    *,
    effect_id: str,
    executable: str,
    cwd: Path,
    env: Mapping[str, str],
    timeout_seconds: float,
    on_handshake: Callable[[str], None] | None = None,
    argv_for: Callable[[str], tuple[str, ...]] | None = None,
    launch_env: Mapping[str, str] | None = None,
    on_result: Callable[[str, process.ProcessResult], None] | None = None,
) -> Any:
    """Handshake, then invoke; return the extension's validated ``output``.

    ``action`` is the ``spec.actions`` entry (camelCase keys); ``executable`` is its command
    already resolved by :func:`agentctl.process.resolve_executable`; ``env`` is the
    resolved child environment (its values are redacted from every message).
    ``on_handshake`` receives the announced name once the handshake matched, before the
    invoke runs, so the caller can record which helper answered.
    A container or sandbox launch passes ``argv_for(phase)`` (``handshake`` / ``invoke``:
    the command line before the flag) and ``launch_env`` (the launched process's
    environment). ``on_result(phase, result)`` sees each run's result before it is judged
    (a sandbox names the limit a failed run breached).
    """
    _validate(input, action.get("inputSchema"), "input", code="extension.input_invalid")
    secrets = list(env.values())
    command = str(action.get("command") or executable)
    direct = (executable, *[str(arg) for arg in action.get("args") or []])

    def argv(phase: str) -> tuple[str, ...]:
        return argv_for(phase) if argv_for is not None else direct

    child_env = env if launch_env is None else launch_env
    handshake = await _run(
        action, argv("handshake"), HANDSHAKE_FLAG, None, cwd, child_env, timeout_seconds
    )
    if on_result is not None:
        on_result("handshake", handshake)
    if handshake.timed_out:
        raise TaskFailure(
            f"extension `{command}` did not answer the handshake within {timeout_seconds:g}s",
            code="extension.handshake_failed",
        )
    announced = _decode(handshake, command, "handshake", secrets)
    name = _check_handshake(announced, action, command)
    if on_handshake is not None:
        on_handshake(name)

    request = {"protocolVersion": EXTENSION_PROTOCOL_VERSION, "effectId": effect_id, "input": input}
    stdin = json.dumps(request, ensure_ascii=False).encode()
    invoked = await _run(
        action, argv("invoke"), INVOKE_FLAG, stdin, cwd, child_env, timeout_seconds
    )
    if on_result is not None:
        on_result("invoke", invoked)
    if invoked.timed_out:
        raise OutcomeUnknown(
            f"extension `{command}` timed out after {timeout_seconds:g}s and was killed",
            details={"stderr": _tail(invoked.stderr, secrets)},
        )
    reply = _decode(invoked, command, "invoke", secrets)
    if not isinstance(reply, Mapping) or set(reply) != {"protocolVersion", "effectId", "output"}:
        raise TaskFailure(
            f"extension `{command}` must answer the invoke with exactly "
            "{protocolVersion, effectId, output}",
            code="extension.protocol_error",
        )
    if reply["protocolVersion"] != EXTENSION_PROTOCOL_VERSION or reply["effectId"] != effect_id:
        raise TaskFailure(
            f"extension `{command}` answered for protocol `{reply['protocolVersion']}` and "
            f"effect `{reply['effectId']}`, expected `{EXTENSION_PROTOCOL_VERSION}` and "
            f"`{effect_id}`",
            code="extension.protocol_error",
        )
    output = reply["output"]
    _validate(output, action.get("outputSchema"), "output", code="extension.output_invalid")
    return output


async def _run(
    action: Mapping[str, Any],
    argv: tuple[str, ...],
    flag: str,
    stdin: bytes | None,
    cwd: Path,
    env: Mapping[str, str],
    timeout_seconds: float,
) -> process.ProcessResult:
    try:
        spec = process.ProcessSpec(
            argv=(*argv, flag),
            cwd=cwd,
            env=dict(env),
            timeout_seconds=timeout_seconds,
            stdout_limit_bytes=int(action.get("stdoutLimitBytes") or 1 << 20),
            stderr_limit_bytes=int(action.get("stderrLimitBytes") or 1 << 20),
            combined_limit_bytes=int(action.get("combinedOutputLimitBytes") or 2 << 20),
            stdin=stdin if stdin is not None else b"",
        )
        return await process.run_process(spec)
    except AgentctlError as error:
        raise as_task_failure(error) from error


def _decode(result: process.ProcessResult, command: str, phase: str, secrets: list[str]) -> Any:
    if result.limit_exceeded is not None:
        raise TaskFailure(
            f"extension `{command}` exceeded its {result.limit_exceeded} output limit during "
            f"the {phase} and was killed",
            code="subprocess_output_limit_exceeded",
            details={"stream": result.limit_exceeded, "phase": phase},
        )
    if result.exit_code != 0:
        how = (
            f"exit code {result.exit_code}"
            if result.exit_code is not None
            else f"signal {result.signal}"
        )
        raise TaskFailure(
            f"extension `{command}` {phase} exited with {how}",
            code="extension.failed",
            details={
                "phase": phase,
                "exitCode": result.exit_code,
                "stderr": _tail(result.stderr, secrets),
            },
        )
    try:
        return json.loads(result.stdout)
    except ValueError as exc:
        raise TaskFailure(
            f"extension `{command}` {phase} did not print one JSON document: {exc}",
            code="extension.protocol_error",
            details={"phase": phase},
        ) from exc


def _check_handshake(announced: Any, action: Mapping[str, Any], command: str) -> str:
    """The announced name, once the contract fields match the action."""
    if not isinstance(announced, Mapping):
        raise TaskFailure(
            f"extension `{command}` handshake is not a JSON object",
            code="extension.handshake_mismatch",
        )
    name = announced.get("name")
    if not isinstance(name, str) or not name:
        raise TaskFailure(
            f"extension `{command}` handshake name is {name!r}, expected a non-empty string",
            code="extension.handshake_mismatch",
        )
    expected_values = {
        "protocolVersion": action.get("protocolVersion"),
        "inputSchema": action.get("inputSchema"),
        "outputSchema": action.get("outputSchema"),
        "capabilities": list(action.get("capabilities") or []),
    }
    differing = [
        key
        for key in _HANDSHAKE_KEYS
        if _canonical(announced.get(key)) != _canonical(expected_values[key])
    ]
    if differing:
        raise TaskFailure(
            f"extension `{command}` (announced as `{name}`) handshake does not match the "
            f"action: {', '.join(differing)} differ",
            code="extension.handshake_mismatch",
            details={"fields": differing, "announcedName": name},
        )
    return name


def _canonical(value: Any) -> str:
    # JSON text keeps the type distinctions Python's == erases (1 == 1.0 == True).
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _validate(value: Any, schema: Any, what: str, *, code: str) -> None:
    if not isinstance(schema, Mapping):
        raise TaskFailure(f"extension {what}Schema is missing", code=code)
    try:
        mismatch = first_error(compile_schema(schema, f"extension {what}Schema"), value)
    except UsageError as exc:
        raise TaskFailure(exc.message, code=code) from exc
    if mismatch is not None:
        raise TaskFailure(
            f"extension {what} does not match its schema at {mismatch.where}: {mismatch.message}",
            code=code,
            details={"path": mismatch.where},
        )


def _tail(data: bytes, secrets: list[str]) -> str:
    return redact(process.decode_lossy(data), secrets)[-2000:]
