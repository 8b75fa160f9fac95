"""Define workflows in Python: a small typed builder that yields the same model as YAML.

    from agentctl.spec.python_api import WorkflowBuilder, foreach, task

    workflow = (
        WorkflowBuilder("greet")
        .action("set", "builtin.assign")
        .task(
            "hello",
            uses="action:set",
            foreach=foreach(["ada", "grace"], as_="name"),
            with_={"greeting": "hello, ${{ vars.name }}"},
        )
    )

Keyword arguments use the model's snake_case names (``with_``, ``max_items``,
``memory_writes`` …) and become the format's camelCase keys. Nothing is validated until
:meth:`WorkflowBuilder.build` (or the loader) validates the whole document at once, so
problems are reported with the same document paths as for YAML —
``spec.tasks[2].loop.maxIterations`` — and, when the builder call sits in the file being
loaded, with that call's line.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import re
import sys
import textwrap
import typing
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from pydantic import BaseModel

from agentctl.errors import ValidationError
from agentctl.spec.document import API_VERSION, KIND, Metadata, Spec, Workflow
from agentctl.spec.model_errors import unwrap_annotation
from agentctl.spec.models_common import SpecModel
from agentctl.spec.models_definitions import (
    A2APeer,
    Action,
    Agent,
    McpServer,
    Provider,
    Subworkflow,
    Tool,
)
from agentctl.spec.models_policy import Compensation, Policy
from agentctl.spec.models_runtime import Memory, OutputSettings, PythonSettings, Runtime
from agentctl.spec.models_tasks import Compensate, Foreach, Loop, Matrix, Route, RouteCase, Task
from agentctl.spec.source_map import SourceMap, join_path
from agentctl.spec.validate import validate_document

__all__ = [
    "Document",
    "WorkflowBuilder",
    "case",
    "compensate",
    "duration_seconds",
    "env",
    "foreach",
    "loop",
    "matrix",
    "retry",
    "route",
    "task",
]

Document = dict[str, Any]
"""A document fragment in the format's own (camelCase) shape."""

Duration = int | float | timedelta | str
"""A duration as people write it in Python: seconds, a ``timedelta``, or ``"90s"``,
``"5m"``, ``"2h"``, ``"1d"``, ``"250ms"`` (also combined: ``"1m30s"``)."""

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}

StepFunction = TypeVar("StepFunction", bound=Callable[..., Any])

STEP_MARK = "__agentctl_step__"
"""The attribute ``@workflow.step`` sets on the function it declares."""


