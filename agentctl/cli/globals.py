"""The options every command accepts, found anywhere on the command line.

``--output``, ``--color``, ``-v/--verbose``, ``--otel``, ``--offline`` and ``--locked`` may
come before or after the command name, and ``--output`` must be honoured even when the rest
of the line fails to parse (so a usage error comes back as JSON too). They are therefore
lifted out of ``argv`` before the parser sees it; the root command declares them as well so
they show in ``--help``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agentctl.cli.output import COLOR_MODES, OUTPUT_MODES, ColorMode, OutputMode

__all__ = ["GlobalOptions", "split_global_options"]


@dataclass
class GlobalOptions:
    output: OutputMode = "human"
    color: ColorMode = "auto"
    verbose: bool = False
    otel: bool = False
    offline: bool = False
    locked: bool = False
    problems: list[str] = field(default_factory=list)


def _take_value(args: Sequence[str], i: int, name: str) -> tuple[str | None, int]:
    arg = args[i]
    if arg.startswith(name + "="):
        return arg[len(name) + 1 :], i + 1
    if i + 1 < len(args):
        return args[i + 1], i + 2
    return None, i + 1


def split_global_options(argv: Sequence[str]) -> tuple[GlobalOptions, list[str]]:
    """Return the global options and the remaining arguments for the command parser."""
    options = GlobalOptions()
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest.extend(argv[i:])
            break
        if arg == "--output" or arg.startswith("--output="):
            value, i = _take_value(argv, i, "--output")
            if value in OUTPUT_MODES:
                options.output = value
            else:
                options.problems.append(
                    f"invalid value for --output: {value!r} (choose from human, json, jsonl)"
                )
            continue
        if arg == "--color" or arg.startswith("--color="):
            value, i = _take_value(argv, i, "--color")
            if value in COLOR_MODES:
                options.color = value
            else:
                options.problems.append(
                    f"invalid value for --color: {value!r} (choose from auto, always, never)"
                )
            continue
        if arg in ("-v", "--verbose"):
            options.verbose = True
            i += 1
            continue
        if arg == "--otel":
            options.otel = True
            i += 1
            continue
        if arg in ("--offline", "--locked"):
            setattr(options, arg[2:], True)
            i += 1
            continue
        rest.append(arg)
        i += 1
    return options, rest
