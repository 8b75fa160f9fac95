"""Reading variables: the workflow's ``vars``/``varsFiles`` and ``--var``/``--vars-file``.

:func:`load_variables` builds the :class:`~agentctl.spec.variables.VariableLayers` of one
invocation and returns every problem as a located diagnostic (file, line, path — or the
flag), never raising for bad input:

- a variables file is a UTF-8 YAML or JSON mapping with string keys, at most 1 MiB;
  duplicate keys, a list or scalar at the top, and the include keys (``varsFiles``,
  ``include``, ``includes``) are errors;
- a path a workflow names is relative to the workflow file's directory and must stay inside
  it (``..`` and symlinks that lead out are refused); ``--vars-file`` is relative to the
  current directory;
- ``--var KEY=JSON`` needs valid JSON after ``=`` (write a string as ``'env="staging"'``);
- the engine's binding names (``loopIndex``, ``loopPrevious``, ``foreachIndex``, ``matrix``,
  ``matrixIndex``) are refused in every layer;
- values from ``spec.vars``, files and flags are data: a ``${{`` in them is refused, since
  only a task's or agent's own ``vars`` are templates.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentctl.diagnostics import Diagnostic
from agentctl.errors import UsageError
from agentctl.input_files import read_input_bytes
from agentctl.json_text import parse_json_text
from agentctl.spec.result import MAX_DOCUMENT_BYTES, LoadResult
from agentctl.spec.source_map import SourceMap, diagnostic_at, join_path
from agentctl.spec.variables import (
    INCLUDE_KEYS,
    RESERVED_VARIABLES,
    Layer,
    Values,
    VarEntry,
    VariableLayers,
    VarSource,
)
from agentctl.spec.yaml_source import YamlProblem, parse_yaml

__all__ = [
    "COMMAND_LINE",
    "inline_layers",
    "load_variables",
    "template_paths",
    "variable_scopes",
]

COMMAND_LINE = "<command line>"
"""The ``file`` of a diagnostic about a flag."""

_RESERVED_HELP = (
    "loopIndex, loopPrevious, foreachIndex, matrix and matrixIndex are set by the engine "
    "for loops and fan-outs; rename the variable"
)
_DATA_HELP = (
    "variables from spec.vars, files and flags are data; put the template in the task's "
    "`vars` or `with` instead"
)


def template_paths(value: Any, path: str) -> Iterator[str]:
    """The paths of every string inside ``value`` that holds ``${{``."""
    if isinstance(value, str):
        if "${{" in value:
            yield path
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from template_paths(item, join_path(path, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from template_paths(item, join_path(path, index))


def _entries(
    values: Mapping[str, Any], layer: Layer, base: str, source: SourceMap | None
) -> Values:
    out: Values = {}
    for name, value in values.items():
        path = join_path(base, name)
        located = source.locate(path) if source is not None else None
        out[name] = VarEntry(
            value,
            VarSource(
                layer,
                file=source.file if source is not None else None,
                line=located[0] if located else None,
                column=located[1] if located else None,
                path=path,
            ),
        )
    return out


def _task_definitions(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for index, task in enumerate(spec.get("tasks") or ()):
        yield join_path("spec.tasks", index), task
    for name, definition in (spec.get("subworkflows") or {}).items():
        base = join_path(join_path("spec.subworkflows", name), "tasks")
        for index, task in enumerate(definition.get("tasks") or ()):
            yield join_path(base, index), task


def _agent_name(task: Mapping[str, Any]) -> str | None:
    uses = str(task.get("uses", ""))
    return uses[len("agent:") :] if uses.startswith("agent:") else None


def inline_layers(
    spec: Mapping[str, Any], source: SourceMap | None
) -> tuple[VariableLayers, list[Diagnostic]]:
    """The layers written in the document itself (``vars`` of spec, agents and tasks)."""
    layers = VariableLayers()
    problems: list[Diagnostic] = []

    def reserved(values: Mapping[str, Any], base: str, what: str) -> None:
        for name in sorted(set(values) & RESERVED_VARIABLES):
            problems.append(
                diagnostic_at(
                    "schema_violation",
                    f"{what} defines the reserved variable `{name}`",
                    join_path(base, name),
                    source,
                    help=_RESERVED_HELP,
                )
            )

    workflow_vars = spec.get("vars") or {}
    reserved(workflow_vars, "spec.vars", "spec.vars")
    for path in template_paths(workflow_vars, "spec.vars"):
        problems.append(
            diagnostic_at(
                "invalid_template",
                "spec.vars values are data and cannot hold a `${{ … }}` template",
                path,
                source,
                help=_DATA_HELP,
            )
        )
    layers.workflow = _entries(workflow_vars, "spec.vars", "spec.vars", source)
    for name, agent in (spec.get("agents") or {}).items():
        base = join_path(join_path("spec.agents", name), "vars")
        agent_vars = agent.get("vars") or {}
        reserved(agent_vars, base, f"agent `{name}`")
        if agent_vars:
            layers.agents[name] = _entries(agent_vars, "agent.vars", base, source)
    for path, task in _task_definitions(spec):
        task_vars = task.get("vars") or {}
        reserved(task_vars, join_path(path, "vars"), f"task `{task.get('id')}`")
        if task_vars:
            layers.tasks[path] = _entries(task_vars, "task.vars", join_path(path, "vars"), source)
    return layers, problems


class _Reader:
    def __init__(self, layers: VariableLayers) -> None:
        self.layers = layers
        self.problems: list[Diagnostic] = []

    def problem(
        self,
        code: str,
        message: str,
        file: str,
        *,
        line: int | None = None,
        column: int | None = None,
        path: str | None = None,
        help: str | None = None,
    ) -> None:
        self.problems.append(
            Diagnostic(
                code=code,
                message=message,
                file=file,
                line=line,
                column=column,
                path=path,
                help=help,
            )
        )

    def read_file(
        self,
        name: str,
        target: Path,
        layer: Layer,
        declared: tuple[SourceMap | None, str] | None,
        root: Path | None,
        label: str | None = None,
    ) -> Values:
        """One variables file as entries, or ``{}`` with its problems recorded."""
        where_file, where_path = declared if declared is not None else (None, None)

        def refuse(message: str, help: str) -> Values:
            if where_file is not None and where_path is not None:
                self.problems.append(
                    diagnostic_at("schema_violation", message, where_path, where_file, help)
                )
            else:
                self.problem(
                    "schema_violation",
                    message,
                    COMMAND_LINE,
                    path=f"--vars-file {name}",
                    help=help,
                )
            return {}

        if root is not None:
            try:
                resolved = target.resolve(strict=True)
            except (OSError, RuntimeError) as exc:
                reason = getattr(exc, "strerror", None) or str(exc)
                return refuse(
                    f"cannot read variables file {name}: {reason}",
                    "check the path; it is relative to the workflow file's directory",
                )
            if not resolved.is_relative_to(root):
                return refuse(
                    f"variables file {name} resolves outside the workflow's directory ({resolved})",
                    "keep variables files beside the workflow; a symlink may not lead out",
                )
            target = resolved
        try:
            data = read_input_bytes(
                target,
                "variables file",
                limit=MAX_DOCUMENT_BYTES,
                hint="name a YAML or JSON file (under 1 MiB) holding a mapping of variables",
            )
        except UsageError as exc:
            return refuse(exc.message.replace(str(target), name, 1), exc.hint or "")
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        file_label = label or os.fspath(name)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.problem(
                "yaml_syntax",
                f"variables file is not valid UTF-8 (byte {exc.start})",
                file_label,
                line=data[: exc.start].count(b"\n") + 1,
            )
            return {}
        try:
            parsed = parse_yaml(text)
        except YamlProblem as problem:
            self.problem(
                problem.code,
                problem.message,
                file_label,
                line=problem.line,
                column=problem.column,
            )
            return {}
        source = SourceMap(file_label, parsed.positions)
        value = parsed.value
        if not isinstance(value, dict):
            kind = "empty" if value is None else f"a {type(value).__name__}"
            self.problems.append(
                diagnostic_at(
                    "schema_violation",
                    f"a variables file must hold a mapping of names to values; this one is {kind}",
                    "",
                    source,
                    help="write one `name: value` line per variable",
                )
            )
            return {}
        ok = True
        for key in value:
            if key in INCLUDE_KEYS:
                self.problems.append(
                    diagnostic_at(
                        "schema_violation",
                        f"a variables file cannot include other files (`{key}`)",
                        join_path("", key),
                        source,
                        help="list every file in the workflow's varsFiles or pass several "
                        "--vars-file flags",
                    )
                )
                ok = False
            elif key in RESERVED_VARIABLES:
                self.problems.append(
                    diagnostic_at(
                        "schema_violation",
                        f"variables file defines the reserved variable `{key}`",
                        join_path("", key),
                        source,
                        help=_RESERVED_HELP,
                    )
                )
                ok = False
        for path in template_paths(value, ""):
            self.problems.append(
                diagnostic_at(
                    "invalid_template",
                    "values in a variables file are data and cannot hold a `${{ … }}` template",
                    path,
                    source,
                    help=_DATA_HELP,
                )
            )
            ok = False
        return _entries(value, layer, "", source) if ok else {}

    def declared_files(
        self,
        paths: Sequence[str],
        base_path: str,
        layer: Layer,
        directory: Path,
        source: SourceMap | None,
    ) -> Values:
        merged: Values = {}
        root = directory.resolve()
        # Named as the workflow file was named, so `explain` shows a path the user can open.
        beside = os.path.dirname(source.file) if source is not None else ""
        for index, name in enumerate(paths):
            declared = (source, join_path(base_path, index))
            label = os.path.join(beside, name)
            merged.update(self.read_file(name, directory / name, layer, declared, root, label))
        return merged

    def flag_pairs(self, pairs: Sequence[str]) -> Values:
        merged: Values = {}
        for pair in pairs:
            flag = f"--var {pair}"
            key, sep, raw = pair.partition("=")
            if not sep or not key:
                self.problem(
                    "schema_violation",
                    f"`{flag}` is not KEY=JSON",
                    COMMAND_LINE,
                    path=_shown(flag),
                    help="write --var name=JSON, e.g. --var replicas=3 or --var 'env=\"qa\"'",
                )
                continue
            try:
                value = parse_json_text(raw)
            except ValueError as exc:
                self.problem(
                    "schema_violation",
                    f"`{_shown(flag)}`: the value is not valid JSON ({getattr(exc, 'msg', exc)})",
                    COMMAND_LINE,
                    path=_shown(flag),
                    help=f"quote a string as JSON: --var '{key}=\"{raw}\"'",
                )
                continue
            if key in RESERVED_VARIABLES:
                self.problem(
                    "schema_violation",
                    f"`{flag}` sets the reserved variable `{key}`",
                    COMMAND_LINE,
                    path=_shown(flag),
                    help=_RESERVED_HELP,
                )
                continue
            found = next(template_paths(value, key), None)
            if found is not None:
                self.problem(
                    "invalid_template",
                    f"`{flag}`: variable values are data and cannot hold a `${{{{ … }}}}` template",
                    COMMAND_LINE,
                    path=_shown(flag),
                    help=_DATA_HELP,
                )
                continue
            merged[key] = VarEntry(value, VarSource("--var", flag=flag))
        return merged


def load_variables(
    loaded: LoadResult,
    *,
    vars_files: Sequence[str] = (),
    var_pairs: Sequence[str] = (),
    recorded: Mapping[str, Any] | None = None,
    recorded_from: str | None = None,
) -> tuple[VariableLayers, list[Diagnostic]]:
    """All eight layers for ``loaded`` (a valid document) and the problems found.

    ``recorded`` replaces layers 7 and 8 with the invocation values a source run was
    created with (retry and repair), so the new run sees exactly the values it saw.
    """
    assert loaded.document is not None
    spec = loaded.document.model_dump(mode="json", by_alias=True, exclude_unset=True)["spec"]
    # Problems with the inline layers are the compiler's to report (it checks them always).
    layers, _ = inline_layers(spec, loaded.source)
    reader = _Reader(layers)
    directory = Path(loaded.path).resolve().parent
    source = loaded.source
    layers.workflow_files = reader.declared_files(
        spec.get("varsFiles") or (), "spec.varsFiles", "spec.varsFiles", directory, source
    )
    for name, agent in (spec.get("agents") or {}).items():
        files = agent.get("varsFiles") or ()
        if files:
            base = join_path(join_path("spec.agents", name), "varsFiles")
            layers.agent_files[name] = reader.declared_files(
                files, base, "agent.varsFiles", directory, source
            )
    for path, task in _task_definitions(spec):
        files = task.get("varsFiles") or ()
        if files:
            if str(task.get("uses", "")).startswith("workflow:"):
                continue  # refused by the document model already
            layers.task_files[path] = reader.declared_files(
                files, join_path(path, "varsFiles"), "task.varsFiles", directory, source
            )
    if recorded is not None:
        label = f"{recorded_from} (recorded)" if recorded_from else "recorded with the run"
        layers.invocation = {
            name: VarEntry(value, VarSource("recorded", flag=label))
            for name, value in recorded.items()
        }
        return layers, reader.problems
    for name in vars_files:
        layers.invocation_files.update(
            reader.read_file(name, Path(name), "--vars-file", None, None)
        )
    layers.invocation = reader.flag_pairs(var_pairs)
    return layers, reader.problems


def variable_scopes(spec: Mapping[str, Any], layers: VariableLayers) -> list[dict[str, Any]]:
    """Each task definition's variables with their winning sources (for ``explain``).

    One entry per task as written (top-level and inside sub-workflow definitions); the
    children a foreach, matrix or loop expands to share it. Sub-workflow invocations have
    no variables of their own and are left out."""
    scopes: list[dict[str, Any]] = []
    for path, task in _task_definitions(spec):
        if str(task.get("uses", "")).startswith("workflow:"):
            continue
        agent = _agent_name(task)
        scope: dict[str, Any] = {"task": task.get("id"), "path": path}
        if agent is not None:
            scope["agent"] = agent
        scope["variables"] = [v.to_json() for v in layers.resolve(agent, path)]
        scopes.append(scope)
    return scopes


def _shown(flag: str) -> str:
    """A flag as a message shows it: a value thousands of characters long is cut short."""
    return flag if len(flag) <= 120 else flag[:100] + f"… ({len(flag)} characters)"
