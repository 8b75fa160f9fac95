"""The typer application: the root command and its command groups.

Command modules import SQLAlchemy, Alembic and httpx only inside their functions, so
building this app (for ``--help`` or parsing) stays fast. :func:`command_for` goes
further: a command line that names a command builds only that command's parser, and the
root help lists the commands from their help texts without building any parser.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from agentctl.cli import (
    approvals,
    artifacts,
    authoring,
    daemon,
    db,
    doctor,
    effects,
    explain,
    inspecting,
    memory,
    meta,
    migrate,
    monitors,
    packs,
    providers,
    recovery,
    running,
    schedules,
    sessions,
    ui,
    watch,
    workers,
    workflows,
)

__all__ = ["app", "app_for", "command_for"]

app = typer.Typer(
    name="agentctl",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(shown: bool) -> None:
    if shown:
        meta.version_command()
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    output: Annotated[
        str,
        typer.Option(
            "--output",
            help="Output format: human, json or jsonl (accepted anywhere on the line).",
        ),
    ] = "human",
    color: Annotated[
        str,
        typer.Option(
            "--color", help="Colour: auto (terminals only; NO_COLOR honoured), always or never."
        ),
    ] = "auto",
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="Human mode also prints the full data.")
    ] = False,
    otel: Annotated[
        bool,
        typer.Option(
            "--otel",
            help="Export OpenTelemetry traces and metrics over OTLP/HTTP (needs the `otel` "
            "extra; the OTEL_* variables also turn it on), e.g. "
            "`OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 agentctl --otel roll w.yaml`.",
        ),
    ] = False,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="Database for the command that follows, as if given after its name "
            "(`agentctl --db state.db runs list`); a --db after the name wins.",
            show_default=False,
        ),
    ] = None,
    offline: Annotated[
        bool,
        typer.Option(
            "--offline",
            help="No network access for packs, cached (local) sources only. agentctl reads "
            "packs only from local files, so this always holds; accepted for upstream's "
            "scripts.",
        ),
    ] = False,
    locked: Annotated[
        bool,
        typer.Option(
            "--locked",
            help="Require agentctl.pack.lock for every workflow with packs and refuse any "
            "drift or rewrite of it (CI), e.g. `agentctl --locked check deploy.yaml`.",
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=lambda shown: _version(shown),
            help="Print the version and exit (as `agentctl version`).",
        ),
    ] = False,
) -> None:
    """Run AI-agent workflows durably: every effect is journaled before it is dispatched.

    Example: agentctl roll review.yaml --input change=pr-42.diff
    """
    # Commands look for their database through their parents (options.db_from_context).
    ctx.obj = {"db": db}


app.command("check")(authoring.check_command)
app.command("plan")(authoring.plan_command)
app.command("schema")(authoring.schema_command)
app.command("explain")(explain.explain_command)
app.command("migrate")(migrate.migrate_command)
app.command("doctor")(doctor.doctor_command)
app.command("roll")(running.roll_command)
app.command("run", help="Alias of `roll`.\n\nExample: agentctl run review.yaml --dry-run")(
    running.roll_command
)
app.command("resume")(running.resume_command)
app.command("cancel")(running.cancel_command)
app.command("replay")(recovery.replay_command)
app.command("retry")(recovery.retry_command)
app.command("repair")(recovery.repair_command)
app.command("fork")(recovery.fork_command)
app.command("compensate")(recovery.compensate_command)
app.command("inspect")(inspecting.inspect_command)
app.command("audit")(inspecting.audit_command)
app.command("reconcile")(effects.reconcile_command)
app.command("ui")(ui.ui_command)
app.command("watch")(watch.watch_command)
app.command("worker")(workers.worker_command)
inspecting.runs_app.command("wait")(workers.runs_wait_command)
app.add_typer(inspecting.runs_app, name="runs")
app.add_typer(effects.app, name="effects")
app.add_typer(approvals.app, name="approvals")
app.add_typer(providers.providers_app, name="providers")
app.add_typer(providers.auth_app, name="auth")
app.add_typer(artifacts.app, name="artifacts")
app.add_typer(sessions.app, name="sessions")
app.add_typer(memory.app, name="memory")
app.add_typer(packs.app, name="packs")
# The name used before upstream's `packs` arrived; hidden, so help and the reference list
# each command once.
app.add_typer(packs.app, name="pack", hidden=True)
app.command("gc")(memory.gc_command)
app.add_typer(db.app, name="db")
app.add_typer(workflows.app, name="workflows")
app.add_typer(schedules.app, name="schedule")
app.add_typer(monitors.app, name="monitor")
app.command("daemon")(daemon.daemon_command)
app.command("version")(meta.version_command)
app.command("update")(meta.update_command)
app.command("completion")(meta.completion_command)


def app_for(args: Sequence[str]) -> typer.Typer:
    """The application to parse ``args`` (the command line without the global options).

    Building a parser inspects every parameter of every command, which costs more than the
    rest of a short command's start-up, so a line that names a known command gets an
    application holding the root callback and that command (or group) alone: its usage,
    help and errors read exactly as with the whole tree. Root help, ``--version`` and an
    unknown name (whose error suggests the near names) get the whole application.
    """
    if not args or args[0].startswith("-"):
        # Bare, or a root option first (--help, -h, --version: the global options were
        # lifted out already), which answers for the whole application.
        return app
    name = args[0]
    commands = [info for info in app.registered_commands if info.name == name]
    groups = [info for info in app.registered_groups if info.name == name]
    if not commands and not groups:
        return app
    pruned = copy.copy(app)  # the same settings and root callback
    pruned.registered_commands = commands
    pruned.registered_groups = groups
    return pruned


def command_for(args: Sequence[str]) -> Any:
    """The parser (a click command) for ``args``: :func:`app_for`'s, except that root help
    (``agentctl``, ``agentctl --help``) is listed from the commands' help texts, because
    listing needs nothing else and building every command's parser is most of its cost.
    A test compares that help with the whole tree's."""
    from typer.main import get_command

    if args and args[0] not in ("-h", "--help"):
        return get_command(app_for(args))
    from typer.core import TyperCommand
    from typer.main import solve_typer_info_defaults

    bare = copy.copy(app)  # the root callback and its options, no commands
    bare.registered_commands = []
    bare.registered_groups = []
    root = get_command(bare)
    for info in app.registered_commands:
        text = inspect.cleandoc(info.help) if info.help is not None else None
        root.add_command(  # type: ignore[attr-defined]
            TyperCommand(
                name=info.name,
                help=text if text is not None else inspect.getdoc(info.callback),
                short_help=info.short_help,
                hidden=info.hidden,
                deprecated=info.deprecated,
            )
        )
    for group in app.registered_groups:
        solved = solve_typer_info_defaults(group)
        root.add_command(  # type: ignore[attr-defined]
            TyperCommand(
                name=solved.name,
                help=solved.help,
                short_help=solved.short_help,
                hidden=solved.hidden,
                deprecated=solved.deprecated,
            )
        )
    return root
