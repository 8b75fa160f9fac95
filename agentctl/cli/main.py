"""The one boundary where errors become exit codes.

Everything below ``agentctl/cli`` raises :mod:`agentctl.errors`; here each is rendered (JSON
envelope or human text) and mapped to its exit code. Unexpected exceptions are reported
without a traceback unless ``--verbose`` is given (tracebacks can hold secrets).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import traceback
from collections.abc import Sequence

from agentctl import hints
from agentctl.cli import output
from agentctl.cli.globals import split_global_options
from agentctl.errors import EXIT_CANCELLED, EXIT_USAGE, AgentctlError, Cancelled

__all__ = ["main", "run"]

EXIT_INTERNAL = 1
EXIT_BROKEN_PIPE = 141


def _is_utf8(arg: str) -> bool:
    """False for an argument holding bytes the OS could not decode (lone surrogates)."""
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` and return the exit code (never calls ``sys.exit``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["__complete"]:
        # The shell completion scripts ask here; the words are not parsed as a command.
        from typer.main import get_command

        from agentctl.cli.app import app
        from agentctl.cli.completion import complete

        print("\n".join(complete(args[1:], get_command(app))))
        return 0
    options, rest = split_global_options(args)
    out = output.Output(mode=options.output, color=options.color, verbose=options.verbose)
    output.set_current(out)
    hints.use_database(None)
    undecodable = next((i for i, arg in enumerate(args) if not _is_utf8(arg)), None)
    if undecodable is not None:
        # The shell passed bytes that are not UTF-8; they cannot name a run, a file in the
        # database or anything agentctl stores, so they are refused up front.
        shown = args[undecodable].encode("utf-8", "surrogateescape")
        out.failure(
            code="cli.usage",
            message=f"argument {undecodable + 1} is not valid UTF-8: {shown!r}",
            exit_code=EXIT_USAGE,
            hint="pass ids, names and paths as UTF-8 text",
        )
        return EXIT_USAGE
    if options.problems:
        out.failure(
            code="cli.usage",
            message=options.problems[0],
            exit_code=EXIT_USAGE,
            hint="run `agentctl --help` for the options",
        )
        return EXIT_USAGE

    import typer

    from agentctl import observability
    from agentctl.cli import metavars
    from agentctl.cli.app import command_for

    observability.request(options.otel)
    # --offline needs nothing here: packs are only ever read from local files (a git or
    # https source is refused), so no command reaches the network for a pack.
    if options.locked or "agentctl.spec.packs" in sys.modules:  # (a cheap start otherwise)
        from agentctl.spec import require_lock

        require_lock(options.locked)

    command = metavars.apply(command_for(rest))
    captured = io.StringIO()
    # In machine modes anything the parser prints (help, usage) is captured and wrapped in
    # an envelope, so stdout carries exactly one JSON document.
    redirect = contextlib.redirect_stdout(captured) if out.machine else contextlib.nullcontext()
    try:
        with redirect:
            result = command.main(args=rest, prog_name="agentctl", standalone_mode=False)
        code = result if isinstance(result, int) else 0
    except AgentctlError as error:
        out.error(error)
        return error.exit_code
    except Cancelled as cancelled:
        out.failure(
            code=Cancelled.code,
            message=f"cancelled: {cancelled.reason}",
            exit_code=EXIT_CANCELLED,
            run_id=cancelled.run_id,
            hint=cancelled.hint,
        )
        return EXIT_CANCELLED
    except typer.Abort:
        out.failure(code="cli.aborted", message="aborted", exit_code=EXIT_CANCELLED)
        return EXIT_CANCELLED
    except typer.TyperException as error:
        if type(error).__name__ == "NoArgsIsHelpError":
            # agentctl or a command group called bare: the help it printed is the answer.
            # (Rich help prints itself; plain help comes back as the error's text.)
            return _help(out, captured.getvalue() or error.format_message() + "\n")
        code = int(getattr(error, "exit_code", EXIT_USAGE))
        message = error.format_message() if hasattr(error, "format_message") else str(error)
        ctx = getattr(error, "ctx", None)
        command_path = ctx.command_path if ctx is not None else "agentctl"
        out.failure(
            code="cli.usage",
            message=message,
            exit_code=code,
            hint=f"run `{command_path} --help` for its usage",
        )
        return code
    except BrokenPipeError:
        raise  # the reader went away: handled quietly by run()
    except Exception as error:  # the last line of defence: no tracebacks for users
        if out.verbose:
            traceback.print_exc(file=out.stderr)
        out.failure(
            code="internal.error",
            message=f"internal error: {type(error).__name__}: {error}",
            exit_code=EXIT_INTERNAL,
            hint="this is a bug in agentctl; rerun with --verbose for the traceback and report it",
        )
        return EXIT_INTERNAL
    finally:
        # Flushes spans and metrics when a command turned telemetry on (a no-op otherwise).
        observability.shutdown()
    _help(out, captured.getvalue())
    return code


def _help(out: output.Output, text: str) -> int:
    """Pass on what the parser printed (help), as an envelope in machine modes."""
    if out.machine and text and not out.emitted:
        out.success("Help", {"text": text})
    elif not out.machine and text:
        out.stdout.write(text)
    return 0


def run() -> None:
    """Console-script entry point.

    A reader that closes the pipe early (``agentctl runs list | head -1``) ends the command
    quietly, as other Unix tools do: no traceback, exit status 141 (128 + SIGPIPE).
    """
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Further writes (including the interpreter's flush at exit) would raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        code = EXIT_BROKEN_PIPE
    sys.exit(code)
