"""Tasks (docs/workflow-language.md): what each entry of ``spec.tasks`` may say.

Only per-task facts live here (field bounds, shapes, mutually exclusive constructs).
Anything that needs the rest of the document — does the action exist, does a destination
list the router in its ``needs``, which kinds accept ``memoryWrites`` — is the compiler's.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from agentctl.digest import canonical_json
from agentctl.spec.models_common import (
    Identifier,
    JsonObject,
    JsonSchema,
    Retry,
    SpecModel,
    TimeoutSeconds,
    VarsFilePath,
)

__all__ = [
    "SUBWORKFLOW_INVOCATION_FIELDS",
    "Compensate",
    "Foreach",
    "Loop",
    "Matrix",
    "NamedArtifact",
    "Route",
    "RouteCase",
    "Session",
    "SessionSource",
    "Task",
    "UsesKind",
    "UsesRef",
    "parse_uses",
]

UsesKind = Literal["action", "agent", "workflow", "router"]

SUBWORKFLOW_INVOCATION_FIELDS = frozenset({"id", "uses", "needs", "with_", "failure"})
"""The only fields a ``uses: workflow:<name>`` task may set (docs/workflow-language.md)."""


@dataclass(frozen=True, slots=True)
class UsesRef:
    """A parsed ``uses`` value: ``action:x`` -> ``UsesRef("action", "x")``; router has no name."""

    kind: UsesKind
    name: str | None


def parse_uses(value: str) -> UsesRef:
    """Parse a ``uses`` string; raises ``ValueError`` with a user-facing message."""
    if value == "router":
        return UsesRef("router", None)
    prefix, sep, name = value.partition(":")
    if sep and prefix in ("action", "agent", "workflow") and name:
        return UsesRef(prefix, name)  # type: ignore[arg-type]
    if prefix == "team" and sep:
        raise ValueError("`team:` references are not supported; use an agent or a sub-workflow")
    raise ValueError(
        f"`uses: {value}` must be `action:<name>`, `agent:<name>`, `workflow:<name>` or `router`"
    )


def _json_key(value: Any) -> str:
    """Type-sensitive identity of a JSON value (``1``, ``1.0``, ``true``, ``"1"`` all differ)."""
    try:
        return canonical_json(value)
    except (TypeError, ValueError):
        return repr(value)


class Foreach(SpecModel):
    """Fan a task out over a literal list (docs/workflow-language.md)."""

    items: list[Any]
    as_: Identifier = Field(default="item", alias="as")
    # The item count and the 256 hard cap are checked by the compiler, whose
    # CompileSettings can raise them (the compile benchmark does).
    max_items: int = Field(default=32, ge=1)


class Matrix(SpecModel):
    """Fan a task out over the product of named axes (docs/workflow-language.md)."""

    axes: dict[Identifier, list[Any]] = Field(min_length=1)
    # The combination count and the 256 hard cap are checked by the compiler (settings).
    max_items: int = Field(default=32, ge=1)


class RouteCase(SpecModel):
    """One router case: JSON-equal ``select`` value -> destination tasks."""

    equals: Any
    tasks: list[str] = Field(min_length=1)


class Route(SpecModel):
    """Router selection (docs/workflow-language.md); only with ``uses: router``."""

    select: str
    cases: list[RouteCase] = Field(min_length=1)
    default: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _distinct_cases_and_destinations(self) -> Route:
        seen_equals: set[str] = set()
        for case in self.cases:
            key = _json_key(case.equals)
            if key in seen_equals:
                raise ValueError(f"two route cases have the same `equals` value {key}")
            seen_equals.add(key)
        seen: set[str] = set()
        for dest in self.destinations():
            if dest in seen:
                raise ValueError(f"route destination `{dest}` is listed more than once")
            seen.add(dest)
        return self

    def destinations(self) -> list[str]:
        """Every destination, cases first in order, then ``default``."""
        return [t for case in self.cases for t in case.tasks] + list(self.default)


class Loop(SpecModel):
    """A bounded loop compiled into sequential iterations (docs/workflow-language.md)."""

    max_iterations: int = Field(ge=1, le=64)
    while_: str = Field(alias="while")
    initial: Any = None


class Compensate(SpecModel):
    """The inverse action of a mutating task (docs/durable-execution.md)."""

    uses: str
    with_: JsonObject = Field(default_factory=dict, alias="with")
    retry: Retry = Field(default_factory=Retry)
    timeout_seconds: TimeoutSeconds | None = None


class NamedArtifact(SpecModel):
    """One ``artifacts`` entry: the file at ``path`` (relative to the workspace root) is
    recorded as a new version of the artifact ``name`` each time the task succeeds."""

    name: Identifier
    path: str

    @field_validator("path")
    @classmethod
    def _relative_path(cls, value: str) -> str:
        if not value or value != value.strip():
            raise ValueError("an artifact path must be a non-empty path without surrounding spaces")
        if "\\" in value or "\0" in value:
            raise ValueError(f"artifact path `{value}` must use `/` separators")
        if value.startswith("/") or posixpath.isabs(value):
            raise ValueError(
                f"artifact path `{value}` must be relative to the workspace root, not absolute"
            )
        parts = value.split("/")
        if ".." in parts:
            raise ValueError(f"artifact path `{value}` must not contain `..`")
        if all(part in ("", ".") for part in parts) or value.endswith("/"):
            raise ValueError(f"artifact path `{value}` must name a file, not a folder")
        return value


class SessionSource(SpecModel):
    """``session.from``: the task of an earlier run whose session to continue."""

    run: str = Field(min_length=1)
    task: str = Field(min_length=1)

    @field_validator("run")
    @classmethod
    def _run_shape(cls, value: str) -> str:
        if value != "latest" and not value.startswith("run-"):
            raise ValueError(f"`{value}` is not a run id (run-…) or `latest`")
        return value


class Session(SpecModel):
    """An agent task's ``session``: continue an earlier provider session (transcript and
    provider continuation) instead of starting a new conversation."""

    from_: SessionSource | None = Field(default=None, alias="from")
    name: Identifier | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Session:
        if (self.from_ is None) == (self.name is None):
            raise ValueError(
                "a session is either `from: {run: RUN|latest, task: ID}` or `name: NAME`"
            )
        return self


class Task(SpecModel):
    """One entry of ``spec.tasks`` (or of a sub-workflow's ``tasks``)."""

    id: Identifier
    uses: str
    needs: list[str] = Field(default_factory=list)
    foreach: Foreach | None = None
    matrix: Matrix | None = None
    route: Route | None = None
    loop: Loop | None = None
    memory_writes: list[str] | None = None
    when: str | None = None
    vars: JsonObject = Field(default_factory=dict)
    vars_files: list[VarsFilePath] = Field(default_factory=list)
    with_: JsonObject = Field(default_factory=dict, alias="with")
    retry: Retry = Field(default_factory=Retry)
    timeout_seconds: TimeoutSeconds | None = None
    failure: Literal["stop", "continue"] = "stop"
    compensate: Compensate | None = None
    output_schema: JsonSchema | None = None
    artifacts: list[NamedArtifact] | None = None
    session: Session | None = None

    @field_validator("uses")
    @classmethod
    def _uses_shape(cls, value: str) -> str:
        parse_uses(value)
        return value

    @field_validator("memory_writes")
    @classmethod
    def _memory_keys(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            if any(not key for key in value):
                raise ValueError("memoryWrites keys must be non-empty")
            if len(set(value)) != len(value):
                raise ValueError("memoryWrites keys must be unique")
        return value

    @field_validator("artifacts")
    @classmethod
    def _distinct_artifacts(cls, value: list[NamedArtifact] | None) -> list[NamedArtifact] | None:
        if value is not None:
            for what, keys in (
                ("name", [a.name for a in value]),
                ("path", [posixpath.normpath(a.path) for a in value]),
            ):
                twice = sorted({key for key in keys if keys.count(key) > 1})
                if twice:
                    raise ValueError(f"artifacts: {what} `{twice[0]}` is declared more than once")
        return value

    @model_validator(mode="after")
    def _construct_rules(self) -> Task:
        ref = parse_uses(self.uses)
        if self.artifacts and ref.kind == "router":
            raise ValueError("a router writes no files; remove `artifacts`")
        if self.session is not None and ref.kind != "agent":
            raise ValueError("only an agent task (`uses: agent:<name>`) has a session")
        if self.foreach is not None and self.matrix is not None:
            raise ValueError("`foreach` and `matrix` cannot be used together")
        if ref.kind == "router":
            if self.route is None:
                raise ValueError("a `uses: router` task requires `route`")
            for name in ("foreach", "matrix", "loop"):
                if getattr(self, name) is not None:
                    raise ValueError(f"a router cannot use `{name}`")
        elif self.route is not None:
            raise ValueError("`route` is only allowed with `uses: router`")
        if self.loop is not None:
            for name in ("when", "foreach", "matrix"):
                if getattr(self, name) is not None:
                    raise ValueError(f"a loop task cannot also have `{name}`")
        if ref.kind == "workflow":
            extra = sorted(
                _camel(name)
                for name in self.model_fields_set - SUBWORKFLOW_INVOCATION_FIELDS
                if name != "retry" or self.retry != Retry()
            )
            if extra:
                raise ValueError(
                    "a sub-workflow invocation accepts only id, uses, needs, with and "
                    f"failure; remove {', '.join(extra)}"
                )
        return self

    @property
    def uses_ref(self) -> UsesRef:
        """The parsed ``uses`` reference."""
        return parse_uses(self.uses)


def _camel(field_name: str) -> str:
    info = Task.model_fields[field_name]
    return info.alias or field_name
