"""Rendering for every command: the JSON envelopes of docs/user-guide.md and the human form.

- ``json``: exactly one document on stdout for success, one on stderr for an error.
- ``jsonl``: one compact envelope per progress event, then the final envelope.
- ``human``: a one-line outcome on stdout; progress, diagnostics and errors on stderr.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

from agentctl.errors import AgentctlError, Finding

__all__ = [
    "API_VERSION",
    "ColorMode",
    "Output",
    "OutputMode",
    "current",
    "set_current",
]

API_VERSION = "agentctl.dev/cli/v1"
OutputMode = Literal["human", "json", "jsonl"]
ColorMode = Literal["auto", "always", "never"]
OUTPUT_MODES: tuple[OutputMode, ...] = ("human", "json", "jsonl")
COLOR_MODES: tuple[ColorMode, ...] = ("auto", "always", "never")


def _dump(document: dict[str, Any], mode: OutputMode) -> str:
    if mode == "json":
        return json.dumps(document, indent=2, ensure_ascii=False, default=str)
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False, default=str)


@dataclass
class Output:
    mode: OutputMode = "human"
    color: ColorMode = "auto"
    verbose: bool = False
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    emitted: bool = False

    @property
    def machine(self) -> bool:
        return self.mode != "human"

    def use_color(self, stream: TextIO) -> bool:
        # An explicit --color wins; NO_COLOR (any value, even empty) turns off only auto.
        if self.color != "auto":
            return self.color == "always"
        if "NO_COLOR" in os.environ:
            return False
        return bool(getattr(stream, "isatty", lambda: False)())

    # -- success -------------------------------------------------------------------------

    def success(
        self,
        kind: str,
        data: Any,
        *,
        human: str | Callable[[], None] | None = None,
        diagnostics: Sequence[Finding] = (),
    ) -> None:
        """Print the final result of a command once, in the chosen mode."""
        self.emitted = True
        if self.machine:
            document = {
                "apiVersion": API_VERSION,
                "kind": kind,
                "ok": True,
                "data": data,
                "diagnostics": [d.to_json() for d in diagnostics],
            }
            print(_dump(document, self.mode), file=self.stdout, flush=True)
            return
        for diagnostic in diagnostics:
            self._human_diagnostic(diagnostic)
        if callable(human):
            human()
        elif human is not None:
            print(human, file=self.stdout, flush=True)
        if self.verbose:
            print(json.dumps(data, indent=2, ensure_ascii=False, default=str), file=self.stdout)

    def event(self, kind: str, data: Any, *, human: str | None = None) -> None:
        """A progress event: a line of JSON in ``jsonl`` mode, stderr text in human mode."""
        if self.mode == "jsonl":
            if isinstance(data, dict):  # when it was reported, UTC
                data = {**data, "at": datetime.now(UTC).isoformat()}
            document = {"apiVersion": API_VERSION, "kind": kind, "ok": True, "data": data}
            print(_dump(document, "jsonl"), file=self.stdout, flush=True)
        elif self.mode == "human" and human is not None:
            print(human, file=self.stderr, flush=True)

    # -- errors --------------------------------------------------------------------------

    def error(self, error: AgentctlError) -> None:
        self.failure(
            code=error.code,
            message=error.message,
            exit_code=error.exit_code,
            hint=error.hint,
            run_id=error.run_id,
            diagnostics=error.diagnostics,
        )

    def failure(
        self,
        *,
        code: str,
        message: str,
        exit_code: int,
        hint: str | None = None,
        run_id: str | None = None,
        diagnostics: Sequence[Finding] = (),
    ) -> None:
        self.emitted = True
        if self.machine:
            body: dict[str, Any] = {"code": code, "message": message, "exitCode": exit_code}
            if run_id:
                body["runId"] = run_id
            if hint:
                body["hint"] = hint
            document = {
                "apiVersion": API_VERSION,
                "kind": "Error",
                "ok": False,
                "error": body,
                "diagnostics": [d.to_json() for d in diagnostics],
            }
            print(_dump(document, self.mode), file=self.stderr, flush=True)
            return
        prefix = self._style("error:", "1;31")
        print(f"{prefix} {message}", file=self.stderr)
        for diagnostic in diagnostics:
            self._human_diagnostic(diagnostic)
        if hint:
            lines = hint.split("\n")
            print(f"  {self._style('help:', '1')} {lines[0]}", file=self.stderr)
            for line in lines[1:]:
                print(f"        {line}", file=self.stderr)
        self.stderr.flush()

    def warning(self, message: str) -> None:
        """A human-mode warning on stderr (machine modes keep stderr for the error)."""
        print(f"{self._style('warning:', '1;33')} {message}", file=self.stderr, flush=True)

    def _human_diagnostic(self, diagnostic: Finding) -> None:
        color = "1;31" if diagnostic.severity == "error" else "1;33"
        label = self._style(f"{diagnostic.severity}[{diagnostic.code}]", color)
        where = diagnostic.location()
        if diagnostic.path:
            where += f" ({diagnostic.path})"
        print(f"  {where}: {label} {diagnostic.message}", file=self.stderr)
        if diagnostic.help:
            print(f"    {self._style('help:', '1')} {diagnostic.help}", file=self.stderr)

    def _style(self, text: str, sgr: str) -> str:
        if not self.use_color(self.stderr):
            return text
        return f"\x1b[{sgr}m{text}\x1b[0m"


def next_lines(steps: Sequence[dict[str, str]]) -> str:
    """Suggested commands (``{command, why}``) as indented lines, one command per line so it
    can be copied whole."""
    return "".join(f"\n  next: {step['command']}  # {step['why']}" for step in steps)


_current = Output()


def current() -> Output:
    """The output settings of this invocation (set once by the entry point)."""
    return _current


def set_current(output: Output) -> None:
    global _current
    _current = output
