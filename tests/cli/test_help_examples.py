"""Every command's help ends with an example, and every example parses: the command it
names exists and takes the options and arguments the example gives it."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest

from agentctl.cli.globals import split_global_options
from agentctl.cli.reference import iter_commands

_EXAMPLE = re.compile(r"^\s*Example: (agentctl .+)$", re.MULTILINE)
COMMANDS = [(path, command) for path, command, _ in iter_commands()]


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[p for p, _ in COMMANDS])
def test_help_has_an_example_that_parses(path: str, command: Any) -> None:
    examples = _EXAMPLE.findall(command.help or "")
    assert examples, f"`{path} --help` shows no example"
    root = COMMANDS[0][1]
    for example in examples:
        words = shlex.split(example.split(" > ")[0])[1:]
        _, words = split_global_options(words)
        # Walk the groups the example names; the command it reaches parses the rest for
        # real (an unknown option or a missing argument raises).
        target, context, names = root, None, ["agentctl"]
        while getattr(target, "commands", None):
            assert words and words[0] in target.commands, f"{example}: no such command"
            context = target.make_context(names[-1], [], parent=context, resilient_parsing=True)
            names.append(words.pop(0))
            target = target.commands[names[-1]]
        target.make_context(names[-1], words, parent=context)
        reached = " ".join(names)
        assert reached.startswith(path), f"the example of `{path}` runs `{reached}`"


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS])
def test_placeholders_read_as_values(cli: Any, path: str) -> None:
    result = cli(*path.split()[1:], "--help")
    assert result.exit_code == 0, result.stderr
    for type_name in ("<str>", "<bool>", "<int>", "<list", "<float", "<choice"):
        assert type_name not in result.stdout, f"`{path} --help` shows {type_name}"
