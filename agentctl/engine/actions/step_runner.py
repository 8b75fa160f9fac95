"""The child side of a ``python.function`` step (docs/python-steps.md).

This file is the program the step's interpreter runs (its text is passed with ``-c``), so
it imports nothing from agentctl: it must work under any interpreter the step names, in
a sandbox or a container. It reads one line of JSON on stdin — ``{function, input, root,
path}`` — imports the function, calls ``fn(ctx, input)`` and writes its last word on its
stdout as one line: ``{"return": value}`` or ``{"raise": {...}}``.

Every ``ctx`` operation is one request line ``{"op": NAME, "args": {...}}`` on stdout,
answered by one line on stdin: ``{"result": value}`` or ``{"error": {code, message,
details}}`` (raised in the function as :class:`StepError`). The owner performs the
operation as an effect of the task; this side never touches the outside world for it.
The function's own ``print`` output goes to stderr: stdout is the conversation's.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import IO, Any

__all__ = ["Context", "StepError", "main"]


class StepError(Exception):
    """An operation the owner performed and that failed (a non-zero exit, a missing file,
    a refused call); ``code`` is agentctl's error code."""

    def __init__(self, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


class Context:
    """The step context: every outside call of a durable step goes through here."""

    def __init__(self, channel: IO[str], answers: IO[str]) -> None:
        self._channel = channel
        self._answers = answers

    def _ask_owner(self, op: str, **args: Any) -> Any:
        self._channel.write(json.dumps({"op": op, "args": args}, ensure_ascii=False) + "\n")
        self._channel.flush()
        line = self._answers.readline()
        if not line:
            raise SystemExit(0)  # the owner stopped the step (a park, a stop)
        reply = json.loads(line)
        if "error" in reply:
            error = reply["error"]
            raise StepError(str(error["code"]), str(error["message"]), error.get("details"))
        return reply["result"]

    def shell(self, command: str, args: Sequence[str] = (), *, timeout: float | None = None) -> Any:
        """Run ``command`` with ``args`` (no shell) as ``builtin.shell.exec`` would: its
        ``{exitCode, stdout, stderr}``; a non-zero exit raises :class:`StepError`."""
        return self._ask_owner(
            "shell", command=command, args=[str(arg) for arg in args], timeout=timeout
        )

    def read(self, path: str) -> str:
        """The text of a workspace file."""
        return str(self._ask_owner("read", path=path))

    def write(self, path: str, text: str) -> Any:
        """Write ``text`` to a workspace file (under ``policy.writableRoots``)."""
        return self._ask_owner("write", path=path, text=text)

    def call(self, action: str, input: Any = None) -> Any:
        """Run declared action ``action`` (an MCP call, an A2A delegation, an extension …)
        with ``input`` as its ``with``; its output."""
        return self._ask_owner("call", action=action, input=input)

    def model(self, agent: str, prompt: str, **input: Any) -> Any:
        """Ask declared agent ``agent``: its output (``text``, ``structured`` …)."""
        return self._ask_owner("model", agent=agent, input={"prompt": prompt, **input})

    def ask(self, prompt: str, choices: Sequence[Any] | None = None) -> Any:
        """Ask a person; the run parks until ``agentctl approvals answer``. The answer."""
        return self._ask_owner(
            "ask", prompt=prompt, choices=None if choices is None else list(choices)
        )

    def now(self) -> datetime:
        """The time, recorded: a re-run sees the first run's value."""
        return datetime.fromisoformat(str(self._ask_owner("now")))

    def uuid(self) -> str:
        """A random UUID, recorded: a re-run sees the first run's value."""
        return str(self._ask_owner("uuid"))


def _load(function: str, root: str, path: Sequence[str]) -> Callable[..., Any]:
    where, _, name = function.partition(":")
    for entry in reversed([root, *path]):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    if where.endswith(".py"):
        file = os.path.join(root, where)
        module_name = "_agentctl_step_" + os.path.splitext(os.path.basename(where))[0]
        spec = importlib.util.spec_from_file_location(module_name, file)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {file}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    target: Any = module
    for part in name.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"{function} is not callable")
    # A step declared with @workflow.step is wrapped; the plain function is what runs.
    return getattr(target, "__wrapped_step__", target)  # type: ignore[no-any-return]


def main() -> int:
    # Nothing cached next to the user's modules: an edit is always what the next run sees.
    sys.dont_write_bytecode = True
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the function's prints, and its children's, go to stderr
    sys.stdout = sys.stderr
    answers = sys.stdin
    start = json.loads(answers.readline())
    ctx = Context(channel, answers)
    try:
        function = _load(str(start["function"]), str(start["root"]), start.get("path") or [])
        value = function(ctx, start.get("input"))
        last = {"return": value}
        text = json.dumps(last, ensure_ascii=False, allow_nan=False)
    except StepError as error:
        text = json.dumps(
            {
                "raise": {
                    "type": "StepError",
                    "code": error.code,
                    "message": error.message,
                    "details": error.details,
                }
            },
            default=str,
        )
    except (TypeError, ValueError) as error:
        if "last" in locals():
            text = json.dumps(
                {"raise": {"type": "OutputError", "message": f"return value: {error}"}}
            )
        else:
            text = _raised(error)
    except BaseException as error:  # noqa: BLE001 - reported to the owner, never a crash
        if isinstance(error, SystemExit) and error.code in (0, None) and "start" in locals():
            return 0
        text = _raised(error)
    channel.write(text + "\n")
    channel.flush()
    return 0


def _raised(error: BaseException) -> str:
    return json.dumps(
        {
            "raise": {
                "type": type(error).__name__,
                "message": str(error),
                "traceback": "".join(traceback.format_exception(error))[-4000:],
            }
        }
    )


if __name__ == "__main__":
    sys.exit(main())
