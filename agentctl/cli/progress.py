"""Progress while a run executes: a live task view on a terminal, plain lines otherwise.

In ``jsonl`` mode every persisted transition is a ``RunEvent`` envelope on stdout; in
``json`` mode nothing but the final document reaches stdout.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from agentctl.cli.output import Output

__all__ = ["Progress"]

_MARKS = {
    "succeeded": ("ok", "green"),
    "failed": ("FAILED", "bold red"),
    "skipped": ("skipped", "dim"),
    "waiting_for_approval": ("waiting", "yellow"),
    "waiting_for_effect": ("blocked", "bold yellow"),
    "running": ("running", "cyan"),
}


class Progress:
    """Receives the executor's events; owns the rich ``Live`` view when there is one."""

    def __init__(self, out: Output, *, live: bool) -> None:
        self.out = out
        self.states: dict[str, tuple[str, int]] = {}
        self._live: Any = None
        self._wanted = live and out.mode == "human" and _is_terminal(out)

    def __enter__(self) -> Progress:
        if self._wanted:
            from rich.console import Console
            from rich.live import Live

            console = Console(
                file=self.out.stderr, no_color=not self.out.use_color(self.out.stderr)
            )
            self._live = Live(
                self._render(), console=console, refresh_per_second=8, transient=False
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
            self._live.update(self._render())
            self._live.stop()

    def event(self, kind: str, data: dict[str, Any]) -> None:
        if kind != "task":
            self.out.event("RunEvent", data)
            return
        state = str(data["state"])
        self.states[str(data["taskId"])] = (state, int(data.get("attempt") or 0))
        mark = _MARKS.get(state, (state, ""))[0]
        if self._live is not None:
            self.out.event("RunEvent", data)  # jsonl only; human text goes to the view
            self._live.update(self._render())
        else:
            self.out.event("RunEvent", data, human=f"  {mark:<8} {data['taskId']}")

    def _render(self) -> Any:
        from rich.table import Table

        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        table.add_column("task")
        table.add_column("state")
        table.add_column("attempt", justify="right")
        for task_id, (state, attempt) in list(self.states.items())[-40:]:
            mark, style = _MARKS.get(state, (state, ""))
            table.add_row(task_id, f"[{style}]{mark}[/]" if style else mark, str(attempt))
        done = sum(1 for state, _ in self.states.values() if state in _MARKS)
        table.caption = f"{done} task transitions"
        return table


def _is_terminal(out: Output) -> bool:
    isatty = getattr(out.stderr, "isatty", None)
    return bool(isatty and isatty())
