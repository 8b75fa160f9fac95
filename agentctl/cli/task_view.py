"""The live task table both ``agentctl watch`` and the launching process (``roll``,
``resume``, ``retry`` …) draw on a terminal: every task's state, its attempt, the elapsed
time of running tasks, and ``done/total`` with the counts of what is moving.

One home for the look, so a run looks the same from the shell that runs it and from any
other shell that watches it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

__all__ = ["DONE", "TaskRow", "counts_text", "elapsed_text", "render_tasks"]


class TaskRow(Protocol):
    """One task as the view needs it (``agentctl.engine.watching.TaskLook`` is one)."""

    @property
    def task_id(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def started_at(self) -> datetime | None: ...
    @property
    def finished_at(self) -> datetime | None: ...


STYLES = {
    "pending": "dim",
    "running": "cyan",
    "succeeded": "green",
    "failed": "bold red",
    "skipped": "dim",
    "cancelled": "red",
    "waiting_for_approval": "yellow",
    "waiting_for_effect": "bold yellow",
}
DONE = ("succeeded", "failed", "skipped", "cancelled")
#: More tasks than this: show what is moving, then the most recently finished.
ROWS = 30


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def elapsed_text(task: TaskRow) -> str:
    """How long the task has run (still running) or ran; empty when it never started."""
    if task.started_at is None:
        return ""
    end = task.finished_at or _now()
    seconds = max(0.0, (end - task.started_at).total_seconds())
    return f"{seconds:.1f}s" if seconds < 60 else f"{int(seconds) // 60}m{int(seconds) % 60:02d}s"


def counts_text(tasks: Sequence[TaskRow]) -> str:
    """``2/5 done, 1 running, 1 waiting for approval`` (only the counts that are not zero)."""
    parts = [f"{sum(1 for t in tasks if t.state in DONE)}/{len(tasks)} done"]
    for state in ("running", "waiting_for_approval", "waiting_for_effect", "failed"):
        n = sum(1 for t in tasks if t.state == state)
        if n:
            parts.append(f"{n} {state.replace('_', ' ')}")
    return ", ".join(parts)


def render_tasks(title: str, tasks: Sequence[TaskRow], footer_lines: Sequence[str] = ()) -> Any:
    """A rich renderable: the title, the task table and the counts (plus ``footer_lines``)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("task")
    table.add_column("state")
    table.add_column("attempt", justify="right")
    table.add_column("elapsed", justify="right")
    shown = list(tasks)
    if len(shown) > ROWS:
        active = [t for t in shown if t.state not in (*DONE, "pending")]
        finished = [t for t in shown if t.state in DONE and t.finished_at is not None]
        finished.sort(key=lambda t: t.finished_at or datetime.min)
        shown = (active + finished[-max(0, ROWS - len(active)) :])[:ROWS]
    for task in shown:
        style = STYLES.get(task.state, "")
        label = task.state.replace("_", " ")
        table.add_row(
            task.task_id,
            f"[{style}]{label}[/]" if style else label,
            str(task.attempt or ""),
            elapsed_text(task),
        )
    footer = "\n".join([counts_text(tasks), *footer_lines])
    return Group(Text(title, style="bold"), table, Text(footer, style="dim"))
