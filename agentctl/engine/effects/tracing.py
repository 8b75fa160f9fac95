"""Where the engine reports to telemetry: the spans of a run and what it records of them.

The executor and the effect gate call these hooks at a handful of points; each does
nothing but one ``enabled`` check unless OpenTelemetry is on (see
:mod:`agentctl.observability.telemetry`). The span tree of one execution::

    run <workflow>                     root; links to the run's earlier execution
      task <task id>                   one per attempt
        effect <operation>             effect id, class, risk, operation, status
          chat <model> | execute_tool <tool> | tools/call <tool> | a2a.delegate <peer> | ...
          approval wait <operation>    person's decision (also across a park and resume)

Ids are stored on what the spans describe: the run row (the latest execution's root),
the task row (the latest attempt), each effect (when it was journaled) and each audit
event (the span current when it was written). Attributes name things — ids, models,
tools, servers, peers, token counts — never inputs, prompts or secret values; prompts
and completions go on model spans only with ``AGENTCTL_OTEL_CAPTURE_CONTENT=true``.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from agentctl import tracecontext
from agentctl.digest import canonical_json
from agentctl.errors import AgentctlError, Cancelled
from agentctl.observability.telemetry import AttributeValue, Span, TraceIds, active
from agentctl.signals import ApprovalPending, EffectBlocked, FreshAttempt, TaskFailure
from agentctl.store import runs_repo
from agentctl.store.engine import SqlRunner
from agentctl.store.states import RunState

if TYPE_CHECKING:
    from agentctl.compiler.plan import PlanTask
    from agentctl.engine.core.records import Attempt, RunLog, RunRow
    from agentctl.engine.effects.approvals import Approval
    from agentctl.engine.effects.journal import EffectSpec

__all__ = [
    "RunTrace",
    "approval_wait",
    "approval_waited",
    "traced_attempt",
    "traced_dispatch",
    "traced_effect",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

_OFF_SPAN = Span()

# Set by the effect span, filled by its call span: an effect without a call was reused
# from the journal (or refused before dispatch).
_dispatched: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "agentctl_effect_dispatched", default=None
)


class RunTrace:
    """The root span of one execution of a run, and the attempt spans under it."""

    def __init__(self, span: Span, run_id: str) -> None:
        self.span = span
        self.run_id = run_id
        self.attempts: dict[str, TraceIds] = {}
        self._ended = False

    @classmethod
    def off(cls, run_id: str) -> RunTrace:
        """No spans: a task a worker executes for another process's run."""
        return cls(_OFF_SPAN, run_id)

    @classmethod
    def begin(
        cls, conn: SqlRunner, log: RunLog, run: RunRow, environ: Mapping[str, str]
    ) -> RunTrace:
        """Start the execution's root span inside the claim transaction and record its ids
        on the run. The span continues a ``TRACEPARENT`` from the environment (a CI job's
        trace) and links to the run's previous execution and to the run it came from."""
        bridge = active()
        if not bridge.enabled:
            return cls(_OFF_SPAN, run.id)
        links: list[tuple[TraceIds, Mapping[str, AttributeValue]]] = []
        previous = runs_repo.trace_ids(conn, run.id)
        if previous is not None:
            links.append((previous, {"agentctl.link": "earlier_execution"}))
        if run.source_run_id:
            source = runs_repo.trace_ids(conn, run.source_run_id)
            if source is not None:
                links.append(
                    (source, {"agentctl.link": "source_run", "agentctl.run.id": run.source_run_id})
                )
        span = bridge.start_span(
            f"run {run.workflow_name}",
            attributes={
                "agentctl.run.id": run.id,
                "agentctl.workflow.name": run.workflow_name,
                "agentctl.workflow.digest": run.workflow_digest,
                "agentctl.run.mode": run.mode,
                "agentctl.run.resumed": previous is not None,
                "agentctl.run.source_id": run.source_run_id,
            },
            links=links,
            traceparent=environ.get(tracecontext.ENV_VARIABLE) or None,
        )
        if span.ids is not None:
            log.set_run(conn, trace_id=span.ids[0], span_id=span.ids[1])
        bridge.add(
            "agentctl.runs", 1, {"agentctl.run.state": "started", "agentctl.run.mode": run.mode}
        )
        return cls(span, run.id)

    def context(self) -> Any:
        """The context the run's driver task runs in (None when telemetry is off)."""
        return self.span.context()

    def task_values(self, task_id: str) -> dict[str, str]:
        """Columns for the task row: the ids of its latest attempt span in this execution."""
        ids = self.attempts.get(task_id)
        return {} if ids is None else {"trace_id": ids[0], "span_id": ids[1]}

    def event_fields(self, task_id: str | None) -> dict[str, str]:
        """``traceId``/``spanId`` for a progress event: the task's attempt span, or the
        execution's root span (nothing when telemetry is off)."""
        ids = self.attempts.get(task_id) if task_id else self.span.ids
        ids = ids or self.span.ids
        return {} if ids is None else {"traceId": ids[0], "spanId": ids[1]}

    def finish(self, status: str, error: Mapping[str, Any] | None) -> None:
        """The execution ended with the run in ``status``."""
        if self.span.ids is None or self._ended:
            return
        self.span.set({"agentctl.run.state": status})
        if status in (RunState.FAILED, RunState.CANCELLED) and error:
            self.span.fail(str(error.get("code") or f"run.{status}"), str(error.get("message")))
        active().add("agentctl.runs", 1, {"agentctl.run.state": status})
        self._end()

    def close(self, exc: BaseException | None) -> None:
        """End the span if :meth:`finish` did not (an execution stopped by an error)."""
        if self.span.ids is None or self._ended:
            return
        if exc is not None:
            code, message = _describe(exc)
            self.span.fail(code, message)
        self._end()

    def _end(self) -> None:
        self._ended = True
        self.span.end()


