"""``agentctl version`` and ``agentctl completion SHELL``."""

from __future__ import annotations

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
    from agentctl.runtime import Runtime

    info = Runtime.version_info()
    human = (
        f"agentctl {info.version} (schema revision {info.schema_revision}, record format "
        f"{info.record_format_version}, Python {info.python})"
    )
    output.current().success("Version", info.to_json(), human=human)


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


def update_command() -> None:
    """Explain how to upgrade agentctl; never updates itself.

    agentctl does not download or replace itself: an upgrade is a change of an installed
    package, made by whoever owns the environment, and reviewed like any other. This
    prints the command for the environment that runs this agentctl (a pip install into
    the same interpreter, or `git pull` and `make install` for a source checkout).

    Example: agentctl update --output json
    """
    import shlex
    import sys

    source = _editable_checkout()
    if source is not None:
        command = f"git -C {shlex.quote(source)} pull && make -C {shlex.quote(source)} install"
    else:
        command = f"{shlex.quote(sys.executable)} -m pip install --upgrade agentctl"
    data = {"currentVersion": __version__, "automaticUpdate": False, "command": command}
    human = (
        f"agentctl {__version__}; it never updates itself. To upgrade, run:\n  {command}\n"
        "then `agentctl version` (a database is upgraded when the new release opens it; "
        "docs/operators-guide.md, upgrades)"
    )
    output.current().success("UpdateInfo", data, human=human)


def _editable_checkout() -> str | None:
    """The source checkout an editable install points at, or None."""
    import json
    from importlib import metadata
    from urllib.parse import unquote, urlsplit

    try:
        text = metadata.distribution("agentctl").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not text:
        return None
    try:
        found = json.loads(text)
    except ValueError:
        return None
    if not (found.get("dir_info") or {}).get("editable"):
        return None
    url = urlsplit(str(found.get("url", "")))
    return unquote(url.path) if url.scheme == "file" else None
