"""``builtin.ask``: a task that asks a person and parks the run until answered.

Beyond upstream (as Marbles' ask). The task's ``with`` holds ``prompt`` (required),
optional ``choices`` (a list of allowed JSON values) and optional ``schema`` (a JSON Schema
the answer must satisfy). The question is stored like an approval (id ``approval-`` + 16
hex) and answered with ``agentctl approvals answer ID VALUE``; the answer becomes the task
output ``{answer, answeredBy}`` and is reused on every later resume or replay.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentctl.digest import sha256_hex
from agentctl.engine.actions.context import TaskEnv, TaskResult
from agentctl.engine.effects.approvals import Approval, create_approval, get_approval
from agentctl.errors import UsageError
from agentctl.json_schemas import compile_schema, first_error
from agentctl.signals import ApprovalPending, TaskFailure, as_task_failure

__all__ = ["ask", "put_question", "question_id", "validate_answer"]


def question_id(run_id: str, task_id: str, attempt: int) -> str:
    return "approval-" + sha256_hex(f"question\0{run_id}\0{task_id}\0{attempt}".encode())[:16]


def validate_answer(
    answer: Any, choices: list[Any] | None, schema: Mapping[str, Any] | None
) -> None:
    """Refuse an answer outside the choices or the schema (exit 2 at `approvals answer`)."""
    from agentctl.spec.template_values import json_equal

    if choices is not None and not any(json_equal(answer, c) for c in choices):
        raise UsageError(
            f"answer {answer!r} is not one of the choices {choices}",
            code="question.invalid_answer",
            hint="answer with one of the listed choices (JSON values, e.g. '\"yes\"' or 2)",
        )
    if schema is not None:
        mismatch = first_error(compile_schema(schema, "the question's schema"), answer)
        if mismatch is not None:
            raise UsageError(
                f"answer does not satisfy the question's schema: {mismatch.message}",
                code="question.invalid_answer",
                hint="answer with a JSON value that satisfies the schema shown by "
                "`agentctl approvals list`",
            )


async def ask(env: TaskEnv, action: Mapping[str, Any]) -> TaskResult:
    prompt = env.input.get("prompt") if isinstance(env.input, Mapping) else None
    if not isinstance(prompt, str) or not prompt:
        raise TaskFailure(
            f"task {env.task.id}: input requires string `prompt`", code="input.invalid"
        )
    choices = env.input.get("choices")
    schema = env.input.get("schema")
    if choices is not None and not isinstance(choices, list):
        raise TaskFailure("`choices` must be a list", code="input.invalid")
    if schema is not None and not isinstance(schema, Mapping):
        raise TaskFailure("`schema` must be a JSON Schema object", code="input.invalid")
    if schema is not None:
        try:  # refused before anyone is asked: an answer could never be checked against it
            compile_schema(schema, f"task {env.task.id}'s question schema")
        except UsageError as error:
            raise as_task_failure(error) from error
    qid = question_id(env.run_id, env.task.id, env.attempt.attempt)
    existing = put_question(env, qid, prompt, choices, schema)
    if existing is not None and existing.status == "answered":
        return TaskResult({"answer": existing.answer, "answeredBy": existing.resolver})
    if existing is not None and existing.status != "pending":
        raise TaskFailure(f"question {qid} was {existing.status}", code="question.closed")
    raise ApprovalPending(qid, kind="question")


def put_question(
    env: TaskEnv,
    qid: str,
    prompt: str,
    choices: Any,
    schema: Mapping[str, Any] | None = None,
) -> Approval | None:
    """The question ``qid`` of the task as recorded, or None when it was not asked yet: then
    it is asked now (the record and its ``question.asked`` event, in one transaction).
    ``builtin.ask`` and a function step's ``ctx.ask`` both ask through here."""
    gate = env.gate
    with gate.store.read() as conn:
        existing = get_approval(conn, qid)
    if existing is not None:
        return existing
    now = gate.clock.now()
    with gate.store.write() as conn:
        create_approval(
            conn,
            approval_id=qid,
            run_id=env.run_id,
            task_id=env.task.id,
            kind="question",
            prompt=prompt,
            now=now,
            choices=choices,
            answer_schema=dict(schema) if schema is not None else None,
        )
        gate.log.event(
            conn,
            "question.asked",
            {"approvalId": qid, "prompt": prompt, "choices": choices},
            now=now,
            task_id=env.task.id,
        )
    return None
