"""``agentctl version`` and ``agentctl completion SHELL``."""

from __future__ import annotations

import platform
from enum import StrEnum
from typing import Annotated

import typer

from agentctl.cli import output
from agentctl.version import __version__


class Shell(StrEnum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def version_command() -> None:
    """Print agentctl's version, the newest schema revision it knows, and Python's.

    Example: agentctl --output json version
    """
    from agentctl.store.formats import FORMAT_VERSION
    from agentctl.store.migrate import head_revision

    data = {
        "version": __version__,
        "schemaRevision": head_revision(),
        "recordFormatVersion": FORMAT_VERSION,
        "python": platform.python_version(),
    }
    human = (
        f"agentctl {__version__} (schema revision {data['schemaRevision']}, record format "
        f"{FORMAT_VERSION}, Python {data['python']})"
    )
    output.current().success("Version", data, human=human)


def completion_command(
    shell: Annotated[Shell, typer.Argument(help="Shell to generate completion for.")],
) -> None:
    """Print a shell completion script: commands, options, run ids, approval ids, effect
    ids and workflow names complete at the prompt.

    Install it with, for example, ``agentctl completion bash > ~/.agentctl-complete.bash``
    and ``source ~/.agentctl-complete.bash`` in your shell's start-up file (zsh: the same
    with ``completion zsh``; fish: save it as
    ``~/.config/fish/completions/agentctl.fish``).

    Example: agentctl completion bash > ~/.agentctl-complete.bash
    """
    from agentctl.cli.completion import script as completion_script

    script = completion_script(shell.value)
    out = output.current()
    if out.machine:
        out.success("Completion", {"shell": shell.value, "script": script})
    else:
        out.stdout.write(script if script.endswith("\n") else script + "\n")
        out.emitted = True
