"""The compiler's working records: task drafts and the diagnostic reporter.

A :class:`Draft` is one task on its way to the plan: first as written (or as rewritten by
sub-workflow flattening), then as an expanded child or aggregate. It remembers the document
path of the definition it came from so every later diagnostic points at a line the user can
edit, even for generated tasks (``builds--0003-…`` is reported at ``spec.tasks[0]``).

Drafts share unchanged JSON values (``with``, ``compensate``, ``outputSchema``) with their
source instead of copying them: 10,000 children of one ``foreach`` hold one ``with`` object.
Nothing in the compiler mutates those values after the draft is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from agentctl.compiler.task_parts import Expansion, TaskUses
from agentctl.diagnostics import Diagnostic, Severity
from agentctl.spec.models_tasks import Task
from agentctl.spec.source_map import SourceMap, diagnostic_at, join_path

__all__ = ["Draft", "Reporter", "draft_from_json", "join_path", "sub_path"]


@dataclass(slots=True)
class Draft:
    """A task between the document and the plan (see module docstring)."""

    id: str
    path: str
    uses: str
    needs: list[str]
    with_: Mapping[str, Any]
    vars: Mapping[str, Any]
    when: str | None = None
    memory_writes: list[str] | None = None
    retry: Mapping[str, Any] = field(default_factory=dict)
    timeout_seconds: int | None = None
    failure: str = "stop"
    compensate: Mapping[str, Any] | None = None
    output_schema: Mapping[str, Any] | None = None
    artifacts: list[Mapping[str, Any]] | None = None
    """Declared named artifacts (``[{name, path}]``), as written."""
    session: Mapping[str, Any] | None = None
    """An agent task's ``session`` (``{from: {run, task}}`` or ``{name}``), as written."""
    foreach: Mapping[str, Any] | None = None
    matrix: Mapping[str, Any] | None = None
    loop: Mapping[str, Any] | None = None
    route: Mapping[str, Any] | None = None
    synthetic: TaskUses | None = None
    """Set for generated tasks whose ``uses`` is not a definition (aggregates, boundaries)."""
    expansion: Expansion | None = None
    source_needs: tuple[str, ...] = ()
    """For aggregates: the needs the source task declared (router destination check)."""
    guard_targets: tuple[str, ...] = ()
    """For aggregates and sub-workflow outputs: tasks that share its route guards."""
    binding_path: str | None = None
    """Where an expanded child's bindings come from (``spec.tasks[0].foreach``)."""
    with_path: str | None = None
    """Where ``with_`` was written, when not ``<path>.with`` (sub-workflow outputs map)."""

    def definition_json(self) -> dict[str, Any]:
        """The task as a document task (camelCase), for the flattened workflow digest."""
        out: dict[str, Any] = {"id": self.id, "uses": self.uses, "needs": list(self.needs)}
        optional: dict[str, Any] = {
            "with": dict(self.with_) if self.with_ else None,
            "vars": dict(self.vars) if self.vars else None,
            "when": self.when,
            "memoryWrites": self.memory_writes,
            "retry": dict(self.retry) if self.retry else None,
            "timeoutSeconds": self.timeout_seconds,
            "failure": None if self.failure == "stop" else self.failure,
            "compensate": self.compensate,
            "outputSchema": self.output_schema,
            "artifacts": self.artifacts,
            "session": self.session,
            "foreach": self.foreach,
            "matrix": self.matrix,
            "loop": self.loop,
            "route": self.route,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        if self.synthetic is not None:
            out["synthetic"] = self.synthetic.to_json()
        return out

    def copy(self, **changes: Any) -> Draft:
        return replace(self, **changes)


def sub_path(base: str, *segments: str | int) -> str:
    """``base`` extended by map keys / list indexes (keys quoted when not plain words)."""
    path = base
    for segment in segments:
        path = join_path(path, segment)
    return path


def draft_from_json(task: Mapping[str, Any], path: str) -> Draft:
    """A draft from one dumped document task (keys as written, camelCase)."""
    return Draft(
        id=str(task["id"]),
        path=path,
        uses=str(task["uses"]),
        needs=list(task.get("needs") or ()),
        with_=task.get("with") or {},
        vars=task.get("vars") or {},
        when=task.get("when"),
        memory_writes=None if task.get("memoryWrites") is None else list(task["memoryWrites"]),
        retry=task.get("retry") or {},
        timeout_seconds=task.get("timeoutSeconds"),
        failure=str(task.get("failure") or Task.default_of("failure")),
        compensate=task.get("compensate"),
        output_schema=task.get("outputSchema"),
        artifacts=None if task.get("artifacts") is None else list(task["artifacts"]),
        session=task.get("session"),
        foreach=task.get("foreach"),
        matrix=task.get("matrix"),
        loop=task.get("loop"),
        route=task.get("route"),
    )


class Reporter:
    """Collects diagnostics, locating each one through the document's source map."""

    def __init__(self, source: SourceMap | None) -> None:
        self.source = source
        self.diagnostics: list[Diagnostic] = []
        self.errors = 0

    def report(
        self,
        code: str,
        message: str,
        path: str | None,
        help: str | None = None,
        severity: Severity = "error",
    ) -> None:
        self.diagnostics.append(diagnostic_at(code, message, path, self.source, help, severity))
        if severity == "error":
            self.errors += 1

    def error(self, code: str, message: str, path: str | None, help: str | None = None) -> None:
        self.report(code, message, path, help)

    def warning(self, code: str, message: str, path: str | None, help: str | None = None) -> None:
        self.report(code, message, path, help, "warning")
