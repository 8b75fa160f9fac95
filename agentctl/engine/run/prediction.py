"""Check mode (``roll --check``): what cannot be predicted spreads instead of failing.

In a prediction run, shells, extensions, protocol calls, long-term memory operations and
agents do not execute: they return placeholders whose ``status`` is ``requires_execution``.
A task that reads such a placeholder's fields (``tasks.review.output.verdict``) cannot be
rendered, and that is not the workflow's fault. So, in check mode only, a template error
in a task whose dependencies (direct or not) include an unpredicted task makes the task
itself unpredicted — a placeholder naming that dependency — and a run output that cannot
be rendered for the same reason becomes a placeholder too. A template error with no
unpredicted dependency behind it still fails the task: it is a real mistake.

Named artifacts are recorded only when a task really executes, so in check mode a read of
``tasks.<id>.artifacts.<name>`` is unpredicted the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentctl.compiler.plan import Plan
from agentctl.spec.expressions import parse_expression
from agentctl.spec.template_exceptions import TemplateError, UndefinedValueError

__all__ = ["Prediction", "is_placeholder"]


def is_placeholder(output: Any) -> bool:
    return isinstance(output, Mapping) and output.get("status") == "requires_execution"


class Prediction:
    """The unpredicted tasks of one check-mode run, and the placeholders they cause."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.unpredicted: set[str] = set()
        self._ancestors: dict[str, frozenset[str]] = {}

    def observe(self, task_id: str, output: Any) -> None:
        """Note a committed output: a placeholder marks its task unpredicted."""
        if is_placeholder(output):
            self.unpredicted.add(task_id)

    def _ancestors_of(self, task_id: str) -> frozenset[str]:
        found = self._ancestors.get(task_id)
        if found is None:
            out: set[str] = set()
            for need in self.plan.tasks[task_id].needs:
                out.add(need)
                out |= self._ancestors_of(need)
            found = self._ancestors[task_id] = frozenset(out)
        return found

    def blocking_dependency(self, task_id: str) -> str | None:
        """The first unpredicted task (in plan order) this task depends on, if any."""
        if not self.unpredicted:
            return None
        ancestors = self._ancestors_of(task_id)
        return next((t for t in self.plan.order if t in ancestors and t in self.unpredicted), None)

    def placeholder(self, task_id: str, error: TemplateError) -> dict[str, Any] | None:
        """The output of a task that cannot be rendered because of an unpredicted
        dependency, or None when the template error is the task's own."""
        blocking = self.blocking_dependency(task_id)
        if blocking is None:
            blocking = self._unrecorded_artifact(error)
            if blocking is None:
                return None
        return {
            "status": "requires_execution",
            "changed": False,
            "predictability": "requires_execution",
            "reason": f"depends on {blocking}, which requires execution ({error})",
        }

    def _unrecorded_artifact(self, error: TemplateError) -> str | None:
        """The task whose named artifact the failed template read (none is recorded in
        check mode), or None for any other error."""
        if not isinstance(error, UndefinedValueError) or not error.expression:
            return None
        try:
            path = parse_expression(error.expression.removeprefix("not ").strip()).path
        except TemplateError:
            return None
        if len(path) > 3 and path[0] == "tasks" and path[2] == "artifacts":
            declaring = self.plan.tasks.get(path[1])
            if declaring is not None and any(a.name == path[3] for a in declaring.artifacts):
                return path[1]
        return None

    def render_outputs(
        self, declared: Mapping[str, Any], render_one: Callable[[Any], Any]
    ) -> dict[str, Any]:
        """``spec.outputs`` key by key; a key that reads an unpredicted output becomes a
        placeholder. Any other template error propagates (it fails the run)."""
        out: dict[str, Any] = {}
        for key, template in declared.items():
            try:
                out[key] = render_one(template)
            except TemplateError as exc:
                if not self.unpredicted:
                    raise
                out[key] = {
                    "status": "requires_execution",
                    "changed": False,
                    "reason": f"reads the output of a task that requires execution ({exc})",
                }
        return out
