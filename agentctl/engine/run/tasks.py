"""Task bodies for every ``uses.kind`` of the plan, and the checks around them.

Actions and agents live in their own modules; this one holds the synthetic kinds the
compiler generates (routers, foreach/matrix/loop aggregates, sub-workflow boundaries), the
``when`` skip record, and output-contract validation (docs/workflow-language.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentctl.compiler.plan import PlanTask
from agentctl.digest import canonical_json, sha256_hex, string_json
from agentctl.engine.actions.agent import ProviderPool, run_agent
from agentctl.engine.actions.builtin import run_action, run_definition
from agentctl.engine.actions.context import TaskEnv, TaskResult
from agentctl.engine.actions.python_function import Bodies, run_function
from agentctl.engine.core.records import TaskRow
from agentctl.engine.run.contracts import any_object, plainly_valid
from agentctl.errors import UsageError
from agentctl.json_schemas import compile_schema, first_error
from agentctl.signals import TaskFailure, as_task_failure
from agentctl.spec.expressions import TemplateContext, evaluate_condition
from agentctl.spec.templates import json_equal, parse_template

__all__ = [
    "check_contract",
    "never_waits",
    "condition_record",
    "loop_exit_guard",
    "run_body",
    "when_condition",
    "when_skip_output",
]


def _item(index: int, task_id: str, row: TaskRow | None) -> dict[str, Any]:
    if row is None:
        return {
            "index": index,
            "taskId": task_id,
            "state": "pending",
            "output": None,
            "error": None,
        }
    return {
        "index": index,
        "taskId": task_id,
        "state": row.status,
        "output": row.output if row.has_output else None,
        "error": _error_text(row.error),
    }


def _error_text(error: Any) -> Any:
    if isinstance(error, Mapping) and "message" in error:
        return error["message"]
    return error


def aggregate_output(children: list[str], rows: Mapping[str, TaskRow]) -> dict[str, Any]:
    return {"items": [_item(i, child, rows.get(child)) for i, child in enumerate(children)]}


def _items_json(items: list[dict[str, Any]], rows: Mapping[str, TaskRow]) -> str:
    """``canonical_json(items)`` of :func:`_item` records, each written around its child's
    recorded output text (canonical JSON already) instead of encoding every output again:
    a foreach of 200 children is about a tenth of the work. The members are written in
    canonical (sorted) order: error, index, output, state, taskId."""
    parts = []
    for item in items:
        row = rows.get(item["taskId"])
        output = item["output"]
        if output is None:
            output_text = "null"
        elif row is not None and row.output is output and row.output_json is not None:
            output_text = row.output_json
        else:
            output_text = canonical_json(output)
        error = item["error"]
        parts.append(
            '{"error":'
            + ("null" if error is None else canonical_json(error))
            + ',"index":'
            + int.__repr__(item["index"])
            + ',"output":'
            + output_text
            + ',"state":'
            + string_json(item["state"])
            + ',"taskId":'
            + string_json(item["taskId"])
            + "}"
        )
    return "[" + ",".join(parts) + "]"


def aggregate_result(children: list[str], rows: Mapping[str, TaskRow]) -> TaskResult:
    """The aggregate's output with its canonical JSON (:func:`_items_json`)."""
    output = aggregate_output(children, rows)
    return TaskResult(output, output_json='{"items":' + _items_json(output["items"], rows) + "}")


def loop_exit_guard(
    task: PlanTask, rows: Mapping[str, TaskRow], context: TemplateContext
) -> dict[str, Any] | None:
    """The loop's guard after its last iteration, as a condition record (None unless that
    iteration succeeded: only then would the loop have gone on)."""
    children = list(task.uses.name["children"])
    last = rows.get(children[-1]) if children else None
    if last is None or last.status != "succeeded":
        return None
    guard_context = TemplateContext(
        inputs=context.inputs,
        vars={**context.vars, "loopIndex": len(children), "loopPrevious": last.output},
        memory=context.memory,
        tasks=context.tasks,
    )
    condition = str(task.uses.name["condition"])
    return condition_record(
        "loopGuard", condition, evaluate_condition(condition, guard_context), guard_context
    )


def loop_result(
    task: PlanTask, rows: Mapping[str, TaskRow], guard: Mapping[str, Any] | None
) -> TaskResult:
    """:func:`loop_output` with its canonical JSON (:func:`_items_json`)."""
    output = loop_output(task, rows, guard)
    text = (
        '{"items":'
        + _items_json(output["items"], rows)
        + ',"iterations":'
        + int.__repr__(output["iterations"])
        + "}"
    )
    return TaskResult(output, output_json=text)