def duration_seconds(value: Any, *, unit: float = 1.0) -> Any:
    """``value`` as a number of ``unit`` (1 = seconds, 0.001 = milliseconds) when it is a
    :data:`Duration`; anything else is returned as given, so validation reports it at its
    document path (YAML stays strict: only the builder converts)."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, str):
        text = value.strip().replace(" ", "")
        parts = _DURATION_PART.findall(text)
        if not text or "".join(n + u for n, u in parts) != text:
            raise ValueError(
                f"duration {value!r} is not a number of seconds, a timedelta or text such as "
                '"90s", "5m", "2h", "1m30s"'
            )
        seconds = sum(float(number) * _UNIT_SECONDS[u] for number, u in parts)
    else:
        return value
    amount = seconds / unit
    return int(amount) if amount == int(amount) else amount


def _timeout(value: Any) -> Any:
    return None if value is None else duration_seconds(value)


def to_wire(model: type[BaseModel], options: Mapping[str, Any]) -> Document:
    """Rename snake_case keys of ``model``'s fields to their aliases, recursing into
    nested model fields; unknown keys are kept so validation reports them by name."""
    out: Document = {}
    for key, value in options.items():
        info = model.model_fields.get(key)
        wire_key = (info.alias or key) if info is not None else key
        out[wire_key] = _value_to_wire(info.annotation if info else None, value)
    return out


def _value_to_wire(annotation: Any, value: Any) -> Any:
    if isinstance(value, SpecModel):
        return value.model_dump(by_alias=True, exclude_unset=True)
    core, _ = unwrap_annotation(annotation)
    origin = typing.get_origin(core)
    if isinstance(core, type) and issubclass(core, BaseModel) and isinstance(value, Mapping):
        return to_wire(core, value)
    if origin is list and isinstance(value, Sequence) and not isinstance(value, str):
        return [_value_to_wire(typing.get_args(core)[0], item) for item in value]
    if origin is dict and isinstance(value, Mapping):
        item_type = typing.get_args(core)[1]
        return {key: _value_to_wire(item_type, item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [_value_to_wire(None, item) for item in value]
    return value


def _fields(model: type[BaseModel], **values: Any) -> Document:
    """Wire form of the given fields, leaving out the ones not given (``None``)."""
    return to_wire(model, {k: v for k, v in values.items() if v is not None})


def _as_list(values: Sequence[Any]) -> Any:
    """A list of ``values``; a string is left whole so validation reports "must be a list"
    instead of silently iterating over its characters."""
    return values if isinstance(values, str) else list(values)


# --- constructs ---------------------------------------------------------------------------


def foreach(
    items: Sequence[Any], *, as_: str | None = None, max_items: int | None = None
) -> Document:
    """``foreach``: one child per literal item, bound as ``vars.<as_>`` (default ``item``)."""
    return _fields(Foreach, items=_as_list(items), as_=as_, max_items=max_items)


def matrix(axes: Mapping[str, Sequence[Any]], *, max_items: int | None = None) -> Document:
    """``matrix``: one child per combination of axis values, bound as ``vars.matrix``."""
    return _fields(Matrix, axes={k: _as_list(v) for k, v in axes.items()}, max_items=max_items)


_NO_INITIAL: Any = object()


def loop(max_iterations: int, while_: str, *, initial: Any = _NO_INITIAL) -> Document:
    """``loop``: up to ``max_iterations`` runs while the ``while_`` condition holds."""
    body = _fields(Loop, max_iterations=max_iterations, while_=while_)
    if initial is not _NO_INITIAL:
        body["initial"] = initial
    return body


def case(equals: Any, *tasks: str) -> Document:
    """One router case: when ``select`` equals ``equals`` (JSON equality), run ``tasks``."""
    return to_wire(RouteCase, {"equals": equals, "tasks": list(tasks)})


def route(select: str, *cases: Document, default: Sequence[str] | None = None) -> Document:
    """``route`` of a ``uses="router"`` task."""
    body = _fields(Route, select=select, cases=list(cases))
    if default is not None:
        body["default"] = list(default)
    return body


def retry(
    max_attempts: int,
    backoff_ms: int | Duration | None = None,
    *,
    backoff: Mapping[str, Any] | None = None,
    retry_on: Sequence[str] | None = None,
) -> Document:
    """A retry policy: total attempts and the wait between them (a fixed ``backoff_ms`` —
    milliseconds, or a :data:`Duration` such as ``"5s"`` —, or
    ``backoff={"kind": "exponential", "initialMs": 500}``); ``retry_on`` narrows what is
    retried (error codes, ``provider.*``, ``transient``, ``timeout``)."""
    return {
        "maxAttempts": max_attempts,
        **({} if backoff_ms is None else {"backoffMs": duration_seconds(backoff_ms, unit=0.001)}),
        **({} if backoff is None else {"backoff": dict(backoff)}),
        **({} if retry_on is None else {"retryOn": list(retry_on)}),
    }


def compensate(
    uses: str,
    *,
    with_: Mapping[str, Any] | None = None,
    retry: Document | None = None,
    timeout_seconds: Duration | None = None,
) -> Document:
    """The inverse action of a mutating task."""
    return _fields(
        Compensate,
        uses=uses,
        with_=dict(with_) if with_ is not None else None,
        retry=retry,
        timeout_seconds=_timeout(timeout_seconds),
    )


def env(name: str) -> Document:
    """A secret reference to an environment variable: ``{env: NAME}``."""
    return {"env": name}


def task(
    id: str,
    *,
    uses: str,
    needs: Sequence[str] = (),
    with_: Mapping[str, Any] | None = None,
    when: str | None = None,
    vars: Mapping[str, Any] | None = None,
    foreach: Document | None = None,
    matrix: Document | None = None,
    loop: Document | None = None,
    route: Document | None = None,
    memory_writes: Sequence[str] | None = None,
    retry: Document | None = None,
    timeout_seconds: Duration | None = None,
    failure: str | None = None,
    compensate: Document | None = None,
    output_schema: Mapping[str, Any] | None = None,
    artifacts: Sequence[Mapping[str, str]] | None = None,
    session: Mapping[str, Any] | None = None,
) -> Document:
    """One task, for :meth:`WorkflowBuilder.task` or a sub-workflow's ``tasks``.

    ``artifacts=[{"name": "report", "path": "out/report.md"}]`` declares named artifacts;
    ``session={"name": "reviewer-main"}`` (agent tasks) continues an earlier session."""
    return _fields(
        Task,
        id=id,
        uses=uses,
        needs=list(needs) or None,
        foreach=foreach,
        matrix=matrix,
        route=route,
        loop=loop,
        memory_writes=list(memory_writes) if memory_writes is not None else None,
        when=when,
        vars=dict(vars) if vars is not None else None,
        with_=dict(with_) if with_ is not None else None,
        retry=retry,
        timeout_seconds=_timeout(timeout_seconds),
        failure=failure,
        compensate=compensate,
        output_schema=dict(output_schema) if output_schema is not None else None,
        artifacts=[dict(a) for a in artifacts] if artifacts is not None else None,
        session=dict(session) if session is not None else None,
    )


# --- the builder --------------------------------------------------------------------------


def _caller() -> tuple[str, int]:
    """File and line of the first frame outside this module (the user's call)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    return frame.f_code.co_filename, frame.f_lineno


class WorkflowBuilder:
    """Accumulates a workflow document; :meth:`build` validates it into a :class:`Workflow`.

    Every method returns the builder, so calls chain. Map-valued sections (providers,
    agents, actions …) are keyed by name; declaring a name twice replaces the first.
    """

    def __init__(
        self,
        name: str,
        *,
        description: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self._metadata = _fields(
            Metadata, name=name, description=description, labels=dict(labels) if labels else None
        )
        self._spec: Document = {}
        self._calls: dict[str, tuple[str, int]] = {"": _caller(), "metadata": _caller()}

    # sections keyed by name ----------------------------------------------------------------

    def _put(self, section: str, name: str, body: Any) -> WorkflowBuilder:
        self._spec.setdefault(section, {})[name] = body
        self._calls[join_path(join_path("spec", section), name)] = _caller()
        return self

    def input(self, name: str, default: Any) -> WorkflowBuilder:
        """Declare run input ``name`` with its default value (``spec.inputs``)."""
        return self._put("inputs", name, default)

    def output(self, name: str, template: Any) -> WorkflowBuilder:
        """Declare run output ``name``, usually a template (``spec.outputs``)."""
        return self._put("outputs", name, template)

    def provider(self, name: str, kind: str, **options: Any) -> WorkflowBuilder:
        """A model provider; options: ``endpoint``, ``credential``, ``api_version``, ``headers``."""
        return self._put("providers", name, to_wire(Provider, {"kind": kind, **options}))

    def agent(self, name: str, *, provider: str, model: str, **options: Any) -> WorkflowBuilder:
        """An agent; options are :class:`~agentctl.spec.Agent` fields (``instructions``,
        ``tools``, ``max_turns``, ``structured_output``, ``provider_options`` …)."""
        body = to_wire(Agent, {"provider": provider, "model": model, **options})
        return self._put("agents", name, body)

    def action(
        self, name: str, kind: str, *, with_: Mapping[str, Any] | None = None, **options: Any
    ) -> WorkflowBuilder:
        """A named action of built-in ``kind``; options are ``Action`` fields
        (``timeout_seconds`` may be a :data:`Duration`)."""
        if "timeout_seconds" in options:
            options["timeout_seconds"] = _timeout(options["timeout_seconds"])
        fields = {"kind": kind, **({"with_": dict(with_)} if with_ is not None else {}), **options}
        return self._put("actions", name, to_wire(Action, fields))

    def tool(self, name: str, kind: str, **options: Any) -> WorkflowBuilder:
        """A model-callable tool; options are :class:`~agentctl.spec.Tool` fields."""
        return self._put("tools", name, to_wire(Tool, {"kind": kind, **options}))

    def subworkflow(
        self,
        name: str,
        *,
        version: str,
        input_schema: Mapping[str, Any],
        output_schema: Mapping[str, Any],
        tasks: Sequence[Document],
        inputs: Mapping[str, Any] | None = None,
        outputs: Mapping[str, Any] | None = None,
    ) -> WorkflowBuilder:
        """A reusable sub-workflow, invoked with ``uses="workflow:<name>"``."""
        body = _fields(
            Subworkflow,
            version=version,
            inputs=dict(inputs) if inputs is not None else None,
            input_schema=dict(input_schema),
            outputs=dict(outputs) if outputs is not None else None,
            output_schema=dict(output_schema),
            tasks=[dict(t) for t in tasks],
        )
        return self._put("subworkflows", name, body)

    def mcp_server(self, name: str, url: str, **options: Any) -> WorkflowBuilder:
        """An MCP server for ``mcp.call`` actions."""
        return self._put("mcpServers", name, to_wire(McpServer, {"url": url, **options}))

    def a2a_peer(self, name: str, card_url: str, **options: Any) -> WorkflowBuilder:
        """An A2A peer for ``a2a.delegate`` actions."""
        return self._put("a2aPeers", name, to_wire(A2APeer, {"card_url": card_url, **options}))

    # single-object sections ----------------------------------------------------------------

    def _set(
        self, section: str, model: type[BaseModel], options: Mapping[str, Any]
    ) -> WorkflowBuilder:
        self._spec[section] = to_wire(model, options)
        self._calls[join_path("spec", section)] = _caller()
        return self

    def policy(self, **options: Any) -> WorkflowBuilder:
        """``spec.policy``; options are :class:`~agentctl.spec.Policy` fields."""
        return self._set("policy", Policy, options)

    def runtime(self, **options: Any) -> WorkflowBuilder:
        """``spec.runtime``: ``max_concurrency``, ``default_timeout_seconds``, ``budgets`` …"""
        return self._set("runtime", Runtime, options)

    def python(self, **options: Any) -> WorkflowBuilder:
        """``spec.python``: ``path``, the folders function steps import from besides the
        workflow's own (docs/python-steps.md)."""
        return self._set("python", PythonSettings, options)

    def memory(self, **options: Any) -> WorkflowBuilder:
        """``spec.memory``: ``working`` (initial working memory) and ``long_term``."""
        return self._set("memory", Memory, options)

    def compensation(self, **options: Any) -> WorkflowBuilder:
        """``spec.compensation``: ``on_failure`` and ``approval``."""
        return self._set("compensation", Compensation, options)

    def output_settings(self, **options: Any) -> WorkflowBuilder:
        """``spec.output``: ``verbose`` and ``show_diff``."""
        return self._set("output", OutputSettings, options)

    # tasks -------------------------------------------------------------------------------

    def task(self, id: str, *, uses: str, **options: Any) -> WorkflowBuilder:
        """Append a task; keyword arguments are those of the module-level :func:`task`."""
        tasks = self._spec.setdefault("tasks", [])
        self._calls[join_path(join_path("spec", "tasks"), len(tasks))] = _caller()
        tasks.append(task(id, uses=uses, **options))
        return self

    def step(
        self,
        id: str | None = None,
        *,
        needs: Sequence[str] = (),
        retry: Document | int | None = None,
        timeout: Duration | None = None,
        with_: Mapping[str, Any] | None = None,
        idempotency: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        python: str | None = None,
        **options: Any,
    ) -> Callable[[StepFunction], StepFunction]:
        """Declare a step from a function (docs/python-steps.md)::

            @workflow.step(needs=["build"], retry=3, timeout="5m")
            def deploy(ctx, inputs):
                ctx.shell("make", ["deploy"])
                return {"deployed": True}

        It compiles to a ``python.function`` action named like the step and a task that
        uses it, so ``check``, ``plan`` and the dashboard see it like any other. The
        function's source digest is part of the task's fingerprint: changed code makes
        ``repair`` re-run the step and what depends on it. Other keyword arguments are
        task fields (``when``, ``foreach``, ``memory_writes`` …) or, for ``isolation``,
        ``sandbox``, ``container``, ``env`` and the output limits, action fields. The
        function is returned unchanged.
        """
        origin = _caller()

        def declare(function: StepFunction) -> StepFunction:
            name = id or function.__name__.replace("_", "-")
            action_fields: dict[str, Any] = {
                key: options.pop(key)
                for key in (
                    "isolation",
                    "sandbox",
                    "container",
                    "env",
                    "stderr_limit_bytes",
                    "stdout_limit_bytes",
                    "combined_output_limit_bytes",
                )
                if key in options
            }
            action_options: dict[str, Any] = {
                "function": _function_reference(function, origin[0]),
                "source_digest": _source_digest(function),
                "idempotency": idempotency,
                "input_schema": dict(input_schema) if input_schema is not None else None,
                "output_schema": dict(output_schema) if output_schema is not None else None,
                "python": python,
                **action_fields,
            }
            self._put(
                "actions",
                name,
                to_wire(
                    Action,
                    {
                        "kind": "python.function",
                        **{k: v for k, v in action_options.items() if v is not None},
                    },
                ),
            )
            self._calls[join_path(join_path("spec", "actions"), name)] = origin
            tasks = self._spec.setdefault("tasks", [])
            self._calls[join_path(join_path("spec", "tasks"), len(tasks))] = origin
            policy = {"maxAttempts": retry} if isinstance(retry, int) else retry
            tasks.append(
                task(
                    name,
                    uses=f"action:{name}",
                    needs=needs,
                    with_=with_,
                    retry=policy,
                    timeout_seconds=timeout,
                    **options,
                )
            )
            with contextlib.suppress(AttributeError, TypeError):
                setattr(function, STEP_MARK, True)
            return function

        return declare

    def add_task(self, body: Document) -> WorkflowBuilder:
        """Append a task made with the module-level :func:`task`."""
        tasks = self._spec.setdefault("tasks", [])
        self._calls[join_path(join_path("spec", "tasks"), len(tasks))] = _caller()
        tasks.append(dict(body))
        return self

    # results -----------------------------------------------------------------------------

    def to_document(self) -> Document:
        """The document as a YAML file would hold it (camelCase keys)."""
        ordered = {k: self._spec[k] for k in _SPEC_ORDER if k in self._spec}
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": dict(self._metadata),
            "spec": ordered,
        }

    def source_map(self, file: str) -> SourceMap:
        """Builder calls made from ``file``, as a source map of that file."""
        target = os.path.realpath(file)
        positions = {
            path: (line, 1)
            for path, (origin, line) in self._calls.items()
            if os.path.realpath(origin) == target
        }
        return SourceMap(file, positions)

    def build(self, file: str | None = None) -> Workflow:
        """Validate into a :class:`Workflow`; raises :class:`agentctl.errors.ValidationError`
        carrying located diagnostics when the document is invalid."""
        origin = file or self._calls[""][0]
        document, diagnostics = validate_document(self.to_document(), self.source_map(origin))
        if document is None:
            first = diagnostics[0].message if diagnostics else "invalid workflow"
            raise ValidationError(
                f"workflow `{self._metadata.get('name')}` is invalid: {first}",
                diagnostics=diagnostics,
            )
        return document


def _function_reference(function: Callable[..., Any], workflow_file: str) -> str:
    """``file.py:qualname`` for a function in a file under the workflow's folder (the
    definition file itself, usually), else ``module:qualname``."""
    qualname = function.__qualname__
    if "<locals>" in qualname:
        raise ValueError(
            f"step function {qualname} is defined inside another function; a step must be "
            "a module-level function so its process can import it"
        )
    source = inspect.getsourcefile(function)
    folder = os.path.dirname(os.path.realpath(workflow_file))
    if source is not None:
        real = os.path.realpath(source)
        if real.startswith(folder + os.sep):
            return f"{os.path.relpath(real, folder)}:{qualname}"
    return f"{function.__module__}:{qualname}"


def _source_digest(function: Callable[..., Any]) -> str:
    """The digest of the function's source text (its fingerprint's share)."""
    try:
        text = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        text = function.__qualname__
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


_SPEC_ORDER = [info.alias or name for name, info in Spec.model_fields.items()]
