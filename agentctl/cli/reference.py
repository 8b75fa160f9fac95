"""Generate docs/cli-reference.md from the commands themselves.

Run ``make docs`` (``python -m agentctl.cli.reference > docs/cli-reference.md``); a test
fails when the checked-in reference differs from what this prints.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

from typer.main import get_command

from agentctl.cli import metavars
from agentctl.cli.app import app

__all__ = ["iter_commands", "render_reference"]

HEADER = """# CLI reference

Generated from the commands' own help by `make docs`; do not edit by hand (a test checks
that it is current). The output contract (envelopes, exit codes) is in
[the user guide](user-guide.md#machine-output).
"""


def iter_commands() -> Iterator[tuple[str, Any, Any]]:
    """Yield ``(path, command, context)`` for the root and every command, depth first."""
    root = metavars.apply(get_command(app))
    ctx = root.make_context("agentctl", [], resilient_parsing=True)

    def walk(command: Any, path: str, context: Any) -> Iterator[tuple[str, Any, Any]]:
        yield path, command, context
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name in sorted(subcommands):
                child = subcommands[name]
                if getattr(child, "hidden", False):
                    continue  # an alias (`pack`): its commands are listed under their name
                child_ctx = child.make_context(name, [], parent=context, resilient_parsing=True)
                yield from walk(child, f"{path} {name}", child_ctx)

    yield from walk(root, "agentctl", ctx)


def _param_row(param: Any) -> str:
    names = ", ".join(f"`{opt}`" for opt in [*param.opts, *param.secondary_opts])
    if param.param_type_name == "argument":
        names = f"`{(param.name or '').upper()}`"
    help_text = " ".join((getattr(param, "help", None) or "").split())
    default = param.default
    if (
        param.param_type_name == "option"
        and default not in (None, False, ())
        and not callable(default)
    ):
        help_text += f" (default: `{default}`)"
    if param.required:
        help_text += " (required)"
    return f"| {names} | {help_text or '—'} |"


def render_reference() -> str:
    sections = [HEADER]
    for path, command, ctx in iter_commands():
        if getattr(command, "hidden", False):
            continue
        sections.append(f"## `{path}`\n")
        sections.append(f"```\n{command.get_usage(ctx).strip()}\n```\n")
        text = inspect.cleandoc(command.help or "")
        if text:
            sections.append(text + "\n")
        params = [p for p in command.params if not getattr(p, "hidden", False)]
        params = [p for p in params if p.name != "help"]
        if params:
            rows = ["| parameter | meaning |", "| --- | --- |"]
            rows.extend(_param_row(p) for p in params)
            sections.append("\n".join(rows) + "\n")
    return "\n".join(sections)


if __name__ == "__main__":
    print(render_reference(), end="")
