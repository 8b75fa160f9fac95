"""The commands schedules and monitors share, built once for both groups:
``agentctl schedule|monitor list|show|pause|resume|remove``.

A monitor is a schedule that observes before it fires (docs/schedules.md), so the two
groups list, show, pause, resume and remove their rows the same way; only the nouns, the
help texts, the human rendering and what ``show`` lists (firings or observations) differ.
"""

# No ``from __future__ import annotations``: the commands' annotations carry this group's
# help texts, and Typer reads them from the functions as built.

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentctl.cli import output
from agentctl.cli.options import DbOption, db_from_context

if TYPE_CHECKING:
    from agentctl.scheduling.schedules import Schedule

__all__ = [
    "InputPairsOption",
    "TimedGroup",
    "WorkspaceOption",
    "add_shared_commands",
    "new_schedule",
]

InputPairsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--input",
        help="KEY=VALUE input of every run, read as `roll --input` reads it (text for an "
        "input spec.inputSchema types as a string, else JSON when it parses, else text).",
    ),
]
WorkspaceOption = Annotated[
    str | None,
    typer.Option("--workspace", help="Base directory of the runs (default: the file's)."),
]


@dataclass(frozen=True)
class TimedGroup:
    """What differs between ``agentctl schedule`` and ``agentctl monitor``."""

    noun: str  # "schedule" or "monitor"
    human: Callable[[dict[str, Any]], str]
    name_help: str
    list_help: str
    show_help: str
    show_limit: int
    show_limit_help: str
    pause_help: str
    resume_help: str
    remove_help: str

    @property
    def monitor(self) -> bool:
        return self.noun == "monitor"

    @property
    def kind(self) -> str:
        return self.noun.capitalize()


def _now() -> Any:
    from agentctl.ids import SystemClock

    return SystemClock().now()


def _describe(group: TimedGroup, store: Any, name: str, limit: int | None = None) -> Any:
    """One schedule or monitor as ``show`` prints it (``limit`` recent firings or
    observations; the default number without one)."""
    if group.monitor:
        from agentctl.scheduling.monitors import get_monitor

        if limit is None:
            return get_monitor(store, name, now=_now())
        return get_monitor(store, name, now=_now(), observations=limit)
    from agentctl.scheduling.schedules import get_schedule

    if limit is None:
        return get_schedule(store, name, now=_now())
    return get_schedule(store, name, now=_now(), firings=limit)


def add_shared_commands(app: typer.Typer, group: TimedGroup) -> None:
    """Register ``list``, ``show``, ``pause``, ``resume`` and ``remove`` on ``app``."""

    @app.command("list", help=group.list_help)
    def list_command(ctx: typer.Context, db: DbOption = None) -> None:
        from agentctl.store.engine import open_store

        with open_store(db_from_context(ctx, db), create=False) as store:
            if group.monitor:
                from agentctl.scheduling.monitors import list_monitors

                found = list_monitors(store, now=_now())
            else:
                from agentctl.scheduling.schedules import list_schedules

                found = list_schedules(store, now=_now())
        text = "\n".join(group.human(item) for item in found) or f"no {group.noun}s"
        output.current().success(f"{group.kind}List", {f"{group.noun}s": found}, human=text)

    @app.command("show", help=group.show_help)
    def show_command(
        ctx: typer.Context,
        name: Annotated[str, typer.Argument(help=group.name_help)],
        limit: Annotated[
            int, typer.Option("--limit", help=group.show_limit_help, min=1)
        ] = group.show_limit,
        db: DbOption = None,
    ) -> None:
        from agentctl.store.engine import open_store

        with open_store(db_from_context(ctx, db), create=False) as store:
            data = _describe(group, store, name, limit)
        output.current().success(group.kind, data, human=group.human(data))

    def set_paused(ctx: typer.Context, db: str | None, name: str, paused: bool) -> None:
        from agentctl.scheduling.schedules import set_paused
        from agentctl.store.engine import open_store

        with open_store(db_from_context(ctx, db), create=False) as store:
            set_paused(store, name, paused, now=_now(), monitor=group.monitor)
            data = _describe(group, store, name)
        output.current().success(group.kind, data, human=group.human(data))

    @app.command("pause", help=group.pause_help)
    def pause_command(
        ctx: typer.Context,
        name: Annotated[str, typer.Argument(help=group.name_help)],
        db: DbOption = None,
    ) -> None:
        set_paused(ctx, db, name, True)

    @app.command("resume", help=group.resume_help)
    def resume_command(
        ctx: typer.Context,
        name: Annotated[str, typer.Argument(help=group.name_help)],
        db: DbOption = None,
    ) -> None:
        set_paused(ctx, db, name, False)

    @app.command("remove", help=group.remove_help)
    def remove_command(
        ctx: typer.Context,
        name: Annotated[str, typer.Argument(help=group.name_help)],
        db: DbOption = None,
    ) -> None:
        from agentctl.scheduling.schedules import remove_schedule
        from agentctl.store.engine import open_store

        with open_store(db_from_context(ctx, db), create=False) as store:
            data = remove_schedule(store, name, monitor=group.monitor)
        output.current().success(f"{group.kind}Removed", data, human=f"removed {group.noun} {name}")


def new_schedule(
    *,
    name: str,
    workflow: str,
    workflow_file: str,
    workspace: str | None,
    pairs: list[str],
    prepared_inputs: dict[str, Any],
    start: str | None,
    now: Any,
    **rule: Any,
) -> "Schedule":
    """The schedule ``schedule add`` and ``monitor add`` record: the workflow as given and
    as resolved, this directory, the runs' workspace and inputs, and the first instant
    (``--start``, else now); ``rule`` is the rest (cron or interval, catch-up, overlap …).
    Each ``--input`` pair is recorded as the run will read it (``prepared_inputs``, the
    inputs prepare_run merged: a string spec.inputSchema declares keeps its text)."""
    from pathlib import Path

    from agentctl.digest import canonical_json
    from agentctl.engine.run.creation import parse_input_pairs
    from agentctl.scheduling.schedules import Schedule
    from agentctl.scheduling.slots import parse_instant

    inputs = {key: prepared_inputs[key] for key in parse_input_pairs(pairs)}
    first = parse_instant(start, "--start") if start else now
    return Schedule(
        name=name,
        workflow=workflow,
        workflow_file=workflow_file,
        project_dir=str(Path.cwd().resolve()),
        workspace=str(Path(workspace).resolve()) if workspace else None,
        inputs_json=canonical_json(inputs),
        anchor_at=first,
        cursor_at=first,
        created_at=now,
        updated_at=now,
        **rule,
    )
