"""Load a workflow defined in Python (a ``.py`` file).

Loading a ``.py`` definition **executes it**: that is the point of writing a workflow in
Python, and the same trust applies as to any script you run. The module must define either
a module-level ``workflow`` (a :class:`~agentctl.spec.python_api.WorkflowBuilder`, a built
:class:`~agentctl.spec.Workflow` or a mapping in the YAML shape) or a ``build()`` function
returning one of those. Whatever goes wrong while running it is reported as a
``python_definition`` diagnostic naming the file and line, never as a traceback; an invalid
document reports the usual ``schema_violation`` diagnostics.
"""

from __future__ import annotations

import hashlib
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from agentctl.diagnostics import Diagnostic
from agentctl.errors import Finding, UsageError, ValidationError
from agentctl.input_files import read_input_bytes
from agentctl.spec.document import Workflow
from agentctl.spec.model_errors import describe
from agentctl.spec.python_api import WorkflowBuilder
from agentctl.spec.result import MAX_DOCUMENT_BYTES, LoadResult, unreadable_file
from agentctl.spec.source_map import SourceMap
from agentctl.spec.validate import validate_document

__all__ = ["PYTHON_DEFINITION", "load_python_definition"]

PYTHON_DEFINITION = "python_definition"
"""Diagnostic code for a Python definition that fails to run or defines no workflow."""


def load_python_definition(file: Path, name: str) -> LoadResult:
    """Run ``file`` and validate the workflow it defines."""
    try:
        source_text = read_input_bytes(file, "workflow file", limit=MAX_DOCUMENT_BYTES)
    except UsageError as exc:
        # Refused by the one reader of named files, worded as for a YAML workflow file.
        return LoadResult(name, None, [unreadable_file(exc, name)], SourceMap(name), None)
    real = os.path.realpath(file)
    module_name = "_agentctl_workflow_" + hashlib.sha256(real.encode()).hexdigest()[:16]
    module = ModuleType(module_name)
    module.__file__ = str(file)
    # Compiled here rather than imported, so nothing is cached or written next to the file
    # and a definition edited twice within one second is never read from a stale cache.
    sys.modules[module_name] = module
    try:
        code = compile(source_text, str(file), "exec", dont_inherit=True)
        exec(code, module.__dict__)
        target = _definition(module)
    except ValidationError as exc:
        return LoadResult(name, None, _refile(exc.diagnostics, name), SourceMap(name), None)
    except (Exception, SystemExit) as exc:
        return _fail(name, _describe_exception(exc), _line_in(exc, real))
    finally:
        sys.modules.pop(module_name, None)
    if target is None:
        return _fail(
            name,
            f"{name} defines neither a module-level `workflow` nor a `build()` function",
            None,
            help_text="end the file with `workflow = WorkflowBuilder(...)...` or `def build():`",
        )
    return _validated(target, name, real)


def _definition(module: ModuleType) -> Any:
    build = getattr(module, "build", None)
    if callable(build):
        return build()
    return getattr(module, "workflow", None)


def _validated(target: Any, name: str, real: str) -> LoadResult:
    if isinstance(target, Workflow):
        raw = target.model_dump(by_alias=True)
        return LoadResult(name, target, [], SourceMap(name), raw)
    if isinstance(target, WorkflowBuilder):
        raw = target.to_document()
        located = target.source_map(real)
        source = SourceMap(name, located.positions)
    elif isinstance(target, Mapping):
        raw = dict(target)
        source = SourceMap(name)
    else:
        return _fail(
            name,
            "`workflow` must be a WorkflowBuilder, a Workflow or a mapping, "
            f"got {type(target).__name__}",
            None,
        )
    document, diagnostics = validate_document(raw, source)
    return LoadResult(name, document, diagnostics, source, raw)


def _refile(diagnostics: Sequence[Finding], name: str) -> list[Diagnostic]:
    """Diagnostics from ``build()`` inside the module, attributed to the file as given."""
    return [
        Diagnostic(
            code=d.code,
            message=d.message,
            severity=d.severity,
            file=name,
            line=d.line,
            column=d.column,
            path=d.path,
            help=d.help,
        )
        for d in diagnostics
    ] or [Diagnostic(code="schema_violation", message="the workflow is invalid", file=name)]


def _describe_exception(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg}"
    if isinstance(exc, SystemExit):
        return f"the definition called sys.exit({describe(exc.code)})"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _line_in(exc: BaseException, real: str) -> tuple[int, int | None] | None:
    """The deepest line of ``real`` in the exception's traceback (or its syntax error)."""
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        if os.path.realpath(exc.filename) == real:
            return exc.lineno, exc.offset
    found: tuple[int, int | None] | None = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.lineno is not None and os.path.realpath(frame.filename) == real:
            found = (frame.lineno, None)
    return found


def _fail(
    name: str,
    message: str,
    where: tuple[int, int | None] | None,
    help_text: str | None = None,
) -> LoadResult:
    line, column = where if where is not None else (None, None)
    diagnostic = Diagnostic(
        code=PYTHON_DEFINITION,
        message=message,
        file=name,
        line=line,
        column=column,
        help=help_text,
    )
    return LoadResult(name, None, [diagnostic], SourceMap(name), None)
