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
    from agentctl.runtime import Runtime

__all__ = [
    "InputPairsOption",
    "TimedGroup",
    "WorkspaceOption",
    "add_shared_commands",
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


def _runtime(ctx: typer.Context, db: str | None) -> "Runtime":
    from agentctl.runtime import Runtime

    return Runtime(db_from_context(ctx, db))


def add_shared_commands(app: typer.Typer, group: TimedGroup) -> None:
    """Register ``list``, ``show``, ``pause``, ``resume`` and ``remove`` on ``app``."""

    @app.command("list", help=group.list_help)
    def list_command(ctx: typer.Context, db: DbOption = None) -> None:
        runtime = _runtime(ctx, db)
        found = [
            item.to_json()
            for item in (runtime.monitors() if group.monitor else runtime.schedules())
        ]
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
        runtime = _runtime(ctx, db)
        if group.monitor:
            data = runtime.monitor(name, observations=limit).to_json()
        else:
            data = runtime.schedule(name, firings=limit).to_json()
        output.current().success(group.kind, data, human=group.human(data))

    def set_paused(ctx: typer.Context, db: str | None, name: str, paused: bool) -> None:
        runtime = _runtime(ctx, db)
        if group.monitor:
            data = runtime.set_monitor_paused(name, paused).to_json()
        else:
            data = runtime.set_schedule_paused(name, paused).to_json()
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
        runtime = _runtime(ctx, db)
        removed = runtime.remove_monitor(name) if group.monitor else runtime.remove_schedule(name)
        output.current().success(
            f"{group.kind}Removed", removed.to_json(), human=f"removed {group.noun} {name}"
        )