def _describe(exc: BaseException) -> tuple[str, str]:
    if isinstance(exc, TaskFailure):
        return exc.code, exc.message
    if isinstance(exc, AgentctlError):
        return exc.code, exc.message
    if isinstance(exc, Cancelled):
        return "run.cancelled", exc.reason
    if isinstance(exc, asyncio.CancelledError):
        return "run.cancelled", "cancelled"
    return type(exc).__name__, str(exc)


async def traced_attempt(
    trace: RunTrace, task: PlanTask, attempt: Attempt, body: Awaitable[T]
) -> T:
    """One task attempt as a span; its ids go on the task row with the transition."""
    bridge = active()
    if not bridge.enabled:
        return await body
    started = time.monotonic()
    status = "succeeded"
    attributes: dict[str, AttributeValue | None] = {
        "agentctl.run.id": attempt.run_id,
        "agentctl.task.id": task.id,
        "agentctl.task.attempt": attempt.attempt,
        "agentctl.task.kind": task.uses.kind,
    }
    with bridge.span(f"task {task.id}", attributes=attributes) as span:
        if span.ids is not None:
            trace.attempts[task.id] = span.ids
        try:
            return await body
        except BaseException as exc:
            status = _conclude(span, exc)
            raise
        finally:
            span.set({"agentctl.task.status": status})
            outcome = {"agentctl.task.status": status}
            bridge.add("agentctl.task.attempts", 1, outcome)
            bridge.record("agentctl.task.duration", time.monotonic() - started, outcome)


def _conclude(span: Span, exc: BaseException) -> str:
    """The status an exception means for a task attempt or effect; errors fail the span."""
    if isinstance(exc, ApprovalPending):
        span.event("agentctl.approval.pending", {"agentctl.approval.id": exc.approval_id})
        return "waiting_for_approval"
    if isinstance(exc, EffectBlocked):
        span.fail("effect.uncertain", f"effect {exc.effect_id} ({exc.operation}) is uncertain")
        return "uncertain"
    if isinstance(exc, FreshAttempt):
        return "superseded"
    if isinstance(exc, TaskFailure) and exc.code == "approval.rejected":
        span.fail(exc.code, exc.message)
        return "cancelled"
    code, message = _describe(exc)
    span.fail(code, message)
    return "cancelled" if code == "run.cancelled" else "failed"


