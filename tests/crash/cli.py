"""The crash tests' way of running agentctl: a fault-injected command as a real subprocess
(it must be SIGKILLed), an operator's command in-process (the same code, without the
interpreter's start-up)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from agentctl.cli import main as cli_main
from agentctl.cli import output
from tests.forkserver import run_agentctl

__all__ = ["cli", "result_json"]


def cli(
    args: list[str], cwd: Path, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A fault-injected roll runs as a real subprocess (it must be SIGKILLed); the
    operator's commands run in-process, which is the same code without the start-up cost."""
    argv = ["--output", "json", *args]
    if env_extra:
        env = {k: v for k, v in os.environ.items() if k != "AGENTCTL_FAULT"}
        env.update(env_extra)
        # Its own process (forked from a server that imported agentctl once), so the
        # SIGKILL ends only the command.
        return run_agentctl(argv, cwd=cwd, env=env, timeout=120)
    stdout, stderr = io.StringIO(), io.StringIO()
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = cli_main.main(argv)
    finally:
        os.chdir(previous)
        output.set_current(output.Output())
    return subprocess.CompletedProcess(argv, code, stdout.getvalue(), stderr.getvalue())


def result_json(result: subprocess.CompletedProcess[str]) -> Any:
    text = result.stdout if result.stdout.strip() else result.stderr
    return json.loads(text)
