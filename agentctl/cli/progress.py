"""Progress while a run executes: a live task view on a terminal, plain lines otherwise.

On a terminal the launching process (``roll``, ``resume``, ``retry`` …) draws the same
table as ``agentctl watch``: every task of the run with its state, the elapsed time of the
running ones, and ``done/total``. The executor tells it when it starts (every task and its
state) and when each task starts and finishes.

In ``jsonl`` mode every persisted transition is a ``RunEvent`` envelope on stdout (the
in-process ``started`` / ``task.started`` notices are not transitions and are not
streamed); in ``json`` mode nothing but the final document reaches stdout.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from agentctl.cli.output import Output
from agentctl.cli.task_view import DONE, render_tasks

__all__ = ["Progress"]

_MARKS = {
    "succeeded": "ok",
    "failed": "FAILED",
    "skipped": "skipped",
    "waiting_for_approval": "waiting",
    "waiting_for_effect": "blocked",
    "running": "running",
}
#: Executor notices for the live view only (see the module docstring).
_LIVE_ONLY = ("started", "task.started")


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class _Task:
    __slots__ = ("attempt", "finished_at", "started_at", "state", "task_id")

    def __init__(self, task_id: str, state: str) -> None:
        self.task_id = task_id
        self.state = state
        self.attempt = 0
        self.started_at: datetime | None = None
        self.finished_at: datetime | None = None

    def copy(self) -> _Task:
        twin = _Task(self.task_id, self.state)
        twin.attempt, twin.started_at, twin.finished_at = (
            self.attempt,
            self.started_at,
            self.finished_at,
        )
        return twin


class Progress:
    """Receives the executor's events; owns the rich ``Live`` view when there is one."""

    def __init__(self, out: Output, *, live: bool) -> None:
        self.out = out
        self.tasks: dict[str, _Task] = {}
        self.run_id = ""
        self._live: Any = None
        self._lock = threading.Lock()  # the view refreshes from rich's own thread
        self._wanted = live and out.mode == "human" and _is_terminal(out)

    def __enter__(self) -> Progress:
        if self._wanted:
            from rich.console import Console
            from rich.live import Live

            console = Console(
                file=self.out.stderr, no_color=not self.out.use_color(self.out.stderr)
            )
            # get_renderable: each refresh draws afresh, so elapsed times keep counting.
            self._live = Live(
                console=console,
                refresh_per_second=4,
                transient=False,
                get_renderable=self._render,
            )
            self._live.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.refresh()
            self._live.stop()

    def event(self, kind: str, data: dict[str, Any]) -> None:
        if kind in _LIVE_ONLY:
            self._note(kind, data)
            return
        if kind != "task":
            self.out.event("RunEvent", data)
            return
        self._note(kind, data)
        if self._live is not None:
            self.out.event("RunEvent", data)  # jsonl only; human text goes to the view
        else:
            state = str(data["state"])
            mark = _MARKS.get(state, state)
            self.out.event("RunEvent", data, human=f"  {mark:<8} {data['taskId']}")

    def _note(self, kind: str, data: dict[str, Any]) -> None:
        # No redraw per event: a 10,000-task fan-out would draw 20,000 frames. The view
        # redraws itself a few times a second (and once more at the end).
        with self._lock:
            self._apply(kind, data, _now())

    def _apply(self, kind: str, data: dict[str, Any], now: datetime) -> None:
        if kind == "started":
            self.run_id = str(data.get("runId") or "")
            # A new execution (or a compensation run after this one): its own tasks.
            self.tasks = {tid: _Task(tid, str(state)) for tid, state in data["tasks"].items()}
            return
        task_id = str(data["taskId"])
        task = self.tasks.setdefault(task_id, _Task(task_id, "pending"))
        task.attempt = int(data.get("attempt") or task.attempt)
        if kind == "task.started":
            task.state = "running"
            task.started_at = task.started_at or now
            task.finished_at = None
            return
        task.state = str(data["state"])
        if task.state in DONE:
            task.finished_at = now

    def _render(self) -> Any:
        with self._lock:
            tasks = [t.copy() for t in self.tasks.values()]
            run_id = self.run_id
        return render_tasks(run_id, tasks)


def _is_terminal(out: Output) -> bool:
    isatty = getattr(out.stderr, "isatty", None)
    return bool(isatty and isatty())