def traced_effect(perform: F) -> F:
    """Wrap ``EffectGate.perform``: one span per effect, current while it is journaled
    (so the effect row and its audit events carry its ids) and dispatched."""

    @functools.wraps(perform)
    async def traced(
        gate: Any, attempt: Attempt, spec: EffectSpec, dispatch: Any, **options: Any
    ) -> Any:
        bridge = active()
        if not bridge.enabled:
            return await perform(gate, attempt, spec, dispatch, **options)
        effect_id = spec.effect_id(
            attempt.run_id, attempt.task_id, attempt.attempt, attempt.ordinal + 1
        )
        labels: dict[str, AttributeValue] = {
            "agentctl.effect.class": spec.effect_class,
            "agentctl.effect.operation": spec.operation,
        }
        attributes: dict[str, AttributeValue | None] = {
            **labels,
            "agentctl.run.id": attempt.run_id,
            "agentctl.task.id": attempt.task_id,
            "agentctl.effect.id": effect_id,
            "agentctl.effect.risk": spec.risk,
            "agentctl.effect.idempotency": spec.idempotency,
        }
        status = "succeeded"
        calls: list[str] = []
        token = _dispatched.set(calls)
        with bridge.span(f"effect {spec.operation}", attributes=attributes) as span:
            try:
                result = await perform(gate, attempt, spec, dispatch, **options)
                span.set({"agentctl.effect.reused": not calls})
                if calls and spec.effect_class == "model":
                    _model_cost(span, spec, options.get("usage"), result)
                return result
            except BaseException as exc:
                status = _conclude(span, exc)
                if isinstance(exc, TaskFailure) and exc.code == "budget.exceeded":
                    bridge.add("agentctl.budget.refusals", 1, labels)
                raise
            finally:
                _dispatched.reset(token)
                span.set({"agentctl.effect.status": status})
                bridge.add("agentctl.effects", 1, {**labels, "agentctl.effect.status": status})

    return cast(F, traced)


async def traced_dispatch(
    spec: EffectSpec, dispatch: Callable[[str], Awaitable[T]], effect_id: str
) -> T:
    """The call an effect makes, as a client span; its ``traceparent`` goes with the call
    (HTTP header for MCP and A2A, ``TRACEPARENT`` for processes)."""
    bridge = active()
    if not bridge.enabled:
        return await dispatch(effect_id)
    name, attributes = _call_shape(spec)
    calls = _dispatched.get()
    if calls is not None:
        calls.append(effect_id)
    started = time.monotonic()
    with (
        bridge.span(name, kind="client", attributes=attributes) as span,
        tracecontext.propagating(bridge.traceparent()),
    ):
        try:
            result = await dispatch(effect_id)
        except BaseException as exc:
            _conclude(span, exc)
            raise
        if spec.effect_class == "model":
            _model_response(span, attributes, result, time.monotonic() - started)
        return result


def _call_shape(spec: EffectSpec) -> tuple[str, dict[str, AttributeValue | None]]:
    """Span name and attributes of an effect's call, after the semantic conventions (GenAI
    for model and tool calls, MCP for MCP methods); never the call's arguments."""
    data = spec.effect_input if isinstance(spec.effect_input, Mapping) else {}
    operation = spec.operation
    if spec.effect_class == "model":
        model = str(data.get("model") or "")
        attributes: dict[str, AttributeValue | None] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": str(data.get("provider") or operation),
            "gen_ai.request.model": model or None,
            "gen_ai.request.max_tokens": data.get("maxOutputTokens"),
        }
        if active().capture_content:
            attributes["gen_ai.input.messages"] = canonical_json(data.get("messages") or [])
            if data.get("instructions"):
                attributes["gen_ai.system_instructions"] = str(data["instructions"])
        return f"chat {model}".strip(), attributes
    if operation in ("mcp.call", "mcp.list_tools") or operation.startswith("tool.mcp:"):
        method = "tools/list" if operation == "mcp.list_tools" else "tools/call"
        if operation.startswith("tool.mcp:"):
            server, _, tool = operation[len("tool.mcp:") :].partition("/")
        else:
            server, tool = str(data.get("server") or ""), str(data.get("tool") or "")
        return f"{method} {tool}".strip(), {
            "mcp.method.name": method,
            "gen_ai.tool.name": tool or None,
            "gen_ai.operation.name": "execute_tool" if method == "tools/call" else None,
            "agentctl.mcp.server": server or None,
        }
    if operation.startswith("tool."):
        tool = operation[len("tool.") :]
        return f"execute_tool {tool}", {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
        }
    if operation == "a2a.delegate":
        peer = str(data.get("peer") or "")
        return f"a2a.delegate {peer}".strip(), {"agentctl.a2a.peer": peer or None}
    if spec.effect_class == "process_execution":
        command = str(data.get("command") or "")
        return operation, {
            "process.executable.name": os.path.basename(command) if command else None
        }
    return operation, {}


