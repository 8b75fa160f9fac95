"""The parts a compiled task is made of (docs/compiler.md): what it runs (:class:`TaskUses`),
where an expanded child came from, the router that must select it, its retry and backoff,
its compensation, its named artifacts, and how predictable it is.

Each is a frozen dataclass whose ``to_json`` gives its camelCase wire shape; the task
record that holds them (:class:`~agentctl.compiler.plan.PlanTask`) reads them back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

__all__ = [
    "PREDICTABILITY_RANK",
    "USES_KINDS",
    "BackoffPolicy",
    "Compensation",
    "Expansion",
    "PlanArtifact",
    "Predictability",
    "RetryPolicy",
    "RouteGuard",
    "TaskUses",
    "UsesKind",
    "worst_predictability",
]

Predictability = Literal["fully_predictable", "partially_predictable", "requires_execution"]
UsesKind = Literal[
    "action",
    "agent",
    "aggregate",
    "router",
    "loop_aggregate",
    "subworkflow_input",
    "subworkflow_aggregate",
]

PREDICTABILITY_RANK: dict[str, int] = {
    "fully_predictable": 0,
    "partially_predictable": 1,
    "requires_execution": 2,
}
USES_KINDS = frozenset(get_args(UsesKind))


def worst_predictability(values: list[Predictability]) -> Predictability:
    """The plan's predictability is the worst of its tasks' (an empty plan is predictable)."""
    worst: Predictability = "fully_predictable"
    for value in values:
        if PREDICTABILITY_RANK[value] > PREDICTABILITY_RANK[worst]:
            worst = value
    return worst


@dataclass(frozen=True, slots=True)
class TaskUses:
    """What a task runs: ``kind`` plus a kind-specific ``name`` (string or JSON object).

    ``action``/``agent``: the definition name. ``aggregate``: the list of child ids.
    ``router``: ``{select, cases, default}``. ``loop_aggregate``: ``{children, condition}``.
    ``subworkflow_input``: ``{name, version}``. ``subworkflow_aggregate``:
    ``{name, version, children}``.
    """

    kind: UsesKind
    name: Any

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name}

    @property
    def children(self) -> list[str]:
        """Child task ids of an aggregate of any kind (empty for other kinds)."""
        if self.kind == "aggregate":
            return list(self.name)
        if self.kind in ("loop_aggregate", "subworkflow_aggregate"):
            return list(self.name["children"])
        return []


@dataclass(frozen=True, slots=True)
class Expansion:
    """Where an expanded child came from: source task id, index and its bindings."""

    parent: str
    index: int
    bindings: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"parent": self.parent, "index": self.index, "bindings": dict(self.bindings)}


@dataclass(frozen=True, slots=True)
class RouteGuard:
    """The task runs only if ``router`` selected it (else it is skipped with a route record)."""

    router: str

    def to_json(self) -> dict[str, Any]:
        return {"router": self.router}


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """A fixed or exponential wait before a retried attempt (``retry.backoff``)."""

    kind: Literal["fixed", "exponential"] = "fixed"
    initial_ms: int = 1000
    max_ms: int = 60000
    multiplier: float = 2.0
    jitter: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "initialMs": self.initial_ms,
            "maxMs": self.max_ms,
            "multiplier": self.multiplier,
            "jitter": self.jitter,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BackoffPolicy:
        kind = data.get("kind", "fixed")
        if kind not in ("fixed", "exponential"):
            raise ValueError(f"unknown backoff kind `{kind}`")
        return cls(
            kind,
            int(data.get("initialMs", 1000)),
            int(data.get("maxMs", 60000)),
            float(data.get("multiplier", 2.0)),
            float(data.get("jitter", 0.0)),
        )


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 1
    backoff_ms: int = 0
    backoff: BackoffPolicy | None = None
    # None: every confirmed failure may be retried; else only failures matching an entry.
    retry_on: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"maxAttempts": self.max_attempts, "backoffMs": self.backoff_ms}
        # Only present when declared, so plans (and fingerprints) of workflows that do not
        # use them stay byte-identical.
        if self.backoff is not None:
            out["backoff"] = self.backoff.to_json()
        if self.retry_on is not None:
            out["retryOn"] = list(self.retry_on)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RetryPolicy:
        backoff = data.get("backoff")
        retry_on = data.get("retryOn")
        return cls(
            int(data.get("maxAttempts", 1)),
            int(data.get("backoffMs", 0)),
            None if backoff is None else BackoffPolicy.from_json(backoff),
            None if retry_on is None else tuple(str(entry) for entry in retry_on),
        )


@dataclass(frozen=True, slots=True)
class Compensation:
    """A compiled ``compensate``: the action reference, merged input, retry and timeout."""

    uses: str
    input: Mapping[str, Any]
    retry: RetryPolicy
    timeout_seconds: int

    def to_json(self) -> dict[str, Any]:
        return {
            "uses": self.uses,
            "input": dict(self.input),
            "retry": self.retry.to_json(),
            "timeoutSeconds": self.timeout_seconds,
        }


@dataclass(frozen=True, slots=True)
class PlanArtifact:
    """A declared named artifact: the workspace file ``path`` is version-recorded as ``name``."""

    name: str
    path: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "path": self.path}
