"""Shared helpers for the compiler tests: YAML text in, compile result out."""

from __future__ import annotations

import textwrap
from typing import Any

from agentctl.compiler import CompileResult, CompileSettings, compile_workflow
from agentctl.diagnostics import Diagnostic
from agentctl.spec.loader import parse_workflow_text

HEADER = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata:
  name: test
spec:
"""


def compile_text(
    text: str, settings: CompileSettings | None = None, *, dedent: bool = True
) -> CompileResult:
    """Compile a whole YAML document; fails the test if the document does not even load."""
    body = textwrap.dedent(text) if dedent else text
    loaded = parse_workflow_text(body, "wf.yaml")
    assert loaded.document is not None, [d.to_json() for d in loaded.diagnostics]
    return compile_workflow(
        loaded.document, source=loaded.source, settings=settings or CompileSettings()
    )


def compile_spec(spec: str, settings: CompileSettings | None = None) -> CompileResult:
    """Compile ``spec:`` contents (indented by the helper under the standard header)."""
    return compile_text(
        HEADER + textwrap.indent(textwrap.dedent(spec), "  "), settings, dedent=False
    )


def only(result: CompileResult, code: str) -> Diagnostic:
    """The single diagnostic with ``code``; fails with the full list otherwise."""
    found = [d for d in result.diagnostics if d.code == code]
    assert len(found) == 1, [d.to_json() for d in result.diagnostics]
    return found[0]


def line_of(text: str, needle: str, occurrence: int = 1) -> int:
    """1-based line of the ``occurrence``-th line containing ``needle`` in the spec body."""
    lines = (HEADER + textwrap.indent(textwrap.dedent(text), "  ")).splitlines()
    seen = 0
    for number, line in enumerate(lines, start=1):
        if needle in line:
            seen += 1
            if seen == occurrence:
                return number
    raise AssertionError(f"{needle!r} not in document")


def plan_json(result: CompileResult) -> dict[str, Any]:
    assert result.plan is not None, [d.to_json() for d in result.diagnostics]
    return result.plan.to_json()