def _model_response(
    span: Span,
    request: Mapping[str, AttributeValue | None],
    result: Any,
    seconds: float,
) -> None:
    if not isinstance(result, Mapping):
        return
    found = result.get("usage")
    usage: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    finish = result.get("finishReason")
    span.set(
        {
            "gen_ai.response.id": result.get("responseId"),
            "gen_ai.response.finish_reasons": [str(finish)] if finish else None,
            "gen_ai.usage.input_tokens": usage.get("inputTokens"),
            "gen_ai.usage.output_tokens": usage.get("outputTokens"),
        }
    )
    bridge = active()
    if bridge.capture_content and result.get("text") is not None:
        span.set({"gen_ai.output.messages": canonical_json([{"text": result.get("text")}])})
    labels: dict[str, AttributeValue] = {
        key: value
        for key in ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model")
        if isinstance(value := request.get(key), str)
    }
    bridge.record("gen_ai.client.operation.duration", seconds, labels)
    for kind, key in (("input", "inputTokens"), ("output", "outputTokens")):
        count = usage.get(key)
        if isinstance(count, int):
            bridge.record("gen_ai.client.token.usage", count, {**labels, "gen_ai.token.type": kind})


def _model_cost(span: Span, spec: EffectSpec, usage: Any, result: Any) -> None:
    """The priced cost of a dispatched model call (``runtime.pricing``), from the same
    usage function the budget settles with; unpriced models have none."""
    if usage is None or not isinstance(result, Mapping):
        return
    micro = usage(result).get("costMicrousd")
    if micro is None:
        return
    data = spec.effect_input if isinstance(spec.effect_input, Mapping) else {}
    span.set({"agentctl.provider.cost_usd": micro / 1_000_000})
    labels = {
        "gen_ai.provider.name": str(data.get("provider") or spec.operation),
        "gen_ai.request.model": str(data.get("model") or ""),
    }
    active().add("agentctl.provider.cost", micro / 1_000_000, labels)


async def approval_wait(
    approver: Callable[[dict[str, Any]], Awaitable[bool]], request: dict[str, Any]
) -> bool:
    """A decision asked at the terminal, as a span around the wait."""
    bridge = active()
    if not bridge.enabled:
        return await approver(request)
    started = time.monotonic()
    attributes = {
        "agentctl.approval.id": str(request.get("approvalId")),
        "agentctl.effect.operation": str(request.get("operation")),
        "agentctl.effect.risk": str(request.get("risk")),
    }
    with bridge.span(f"approval wait {request.get('operation')}", attributes=attributes) as span:
        allowed = await approver(request)
        status = "approved" if allowed else "rejected"
        span.set({"agentctl.approval.status": status})
    bridge.record(
        "agentctl.approval.wait", time.monotonic() - started, {"agentctl.approval.status": status}
    )
    return allowed


def approval_waited(approval: Approval, operation: str) -> None:
    """A decision that parked the run and came back: a span from request to resolution."""
    bridge = active()
    if not bridge.enabled or approval.resolved_at is None:
        return
    bridge.past_span(
        f"approval wait {operation}",
        start=approval.created_at,
        end=approval.resolved_at,
        attributes={
            "agentctl.approval.id": approval.id,
            "agentctl.approval.status": approval.status,
            "agentctl.approval.resolver": approval.resolver,
            "agentctl.effect.operation": operation,
            "agentctl.effect.risk": approval.risk,
        },
    )
    seconds = (approval.resolved_at - approval.created_at).total_seconds()
    bridge.record(
        "agentctl.approval.wait", max(seconds, 0.0), {"agentctl.approval.status": approval.status}
    )
