"""Read a workflow file (YAML, JSON or a Python definition) into a :class:`LoadResult`.

Nothing here raises for a bad document: every problem — unreadable file, oversized text,
YAML syntax, wrong version, schema violations — comes back as a located diagnostic, so the
CLI can print them all at once and exit 2.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from agentctl.diagnostics import Diagnostic
from agentctl.errors import UsageError
from agentctl.input_files import read_input_bytes
from agentctl.spec.document import API_VERSION
from agentctl.spec.model_errors import describe
from agentctl.spec.result import MAX_DOCUMENT_BYTES, LoadResult, unreadable_file
from agentctl.spec.source_map import SourceMap, diagnostic_at
from agentctl.spec.validate import validate_document
from agentctl.spec.yaml_source import (
    MAX_DEPTH,
    ParsedYaml,
    YamlProblem,
    parse_yaml,
    well_formed_text,
)

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "LoadResult",
    "SourceMap",
    "diagnostic_at",
    "load_workflow",
    "load_workflow_document",
    "parse_workflow_text",
    "require_workflow_file",
]

_RETIRED_VERSION = "agentctl.dev/v1alpha1"
_MIGRATION_HELP = (
    "`agentctl migrate FILE --write NEW.yaml` writes the translation for review; it does "
    "what you would by hand: add `apiVersion: agentctl.dev/v1` and `kind: Workflow`, move "
    "`playbook` to `metadata.name`, `modules` to `spec.actions` (`module:x` becomes "
    "`action:x`), `policy.approvalMode` to `spec.policy.approval` and working-memory "
    "`initial` to `spec.memory.working`; see docs/workflow-language.md"
)


def load_workflow(path: str | os.PathLike[str]) -> LoadResult:
    """Load ``path``: ``.py`` runs a Python definition, ``.json`` is JSON, anything else YAML.

    Declared packs are verified (integrity, lock file, trust) and their items added to the
    document here, so nothing can compile a workflow whose packs did not verify. Function
    steps' modules are found and digested here too (:mod:`agentctl.spec.function_sources`),
    so every run of a changed function has a changed fingerprint."""
    name = os.fspath(path)
    try:
        loaded = load_workflow_document(name)
        if loaded.document is not None and loaded.document.spec.packs:
            from agentctl.spec.packs import apply_packs

            loaded = apply_packs(loaded)
        if loaded.document is not None and loaded.document.spec.actions:
            from agentctl.spec.function_sources import with_function_sources

            loaded = with_function_sources(loaded)
        return loaded
    except Exception as exc:
        # The loader's contract is "diagnostics, never raise"; a bug must not crash the CLI.
        return _failure(name, _internal(exc, name))


def load_workflow_document(path: str | os.PathLike[str]) -> LoadResult:
    """The document as written, packs declared but not loaded (``agentctl pack lock``)."""
    name = os.fspath(path)
    file = Path(name)
    try:
        if file.suffix.lower() == ".py":
            from agentctl.spec.python_loader import load_python_definition

            return load_python_definition(file, name)
        return _load_data_file(file, name)
    except Exception as exc:
        # The loader's contract is "diagnostics, never raise"; a bug must not crash the CLI.
        return _failure(name, _internal(exc, name))


def require_workflow_file(workflow_path: str) -> None:
    """A missing workflow file is named as missing (exit 2), not as an invalid workflow."""
    if not Path(workflow_path).exists():
        raise UsageError(
            f"workflow file {workflow_path} does not exist",
            code="workflow.missing_file",
            hint=f"check the path (relative paths start at {Path.cwd()})",
        )


def parse_workflow_text(text: str, file: str = "<input>") -> LoadResult:
    """Parse YAML ``text`` (JSON is YAML too) as a workflow document named ``file``."""
    try:
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_DOCUMENT_BYTES:
            return _failure(file, _too_large(size, file))
        return _from_yaml_text(text, file)
    except Exception as exc:
        # The loader's contract is "diagnostics, never raise"; a bug must not crash the CLI.
        return _failure(file, _internal(exc, file))


def _load_data_file(file: Path, name: str) -> LoadResult:
    try:
        data = read_input_bytes(file, "workflow file", limit=MAX_DOCUMENT_BYTES)
    except UsageError as exc:
        return _failure(name, unreadable_file(exc, name))
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return _failure(
            name,
            Diagnostic(
                code="yaml_syntax",
                message=f"the file is not valid UTF-8 (byte {exc.start})",
                file=name,
                line=line,
            ),
        )
    if file.suffix.lower() == ".json":
        return _from_json_text(text, name)
    return _from_yaml_text(text, name)


def _from_yaml_text(text: str, file: str) -> LoadResult:
    try:
        parsed = parse_yaml(text)
    except YamlProblem as problem:
        return _failure(file, _problem_diagnostic(problem, file))
    return _from_parsed(parsed, file)


class _JsonProblem(Exception):
    pass


def _from_json_text(text: str, file: str) -> LoadResult:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in items:
            if key in result:
                raise _JsonProblem(f"duplicate key `{key}`")
            result[key] = value
        return result

    def constant(name: str) -> Any:
        raise _JsonProblem(f"`{name}` is not valid JSON")

    try:
        value = json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
        _check_json(value, 0)
    except json.JSONDecodeError as exc:
        return _failure(
            file,
            Diagnostic(
                code="yaml_syntax",
                message=f"invalid JSON: {exc.msg}",
                file=file,
                line=exc.lineno,
                column=exc.colno,
            ),
        )
    except (_JsonProblem, RecursionError, ValueError) as exc:
        message = str(exc) if isinstance(exc, _JsonProblem | ValueError) else "nesting too deep"
        return _failure(
            file, Diagnostic(code="yaml_syntax", message=f"invalid JSON: {message}", file=file)
        )
    # Positions come from reading the same text as YAML when that works (it usually does).
    try:
        located = parse_yaml(text)
        positions = located.positions if located.value == value else {"": (1, 1)}
    except YamlProblem:
        positions = {"": (1, 1)}
    return _from_parsed(ParsedYaml(value=value, positions=positions), file)


def _check_json(value: Any, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise _JsonProblem(f"the document is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, float) and not math.isfinite(value):
        raise _JsonProblem("numbers must be finite")
    if isinstance(value, str) and well_formed_text(value) != value:
        raise _JsonProblem("a string holds a UTF-16 surrogate that is not part of a pair")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_json(key, depth + 1)
            _check_json(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_json(item, depth + 1)


def _from_parsed(parsed: ParsedYaml, file: str) -> LoadResult:
    source = SourceMap(file, parsed.positions)
    raw = parsed.value
    if raw is None:
        diag = diagnostic_at("schema_violation", "the workflow document is empty", "", source)
        return LoadResult(file, None, [diag], source, None)
    if not isinstance(raw, dict):
        diag = diagnostic_at(
            "schema_violation",
            f"a workflow document must be a mapping, got {describe(raw)}",
            "",
            source,
            help="start the file with `apiVersion: agentctl.dev/v1` and `kind: Workflow`",
        )
        return LoadResult(file, None, [diag], source, None)
    envelope = _check_envelope(raw, source)
    if envelope is not None:
        return LoadResult(file, None, [envelope], source, raw)
    document, diagnostics = validate_document(raw, source, parsed.scalar_text)
    return LoadResult(file, document, diagnostics, source, raw)


def _check_envelope(raw: dict[str, Any], source: SourceMap) -> Diagnostic | None:
    """The version checks that decide whether the rest is worth validating."""
    if "apiVersion" not in raw:
        if "playbook" in raw:
            return diagnostic_at(
                "migration_required",
                "this is a legacy `playbook:` document without apiVersion; agentctl reads "
                "only agentctl.dev/v1 workflows and does not translate legacy files",
                "playbook",
                source,
                help=_MIGRATION_HELP,
            )
        return diagnostic_at(
            "schema_violation",
            "missing required field `apiVersion` at the document root",
            "apiVersion",
            source,
            help=f"add `apiVersion: {API_VERSION}` as the first line",
        )
    version = raw["apiVersion"]
    if version == API_VERSION:
        return None
    if version == _RETIRED_VERSION:
        message = f"apiVersion `{_RETIRED_VERSION}` is retired"
    else:
        message = f"unsupported apiVersion {describe(version)}"
    return diagnostic_at(
        "unsupported_version", message, "apiVersion", source, help=f"use {API_VERSION}"
    )


def _problem_diagnostic(problem: YamlProblem, file: str) -> Diagnostic:
    return Diagnostic(
        code=problem.code,
        message=problem.message,
        file=file,
        line=problem.line,
        column=problem.column,
    )


def _too_large(size: int, file: str) -> Diagnostic:
    return Diagnostic(
        code="schema_violation",
        message=(f"the workflow is {size} bytes; the limit is {MAX_DOCUMENT_BYTES} bytes (1 MiB)"),
        file=file,
        help="split large data into input files or sub-workflows",
    )


def _internal(exc: Exception, file: str) -> Diagnostic:
    return Diagnostic(
        code="schema_violation",
        message=f"the document could not be read: {type(exc).__name__}: {exc}",
        file=file,
    )


def _failure(file: str, diagnostic: Diagnostic) -> LoadResult:
    return LoadResult(file, None, [diagnostic], None, None)
