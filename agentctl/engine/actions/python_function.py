"""``python.function``: a step written as a Python function, durable inside
(docs/python-steps.md).

The function runs as ``fn(ctx, inputs)`` in a child process of the owner, started through
:func:`agentctl.process.run_process` like any process action (cleared environment, own
process group, stderr cap, timeout, ``isolation``). Each ``ctx`` operation is a request the
child writes on its stdout (:mod:`step_runner`); the owner performs it here as an effect of
the task, through the one effect gate — so journaling, policy, approvals, budgets and
fencing stay in one place — and writes the answer back.

An operation's identity is its position in the attempt. After a crash or a park the
function runs again from the top in the same attempt: an operation already confirmed
answers with its recorded result without being dispatched; one in doubt stops the run as
uncertain; a different request at a recorded position fails the task with
``step.nondeterministic``. The body itself is an effect (``python.function``, position 1)
only when its declared ``idempotency`` says what it does outside ``ctx`` may not be
repeated; an ``idempotent`` body (the default) is simply run again.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from agentctl import process
from agentctl.compiler.effects import REPEATABLE_BODIES, STEP_ASK, STEP_NOW, STEP_UUID
from agentctl.digest import sha256_hex
from agentctl.engine.actions.context import TaskEnv, TaskResult, effect_process_env
from agentctl.engine.actions.environment import process_timeout, resolve_environment
from agentctl.engine.actions.questions import put_question
from agentctl.engine.core import isolation
from agentctl.engine.effects import journal
from agentctl.engine.effects.approvals import get_approval
from agentctl.engine.effects.journal import EffectSpec
from agentctl.errors import AgentctlError, UsageError
from agentctl.json_schemas import compile_schema, first_error
from agentctl.redaction import redact
from agentctl.signals import (
    ApprovalPending,
    FreshAttempt,
    OutcomeUnknown,
    TaskFailure,
    as_task_failure,
)
from agentctl.spec.function_sources import import_folders
from agentctl.spec.models_definitions import DEFAULT_OUTPUT_LIMIT_BYTES

__all__ = ["OPERATIONS", "Bodies", "run_function", "step_question_id"]

#: What ``ctx`` offers; each name is one request the child may send.
OPERATIONS = ("shell", "read", "write", "call", "model", "ask", "now", "uuid")

#: Kinds ``ctx.call`` refuses: a question or a pause has its own ``ctx.ask``; a function
#: step is called as a function.
_NOT_CALLABLE = frozenset({"builtin.ask", "builtin.pause", "python.function"})

_RUNNER = Path(__file__).with_name("step_runner.py")

_MAX_CONCLUDED = 64


@dataclasses.dataclass(frozen=True, slots=True)
class Bodies:
    """How ``ctx`` reaches the other task bodies: an action definition, a declared action,
    a declared agent. The caller hands them in (it knows them all; this module importing
    them would close an import cycle through the agent's action tools)."""

    definition: Callable[[TaskEnv, Mapping[str, Any]], Awaitable[TaskResult]]
    action: Callable[[TaskEnv, str], Awaitable[TaskResult]]
    agent: Callable[[TaskEnv, str], Awaitable[TaskResult]]


def step_question_id(run_id: str, task_id: str, attempt: int, position: int) -> str:
    """The id of the question ``ctx.ask`` puts at ``position`` (an approval id, so
    ``agentctl approvals answer`` finds it)."""
    key = f"step-question\0{run_id}\0{task_id}\0{attempt}\0{position}"
    return "approval-" + sha256_hex(key.encode())[:16]


def _checked(value: Any, schema: Any, what: str, code: str, task_id: str) -> None:
    if not isinstance(schema, Mapping):
        return
    try:
        mismatch = first_error(compile_schema(dict(schema), f"task {task_id}'s {what}"), value)
    except UsageError as error:
        raise as_task_failure(error) from error
    if mismatch is not None:
        raise TaskFailure(
            f"task {task_id}: the function's {what.removesuffix('Schema')} does not match its "
            f"{what} at {mismatch.where}: {mismatch.message}",
            code=code,
            details={"path": mismatch.where},
        )


async def run_function(env: TaskEnv, action: Mapping[str, Any], bodies: Bodies) -> TaskResult:
    """Run the step's function to its return value (the task's output)."""
    function = str(action.get("function") or "")
    _checked(env.input, action.get("inputSchema"), "inputSchema", "input.invalid", env.task.id)
    if env.check:
        return TaskResult(
            {
                "status": "requires_execution",
                "changed": False,
                "predictability": "requires_execution",
            }
        )
    interpreter = str(action.get("python") or sys.executable)
    allowlist = [*list(env.policy.get("processAllowlist") or []), os.path.basename(interpreter)]
    launch = await isolation.launch_for({**action, "command": interpreter}, allowlist)
    environment = resolve_environment(env, action)
    env.secrets.extend(value for _, value in environment.values())
    timeout = process_timeout(env, action)
    stderr_limit = int(action.get("stderrLimitBytes") or DEFAULT_OUTPUT_LIMIT_BYTES)
    idempotency = str(action.get("idempotency") or "idempotent")
    operations = _Operations(env, action, bodies)

    async def run_child(effect_id: str) -> Any:
        cwd_raw = action.get("cwd")
        cwd = (
            Path(env.workspace.resolve_read(str(cwd_raw)))
            if cwd_raw
            else env.workspace.workspace_root
        )
        child = process.ProcessSpec(
            argv=launch.argv(
                interpreter,
                ["-c", _RUNNER.read_text(encoding="utf-8")],
                effect_id=effect_id,
                workspace=env.workspace,
                cwd=cwd,
                env_names=sorted(environment),
                database=env.gate.store.path,
            ),
            cwd=cwd,
            env=launch.child_env(
                effect_process_env({k: v for k, (_, v) in environment.items()}, effect_id)
            ),
            timeout_seconds=timeout,
            stdout_limit_bytes=1,  # stdout is the conversation's, never captured
            stderr_limit_bytes=stderr_limit,
            combined_limit_bytes=stderr_limit + 1,
        )
        root, *path = _import_folders(env, launch.isolation, cwd)
        start = {"function": function, "input": env.input, "root": root, "path": path}
        last: dict[str, Any] = {}

        async def converse(reader: Any, writer: Any) -> None:
            writer.write((json.dumps(start, ensure_ascii=False) + "\n").encode())
            await writer.drain()
            while line := await reader.readline():
                message = _decode(line, env.task.id)
                if "op" not in message:
                    last.update(message)
                    return
                reply = await operations.perform(message)
                writer.write((json.dumps(reply, ensure_ascii=False) + "\n").encode())
                await writer.drain()

        ran = None
        try:
            ran = await process.run_process(child, converse=converse)
        finally:
            if ran is None or ran.timed_out:
                isolation.remove_container(launch, effect_id)
            breached = isolation.settle(launch, effect_id, "run", ran)
        assert ran is not None
        stderr = redact(process.decode_lossy(ran.stderr), list(env.secrets))[-2000:]
        if ran.timed_out:
            message = f"function `{function}` timed out after {timeout}s and was killed"
            if idempotency not in REPEATABLE_BODIES:
                raise OutcomeUnknown(message, details={"stderr": stderr})
            raise TaskFailure(
                f"task {env.task.id}: {message}",
                code="task.timeout",
                details={"timeoutSeconds": timeout, "retrySafe": True, "stderr": stderr},
            )
        if breached is not None:
            raise breached
        if ran.limit_exceeded is not None:
            raise TaskFailure(
                f"function `{function}` exceeded its stderr output limit and was killed",
                code="subprocess_output_limit_exceeded",
                details={"stream": "stderr"},
            )
        return _outcome(last, function, env.task.id, ran, stderr)

    if idempotency in REPEATABLE_BODIES:
        # Not an effect: the key its process sees (and its container's name) is still one
        # per attempt.
        key = f"step\0{env.run_id}\0{env.task.id}\0{env.attempt.attempt}"
        output = await run_child(sha256_hex(key.encode()))
    else:
        spec = EffectSpec.classified(
            "python.function",
            {
                "function": function,
                "sourceDigest": action.get("sourceDigest"),
                "input": env.input,
                **launch.effect_fields(),
            },
            idempotency=idempotency,
        )
        output = await env.gate.perform(
            env.attempt,
            spec,
            run_child,
            prompt=f"run the Python function {function}{launch.prompt_suffix()}",
        )
    _checked(output, action.get("outputSchema"), "outputSchema", "output.contract", env.task.id)
    return TaskResult(output)


def _import_folders(env: TaskEnv, level: str, cwd: Path) -> list[str]:
    """Where the step's process imports its function from: the workflow file's folder (the
    run's workspace when it has none), then the ``spec.python.path`` folders. A container
    sees the workspace elsewhere, so there each folder is given relative to the process's
    working directory."""
    root = env.workflow_dir or env.base_dir
    declared = (env.spec.get("python") or {}).get("path") or []
    folders = import_folders(root, [str(entry) for entry in declared])
    if level != "container":
        return [str(folder) for folder in folders]
    workspace = os.path.realpath(env.workspace.workspace_root)
    seen: list[str] = []
    for folder in folders:
        real = os.path.realpath(folder)
        if real != workspace and not real.startswith(workspace + os.sep):
            raise TaskFailure(
                f"task {env.task.id}: the function's import folder `{folder}` is outside the "
                f"workspace `{workspace}`, which is all a container sees",
                code="isolation.unavailable",
                stops_run=True,
            )
        seen.append(os.path.relpath(real, os.path.realpath(cwd)))
    return seen


def _decode(line: bytes, task_id: str) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except ValueError as exc:
        raise TaskFailure(
            f"task {task_id}: the function's process wrote a line that is not JSON on its "
            f"stdout: {exc}",
            code="step.protocol_error",
        ) from exc
    if not isinstance(message, dict):
        raise TaskFailure(
            f"task {task_id}: the function's process wrote {message!r} on its stdout",
            code="step.protocol_error",
        )
    return message


def _outcome(
    last: Mapping[str, Any], function: str, task_id: str, ran: process.ProcessResult, stderr: str
) -> Any:
    if "return" in last:
        return last["return"]
    raised = last.get("raise")
    if isinstance(raised, Mapping):
        if raised.get("type") == "StepError":
            raise TaskFailure(
                str(raised.get("message")),
                code=str(raised.get("code") or "step.failed"),
                details=raised.get("details"),
            )
        raise TaskFailure(
            f"task {task_id}: function `{function}` raised {raised.get('type')}: "
            f"{raised.get('message')}",
            code="step.failed",
            details={"traceback": raised.get("traceback"), "stderr": stderr},
        )
    how = f"exit code {ran.exit_code}" if ran.exit_code is not None else f"signal {ran.signal}"
    raise TaskFailure(
        f"task {task_id}: the process of function `{function}` ended ({how}) without "
        "returning; see its stderr",
        code="step.failed",
        details={"exitCode": ran.exit_code, "stderr": stderr},
    )


class _Operations:
    """The owner's side of ``ctx``: one effect of the task per request."""

    def __init__(self, env: TaskEnv, action: Mapping[str, Any], bodies: Bodies) -> None:
        self.env = env
        self.action = action
        self.bodies = bodies

    def _with(self, input: Any) -> TaskEnv:
        # The same attempt (positions count on), the same written-files and secrets lists.
        return dataclasses.replace(self.env, input=input)

    async def perform(self, message: Mapping[str, Any]) -> dict[str, Any]:
        op = str(message.get("op"))
        args = message.get("args")
        if op not in OPERATIONS or not isinstance(args, Mapping):
            raise TaskFailure(
                f"task {self.env.task.id}: the function asked for unknown operation `{op}`",
                code="step.protocol_error",
            )
        position = self.env.attempt.ordinal + 1
        try:
            result = await self._at_next_free_position(op, args)
        except TaskFailure as failure:
            if failure.code == "effect.nondeterministic":
                raise self._nondeterministic(failure, op, args, position) from failure
            if failure.stops_run:
                raise
            return {"error": _error(failure)}
        except AgentctlError as error:
            return {"error": _error(as_task_failure(error))}
        return {"result": result}

    async def _at_next_free_position(self, op: str, args: Mapping[str, Any]) -> Any:
        """Perform the operation; where an operator concluded the effect at its position
        never took effect (``not_applied``, ``compensated``), ask again at the next one.

        The rule is the same on every re-run, so positions stay aligned: the concluded
        effect keeps its position, the operation moves past it, and what the function
        confirmed before it is reused, not repeated (a fresh attempt would redo it all).
        """
        handler = getattr(self, "_" + op)
        for _ in range(_MAX_CONCLUDED):
            try:
                return await handler(args)
            except FreshAttempt:
                continue
        raise TaskFailure(
            f"task {self.env.task.id}: {_MAX_CONCLUDED} effects in a row were concluded "
            f"not applied for one ctx.{op} call",
            code="step.failed",
        )

    def _nondeterministic(
        self, failure: TaskFailure, op: str, args: Mapping[str, Any], position: int
    ) -> TaskFailure:
        details = failure.details if isinstance(failure.details, Mapping) else {}
        with self.env.gate.store.read() as conn:
            recorded = journal.get_effect(conn, str(details.get("effectId")))
        asked = {"op": op, **{k: v for k, v in args.items() if v is not None}}
        held = (
            {"operation": recorded.operation, "request": recorded.request}
            if recorded is not None
            else {"effectId": details.get("effectId")}
        )
        ordinal = recorded.ordinal if recorded is not None else position
        return TaskFailure(
            f"step {self.env.task.id} ({self.action.get('function')}) asked for "
            f"{json.dumps(asked, sort_keys=True)[:300]} at position {ordinal}, but the journal "
            f"holds {json.dumps(held, sort_keys=True, default=str)[:300]} there: the function "
            "changed, or it is not deterministic. Take times and random values from ctx.now() "
            "and ctx.uuid() and reach the outside world only through ctx. To drop the change, "
            "revert it and resume; to keep it, run the step afresh in a new run with "
            "`agentctl repair WORKFLOW RUN`, which reuses every other task that still fits",
            code="step.nondeterministic",
            stops_run=True,
            permanent=True,
            details={"position": ordinal, "asked": asked, "recorded": held},
        )

    # -- the operations ----------------------------------------------------------------

    async def _shell(self, args: Mapping[str, Any]) -> Any:
        shell: dict[str, Any] = {
            key: self.action[key]
            for key in ("env", "isolation", "sandbox", "container", "cwd")
            if self.action.get(key) is not None
        }
        shell.update(
            kind="builtin.shell.exec",
            command=str(args.get("command") or ""),
            args=[str(a) for a in args.get("args") or []],
        )
        if isinstance(args.get("timeout"), int | float):
            shell["timeoutSeconds"] = max(1, int(args["timeout"]))
        output = (await self.bodies.definition(self._with({}), shell)).output
        return {k: output.get(k) for k in ("exitCode", "stdout", "stderr")}

    async def _read(self, args: Mapping[str, Any]) -> Any:
        read = await self.bodies.definition(
            self._with({"path": args.get("path")}), {"kind": "builtin.read"}
        )
        return read.output.get("content")

    async def _write(self, args: Mapping[str, Any]) -> Any:
        given = {"path": args.get("path"), "content": args.get("text")}
        written = await self.bodies.definition(self._with(given), {"kind": "builtin.write"})
        return {"path": written.output.get("path"), "changed": written.output.get("changed")}

    async def _call(self, args: Mapping[str, Any]) -> Any:
        name = str(args.get("action"))
        declared = (self.env.spec.get("actions") or {}).get(name)
        if declared is None:
            raise TaskFailure(
                f"ctx.call: workflow declares no action `{name}`", code="input.invalid"
            )
        if declared.get("kind") in _NOT_CALLABLE:
            raise TaskFailure(
                f"ctx.call: action `{name}` is a {declared.get('kind')}, which a step cannot "
                "call (use ctx.ask for a question)",
                code="input.invalid",
            )
        given = args.get("input")
        return (await self.bodies.action(self._with({} if given is None else given), name)).output

    async def _model(self, args: Mapping[str, Any]) -> Any:
        name = str(args.get("agent"))
        if name not in (self.env.spec.get("agents") or {}):
            raise TaskFailure(
                f"ctx.model: workflow declares no agent `{name}`", code="input.invalid"
            )
        return (await self.bodies.agent(self._with(args.get("input") or {}), name)).output

    async def _ask(self, args: Mapping[str, Any]) -> Any:
        env = self.env
        prompt = args.get("prompt")
        choices = args.get("choices")
        if not isinstance(prompt, str) or not prompt:
            raise TaskFailure("ctx.ask needs a non-empty prompt", code="input.invalid")
        spec = EffectSpec.classified(STEP_ASK, {"prompt": prompt, "choices": choices})
        position = env.attempt.ordinal + 1
        qid = step_question_id(env.run_id, env.task.id, env.attempt.attempt, position)
        gate = env.gate

        async def recorded(_effect_id: str) -> Any:
            with gate.store.read() as conn:
                answered = get_approval(conn, qid)
            if answered is None or answered.status != "answered":
                raise TaskFailure(f"question {qid} has no answer", code="question.closed")
            return {"answer": answered.answer, "answeredBy": answered.resolver}

        if not gate.journaled(env.attempt, spec):
            question = put_question(env, qid, prompt, choices)
            if question is None or question.status == "pending":
                raise ApprovalPending(qid, kind="question")
            if question.status != "answered":
                raise TaskFailure(f"question {qid} was {question.status}", code="question.closed")
        answered = await gate.perform(env.attempt, spec, recorded)
        return answered["answer"]

    async def _now(self, args: Mapping[str, Any]) -> Any:
        clock = self.env.gate.clock

        async def read_clock(_effect_id: str) -> Any:
            return clock.now().isoformat()

        return await self.env.gate.perform(
            self.env.attempt, EffectSpec.classified(STEP_NOW, {}), read_clock
        )

    async def _uuid(self, args: Mapping[str, Any]) -> Any:
        async def draw(_effect_id: str) -> Any:
            return str(uuid.uuid4())

        return await self.env.gate.perform(
            self.env.attempt, EffectSpec.classified(STEP_UUID, {}), draw
        )


def _error(failure: TaskFailure) -> dict[str, Any]:
    return {"code": failure.code, "message": failure.message, "details": failure.details}
