"""``agentctl watch RUN``: follow a run from any shell until it finishes or parks."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentctl.cli import output
from agentctl.cli.options import DbOption, db_from_context
from agentctl.cli.task_view import DONE, counts_text, render_tasks
from agentctl.errors import EXIT_BLOCKED, EXIT_CANCELLED, EXIT_OK, EXIT_RUN_FAILED

if TYPE_CHECKING:
    from agentctl.runtime_records import RunLook

__all__ = ["watch_command"]

_EXIT_BY_STATE = {
    "succeeded": EXIT_OK,
    "paused": EXIT_BLOCKED,
    "cancelled": EXIT_CANCELLED,
    "failed": EXIT_RUN_FAILED,
}
#: Looks in a row that find a running run with no live owner before watch stops (a run
#: between its creation and its owner's first claim is briefly unowned).
_ORPHAN_LOOKS = 3


def _counts(now: RunLook) -> str:
    return counts_text(now.tasks)


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
        effects = ", ".join(f"{e['operation']} ({e['status']})" for e in now.effects[:5])
        return render_tasks(
            f"{now.run_id} · {now.workflow} · {now.state}",
            now.tasks,
            [f"effects in flight: {effects}"] if effects else [],
        )


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
    from agentctl.runtime import Runtime

    out = output.current()
    unowned = 0
    looks = Runtime(db_from_context(ctx, db)).follow(run_id, interval=interval)
    with _View(out) as view:
        for now in looks:
            view.show(now)
            if now.finished or now.parked:
                break
            unowned = 0 if now.owned else unowned + 1
            if unowned >= _ORPHAN_LOOKS:
                break
        looks.close()  # closes the database now, not when the generator is collected
    return _summary(now, orphaned=not (now.finished or now.parked))


def _summary(now: RunLook, *, orphaned: bool) -> int:
    out = output.current()
    data: dict[str, Any] = {
        "runId": now.run_id,
        "workflow": now.workflow,
        "state": now.state,
        "tasks": {"done": now.count(*DONE), "total": len(now.tasks)},
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