def loop_output(
    task: PlanTask, rows: Mapping[str, TaskRow], guard: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The aggregate of a loop; ``guard`` is :func:`loop_exit_guard`'s decision."""
    children = list(task.uses.name["children"])
    items = [_item(i, child, rows.get(child)) for i, child in enumerate(children)]
    ran = [item for item in items if item["state"] not in ("skipped", "pending")]
    if guard is not None and guard["result"]:
        raise TaskFailure(
            f"loop reached maxIterations ({len(children)}) while its condition remained "
            f"true: {guard['expression']}",
            code="loop.max_iterations",
        )
    return {"iterations": len(ran), "items": items}


def router_output(task: PlanTask, context: TemplateContext) -> dict[str, Any]:
    route = task.uses.name
    selected = parse_template(str(route["select"])).render(context)
    for case in route.get("cases") or []:
        if json_equal(selected, case.get("equals")):
            return {"selected": selected, "matched": True, "destinations": list(case["tasks"])}
    return {
        "selected": selected,
        "matched": False,
        "destinations": list(route.get("default") or []),
    }


def condition_record(
    kind: str, expression: str, result: bool, context: TemplateContext
) -> dict[str, Any]:
    """One evaluated condition: what was asked, the answer, and a digest of everything the
    answer could depend on (inputs, vars, memory and task outputs, canonical JSON)."""
    digest = "sha256:v1:" + sha256_hex(canonical_json(context.as_json()).encode())
    return {"kind": kind, "expression": expression, "result": result, "contextDigest": digest}


def when_condition(task: PlanTask, context: TemplateContext) -> dict[str, Any]:
    """Evaluate the task's ``when``; a loop iteration's ``when`` is the loop's guard."""
    expression = str(task.when)
    looped = task.expansion is not None and "loopIndex" in task.expansion.bindings
    return condition_record(
        "loopGuard" if looped else "when",
        expression,
        evaluate_condition(expression, context),
        context,
    )


def when_skip_output(condition: Mapping[str, Any]) -> dict[str, Any]:
    """The output of a task whose ``when`` (or loop guard) was false."""
    return {
        "reason": "when condition was false",
        "condition": {
            "expression": condition["expression"],
            "contextDigest": condition["contextDigest"],
            "result": False,
        },
    }


_VALIDATORS: dict[str, Any] = {}


def _validator(task: PlanTask) -> Any:
    """One compiled validator per distinct contract (keyed by its fingerprint)."""
    key = task.output_contract_fingerprint or canonical_json(dict(task.output_schema or {}))
    validator = _VALIDATORS.get(key)
    if validator is None:
        validator = compile_schema(dict(task.output_schema or {}), f"task {task.id}'s outputSchema")
        if len(_VALIDATORS) < 4096:
            _VALIDATORS[key] = validator
    return validator


def check_contract(task: PlanTask, output: Any) -> None:
    """A completed output that violates its contract fails the task (docs/workflow-language.md).

    A contract that cannot be applied (a plan compiled before `check` refused references
    outside the schema) fails the task too: the effect before it stays recorded, and the run
    ends failed instead of stopping half-way.
    """
    if task.output_schema is None:
        return
    if type(output) is dict and any_object(task.output_schema):
        return  # the plain contract of most actions, met
    if plainly_valid(task.output_schema, output):
        return  # a structural contract met (anything else: the validator decides and words)
    what = f"task {task.id}'s outputSchema"
    try:
        mismatch = first_error(_validator(task), output, what)
    except UsageError as error:
        raise as_task_failure(error) from error
    if mismatch is not None:
        raise TaskFailure(
            f"output of task {task.id} violates its output contract: "
            f"{mismatch.message} at {mismatch.where}",
            code="output.contract",
        )


def _bodies(pool: ProviderPool) -> Bodies:
    """What a function step's ``ctx`` may run: action definitions, actions, agents."""

    async def agent(env: TaskEnv, name: str) -> TaskResult:
        return await run_agent(env, name, pool)

    return Bodies(definition=run_definition, action=run_action, agent=agent)


#: Action kinds whose body returns or raises in its first step: it never waits.
_NEVER_WAITING_ACTIONS = frozenset(
    {"builtin.assign", "builtin.assert", "builtin.fail", "builtin.pause"}
)
#: The compiler's kinds, all of them computed from what the run holds.
_NEVER_WAITING_KINDS = frozenset(
    {"router", "aggregate", "loop_aggregate", "subworkflow_input", "subworkflow_aggregate"}
)


def never_waits(task: PlanTask, spec: Mapping[str, Any]) -> bool:
    """Whether the task's body (:func:`run_body`) never waits: no effect, process, model
    call or question, and no artifact to ingest after it. Such an attempt waits at most for
    a retry's pause, outside its body, and needs no asyncio task of its own until then."""
    if task.artifacts:
        return False
    kind = task.uses.kind
    if kind == "action":
        action = (spec.get("actions") or {}).get(str(task.uses.name)) or {}
        return action.get("kind") in _NEVER_WAITING_ACTIONS
    return kind in _NEVER_WAITING_KINDS


async def run_body(
    env: TaskEnv,
    rows: Mapping[str, TaskRow],
    context: TemplateContext,
    pool: ProviderPool,
) -> TaskResult:
    task = env.task
    kind = task.uses.kind
    row = rows.get(task.id)
    env.resumed = row is not None and row.status == "waiting_for_approval"
    if kind == "action":
        action = (env.spec.get("actions") or {}).get(str(task.uses.name)) or {}
        if action.get("kind") == "python.function":
            return await run_function(env, action, _bodies(pool))
        return await run_definition(env, action)  # what run_action looks up, found above
    if kind == "agent":
        return await run_agent(env, str(task.uses.name), pool)
    if kind == "router":
        return TaskResult(router_output(task, context))
    if kind == "aggregate":
        return aggregate_result(list(task.uses.children), rows)
    if kind == "loop_aggregate":
        return loop_result(task, rows, env.condition)
    if kind in ("subworkflow_input", "subworkflow_aggregate"):
        return TaskResult(env.input)
    raise TaskFailure(f"task {task.id} has unknown kind {kind}", code="plan.unknown_kind")
