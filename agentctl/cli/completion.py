"""Shell completion: the scripts ``agentctl completion SHELL`` prints, and the answers.

The scripts call ``agentctl __complete WORD…`` with the words typed so far (the last one
being completed, possibly empty). The answer is one candidate per line, found from the
command tree itself (commands, options, choices) and, for ids, from the database the line
names (``--db``, else ``AGENTCTL_DB``, else the default): run ids, approval ids of pending
approvals and questions, uncertain effect ids and workflow names. A first line ``:files``
asks the shell to complete file names instead. Completion never creates a database and
never fails: anything it cannot read yields no candidates.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

__all__ = ["FILES", "complete", "script"]

FILES = ":files"

_CHOICES = {
    "--output": ["human", "json", "jsonl"],
    "--color": ["auto", "always", "never"],
    "--state": ["running", "paused", "succeeded", "failed", "cancelled"],
    "--status": ["running", "paused", "succeeded", "failed", "cancelled"],
}
_GLOBAL_OPTIONS = ["--output", "--color", "--verbose", "--help"]
_FILE_OPTIONS = {"--db", "--inputs-file", "--workspace", "--evidence-file", "--result-file"}

_BASH = """\
_agentctl_complete() {
    local cur="${COMP_WORDS[COMP_CWORD]}"
    local IFS=$'\\n'
    local -a found
    found=($(agentctl __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
    if [[ "${found[0]}" == ":files" ]]; then
        COMPREPLY=($(compgen -f -- "$cur"))
    else
        COMPREPLY=($(compgen -W "${found[*]}" -- "$cur"))
    fi
}
complete -o default -F _agentctl_complete agentctl
"""

_ZSH = (
    """\
#compdef agentctl
autoload -U +X bashcompinit && bashcompinit
"""
    + _BASH
)

_FISH = """\
function __agentctl_complete
    set -l words (commandline -opc) (commandline -ct)
    set -l found (agentctl __complete $words[2..-1] 2>/dev/null)
    if test "$found[1]" = ":files"
        __fish_complete_path (commandline -ct)
    else
        printf '%s\\n' $found
    end
end
complete -c agentctl -f -a '(__agentctl_complete)'
"""

_SCRIPTS = {"bash": _BASH, "zsh": _ZSH, "fish": _FISH}


def script(shell: str) -> str:
    return _SCRIPTS[shell]


def complete(words: list[str], root: Any) -> list[str]:
    """Candidates for the last of ``words`` (the words after ``agentctl``).

    ``root`` is the click command of the whole CLI; the caller builds it, so this module
    never imports the app that registers it.
    """
    try:
        return list(_complete(words, root))
    except Exception:  # completion must never print a traceback into a shell prompt
        return []


def _complete(words: list[str], root: Any) -> Iterator[str]:
    typed, current = words[:-1], (words[-1] if words else "")
    command: Any = root
    positionals: list[str] = []
    previous: Any = None
    i = 0
    while i < len(typed):
        word = typed[i]
        option = _option(command, word)
        if word in _CHOICES or word in ("--db", "--workflow") or (option and not option.is_flag):
            i += 2 if "=" not in word else 1
            continue
        if word.startswith("-"):
            i += 1
            continue
        sub = getattr(command, "commands", {}).get(word)
        if sub is not None and not positionals:
            command = sub
        else:
            positionals.append(word)
        i += 1
    if typed:
        previous = typed[-1]
    if previous in _CHOICES:
        yield from _CHOICES[previous]
        return
    if previous in _FILE_OPTIONS:
        yield FILES
        return
    if previous == "--workflow":
        yield from _from_store(typed, "workflows")
        return
    if current.startswith("-"):
        yield from _options(command)
        return
    subcommands = getattr(command, "commands", None)
    if subcommands:
        yield from sorted(n for n, c in subcommands.items() if not getattr(c, "hidden", False))
        return
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    if len(positionals) < len(arguments):
        yield from _for_argument(arguments[len(positionals)].name or "", typed)


def _option(command: Any, word: str) -> Any:
    name = word.split("=", 1)[0]
    for param in getattr(command, "params", []):
        if param.param_type_name == "option" and name in (*param.opts, *param.secondary_opts):
            return param
    return None


def _options(command: Any) -> Iterator[str]:
    seen: set[str] = set()
    for param in command.params:
        if param.param_type_name != "option" or getattr(param, "hidden", False):
            continue
        for name in [*param.opts, *param.secondary_opts]:
            if name.startswith("--") and name not in seen:
                seen.add(name)
                yield name
    yield from (name for name in _GLOBAL_OPTIONS if name not in seen)


def _for_argument(name: str, typed: list[str]) -> Iterator[str]:
    if name in ("workflow", "dest", "evidence_file"):
        yield FILES
    elif name in ("run_id", "source_run_id"):
        yield from _from_store(typed, "runs")
    elif name == "approval_id":
        yield from _from_store(typed, "approvals")
    elif name == "effect_id":
        yield from _from_store(typed, "effects")


def _database(typed: list[str]) -> str | None:
    from agentctl.errors import AgentctlError
    from agentctl.runtime import Runtime

    for i, word in enumerate(typed):
        if word == "--db" and i + 1 < len(typed):
            return typed[i + 1]
        if word.startswith("--db="):
            return word[len("--db=") :]
    try:
        chosen = Runtime.locate(None)  # $AGENTCTL_DB, else the default database
    except AgentctlError:
        return None
    return chosen if os.path.isfile(chosen) else None


def _from_store(typed: list[str], kind: str) -> Iterator[str]:
    path = _database(typed)
    if path is None or not os.path.isfile(os.path.expanduser(path)):
        return
    from agentctl import Runtime

    runtime = Runtime(Runtime.locate(path))
    if kind == "runs":
        yield from (run.run_id for run in runtime.runs(limit=200))
    elif kind == "workflows":
        yield from sorted({run.workflow for run in runtime.runs(limit=1000)})
    elif kind == "approvals":
        yield from (approval.id for approval in runtime.approvals())
    elif kind == "effects":
        yield from (effect.id for effect in runtime.needs_reconciliation())
