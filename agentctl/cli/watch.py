"""``agentctl watch RUN``: follow a run from any shell until it finishes or parks."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentctl.cli import output
from agentctl.cli.options import DbOption, db_from_context
from agentctl.errors import EXIT_BLOCKED, EXIT_CANCELLED, EXIT_OK, EXIT_RUN_FAILED

if TYPE_CHECKING:
    from agentctl.engine.watching import RunLook, TaskLook

__all__ = ["watch_command"]

_EXIT_BY_STATE = {
    "succeeded": EXIT_OK,
    "paused": EXIT_BLOCKED,
    "cancelled": EXIT_CANCELLED,
    "failed": EXIT_RUN_FAILED,
}
_STYLES = {
    "pending": "dim",
    "running": "cyan",
    "succeeded": "green",
    "failed": "bold red",
    "skipped": "dim",
    "cancelled": "red",
    "waiting_for_approval": "yellow",
    "waiting_for_effect": "bold yellow",
}
_DONE = ("succeeded", "failed", "skipped", "cancelled")
#: Looks in a row that find a running run with no live owner before watch stops (a run
#: between its creation and its owner's first claim is briefly unowned).
_ORPHAN_LOOKS = 3
_ROWS = 30


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _elapsed(task: TaskLook) -> str:
    if task.started_at is None:
        return ""
    end = task.finished_at or _now()
    seconds = max(0.0, (end - task.started_at).total_seconds())
    return f"{seconds:.1f}s" if seconds < 60 else f"{int(seconds) // 60}m{int(seconds) % 60:02d}s"


def _counts(now: RunLook) -> str:
    total = len(now.tasks)
    parts = [f"{now.count(*_DONE)}/{total} done"]
    for state in ("running", "waiting_for_approval", "waiting_for_effect", "failed"):
        n = now.count(state)
        if n:
            parts.append(f"{n} {state.replace('_', ' ')}")
    return ", ".join(parts)


class _View:
    """The live rich table on a terminal; plain progress lines (stderr) otherwise."""

    def __init__(self, out: output.Output) -> None:
        self.out = out
        isatty = getattr(out.stdout, "isatty", None)
        self.live_wanted = out.mode == "human" and bool(isatty and isatty())
        self._live: Any = None
        self._last: RunLook | None = None

    def __enter__(self) -> _View:
        if self.live_wanted:
            from rich.console import Console
            from rich.live import Live

            console = Console(
                file=self.out.stdout, no_color=not self.out.use_color(self.out.stdout)
            )
            self._live = Live(console=console, refresh_per_second=4, transient=False)
            self._live.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._live is not None:
            if self._last is not None:
                self._live.update(self._render(self._last))
            self._live.stop()

    def show(self, now: RunLook) -> None:
        self._last = now
        for event in now.events:
            data = {"runId": now.run_id, **event}
            human = None
            if self._live is None and event["kind"].startswith("task.") and event["taskId"]:
                human = f"  {event['kind'].removeprefix('task.'):<20} {event['taskId']}"
            self.out.event("RunEvent", data, human=human)
        if self._live is not None:
            self._live.update(self._render(now))

    def _render(self, now: RunLook) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        table = Table(
            box=None,
            header_style="bold",
            pad_edge=False,
        )
        table.add_column("task")
        table.add_column("state")
        table.add_column("attempt", justify="right")
        table.add_column("elapsed", justify="right")
        shown = now.tasks
        if len(shown) > _ROWS:
            # Many tasks: what is moving first, then the most recently finished.
            active = [t for t in shown if t.state not in (*_DONE, "pending")]
            finished = [t for t in shown if t.state in _DONE and t.finished_at is not None]
            finished.sort(key=lambda t: t.finished_at or datetime.min)
            shown = (active + finished[-(_ROWS - len(active)) :])[:_ROWS]
        for task in shown:
            style = _STYLES.get(task.state, "")
            label = task.state.replace("_", " ")
            table.add_row(
                task.task_id,
                f"[{style}]{label}[/]" if style else label,
                str(task.attempt or ""),
                _elapsed(task),
            )
        effects = ", ".join(f"{e['operation']} ({e['status']})" for e in now.effects[:5])
        footer = _counts(now) + (f"\neffects in flight: {effects}" if effects else "")
        header = Text(f"{now.run_id} · {now.workflow} · {now.state}", style="bold")
        return Group(header, table, Text(footer, style="dim"))


def watch_command(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The run to follow.")],
    db: DbOption = None,
    interval: Annotated[
        float,
        typer.Option("--interval", help="Seconds between looks at the database.", min=0.05),
    ] = 0.5,
) -> int:
    """Follow a run until it finishes or parks: every task's state (running ones with their
    elapsed time), done/total, the effects in flight, then a summary with the run's output.

    The exit code mirrors the run: 0 succeeded, 3 parked (an approval, a question, an
    uncertain effect, or no live process executes it), 4 failed, 130 cancelled. With
    `--output jsonl` every audit event is streamed as a RunEvent with its timestamp.

    Example: agentctl watch RUN --db .agentctl/runtime.db
    """
    from agentctl.engine.watching import look
    from agentctl.store.engine import open_store

    out = output.current()
    unowned = 0
    with open_store(db_from_context(ctx, db), create=False) as store, _View(out) as view:
        seq = 0
        while True:
            now = look(store, run_id, after_seq=seq)
            seq = now.last_seq
            view.show(now)
            if now.finished or now.parked:
                break
            unowned = 0 if now.owned else unowned + 1
            if unowned >= _ORPHAN_LOOKS:
                break
            time.sleep(interval)
    return _summary(now, orphaned=not (now.finished or now.parked))


def _summary(now: RunLook, *, orphaned: bool) -> int:
    out = output.current()
    data: dict[str, Any] = {
        "runId": now.run_id,
        "workflow": now.workflow,
        "state": now.state,
        "tasks": {"done": now.count(*_DONE), "total": len(now.tasks)},
        "output": now.output,
        "error": now.error,
        "pendingApprovals": now.pending_approvals,
    }
    human = f"{now.run_id} {now.state} ({_counts(now)})"
    if now.state == "succeeded" and now.output is not None:
        import json

        shown = json.dumps(now.output, ensure_ascii=False, default=str)
        human += f"\n  output: {shown if len(shown) < 2000 else shown[:2000] + '…'}"
    elif now.error:
        message = now.error.get("message") if isinstance(now.error, dict) else now.error
        human += f"\n  {message}"
    if now.pending_approvals:
        human += (
            f"\n  next: answer {', '.join(now.pending_approvals)} (agentctl approvals list, "
            f"or agentctl ui), then agentctl resume {now.run_id}"
        )
    if orphaned:
        data["note"] = "no live process executes this run"
        human += f"\n  no live process executes this run; next: agentctl resume {now.run_id}"
        out.success("WatchResult", data, human=human)
        return EXIT_BLOCKED
    out.success("WatchResult", data, human=human)
    return _EXIT_BY_STATE.get(now.state, EXIT_RUN_FAILED)
