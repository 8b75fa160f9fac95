"""Where a ``python.function`` step's code comes from, checked when a workflow is loaded
(docs/python-steps.md, "Where a function comes from" and "Changing a function's code").

A step's process imports its function from the workflow file's folder, then the folders of
``spec.python.path`` (relative to that folder), then its interpreter's own path. Here,
before anything compiles:

- every ``spec.python.path`` folder must exist;
- every function's module must be found on that import path — a file named
  ``file.py:callable`` under the workflow's folder, a ``module:callable`` in one of the
  folders or, when the step runs on agentctl's own interpreter, installed there — and, on
  that interpreter, must parse;
- an action without ``sourceDigest`` gets one: the digest of the source files importing
  its module runs that lie in those folders (each package's ``__init__.py`` on the way
  and the module itself), so a changed module is a changed step and ``repair`` re-runs
  it. A module installed elsewhere is the environment's, not the workflow's: it is not
  hashed.

Only files are read here; no user code runs. Problems come back as located diagnostics
naming the field and the tasks that use the action.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import importlib.machinery
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentctl.diagnostics import Diagnostic
from agentctl.digest import digest_json
from agentctl.spec.result import LoadResult
from agentctl.spec.source_map import SourceMap, diagnostic_at, join_path
from agentctl.spec.validate import validate_document

__all__ = ["import_folders", "with_function_sources"]

_KIND = "python.function"


def import_folders(workflow_dir: str | os.PathLike[str], path: Sequence[str]) -> list[Path]:
    """The folders a step's process imports from, in order: the workflow's folder, then
    each ``spec.python.path`` entry (relative entries start at the workflow's folder)."""
    root = Path(workflow_dir)
    return [root, *(root / entry for entry in path)]


def with_function_sources(loaded: LoadResult) -> LoadResult:
    """``loaded`` with its function steps' sources checked and digested (see the module
    docstring); a problem is an error diagnostic on the result."""
    document = loaded.document
    if document is None or not loaded.ok:
        return loaded
    actions = {n: a for n, a in document.spec.actions.items() if a.kind == _KIND}
    if not actions or not os.path.isfile(loaded.path):
        return loaded
    source = loaded.source
    root = Path(loaded.path).resolve().parent
    problems: list[Diagnostic] = []
    entries = list(document.spec.python.path)
    users = _users(document.model_dump(mode="json", by_alias=True)["spec"])
    for index, entry in enumerate(entries):
        folder = root / entry
        if not folder.is_dir():
            problems.append(
                diagnostic_at(
                    "missing_reference",
                    f"spec.python.path entry `{entry}` is not a folder ({folder} "
                    f"{'is a file' if folder.exists() else 'does not exist'}); the function "
                    f"steps of {_named(users, actions)} import from it",
                    f"spec.python.path[{index}]",
                    source,
                    help="create the folder or correct the entry (relative entries start at "
                    "the workflow file's folder)",
                )
            )
    if problems:
        return dataclasses.replace(loaded, diagnostics=[*loaded.diagnostics, *problems])
    folders = import_folders(root, entries)
    digests: dict[str, str] = {}
    for name, action in actions.items():
        found = _Found(name, str(action.function), users.get(name, []), source)
        files = found.files(folders, root, own_interpreter=action.python is None)
        if found.problem is not None:
            problems.append(found.problem)
        elif action.source_digest is None and files:
            digests[name] = _digest(files)
    if problems:
        return dataclasses.replace(loaded, diagnostics=[*loaded.diagnostics, *problems])
    if not digests:
        return loaded
    data = document.model_dump(mode="json", by_alias=True, exclude_unset=True)
    for name, digest in digests.items():
        data["spec"]["actions"][name]["sourceDigest"] = digest
    checked, invalid = validate_document(data, source or SourceMap(loaded.path))
    return dataclasses.replace(
        loaded, document=checked, diagnostics=[*loaded.diagnostics, *invalid]
    )


def _users(spec: Mapping[str, Any]) -> dict[str, list[str]]:
    """Action name -> ids of the tasks (and sub-workflow tasks) that use it."""
    found: dict[str, list[str]] = {}

    def walk(tasks: Any, prefix: str) -> None:
        for task in tasks or ():
            uses = str(task.get("uses") or "")
            if uses.startswith("action:"):
                found.setdefault(uses.removeprefix("action:"), []).append(prefix + task["id"])

    walk(spec.get("tasks"), "")
    for sub_name, sub in (spec.get("subworkflows") or {}).items():
        walk(sub.get("tasks"), f"{sub_name}/")
    return found


def _named(users: Mapping[str, list[str]], actions: Mapping[str, Any]) -> str:
    tasks = sorted({task for name in actions for task in users.get(name, [])})
    named, what = (tasks, "task") if tasks else (sorted(actions), "action")
    return f"{what}{'s' if len(named) > 1 else ''} {', '.join(named)}"


def _digest(files: Sequence[tuple[str, Path]]) -> str:
    """One digest over each file's name on the import path and its bytes."""
    return digest_json(
        [[name, hashlib.sha256(file.read_bytes()).hexdigest()] for name, file in files]
    )


class _Found:
    """Finding one action's module without importing it (no user code runs here)."""

    def __init__(
        self, action: str, function: str, tasks: list[str], source: SourceMap | None
    ) -> None:
        self.action = action
        self.function = function
        self.tasks = tasks
        self.source = source
        self.problem: Diagnostic | None = None

    def _fail(self, code: str, message: str, help: str) -> None:
        used = f"task {', '.join(self.tasks)}" if self.tasks else "no task yet"
        self.problem = diagnostic_at(
            code,
            f"action {self.action} (used by {used}): {message}",
            join_path(join_path(join_path("spec", "actions"), self.action), "function"),
            self.source,
            help=help,
        )

    def files(
        self, folders: Sequence[Path], root: Path, *, own_interpreter: bool
    ) -> list[tuple[str, Path]]:
        """The workflow's source files importing the module runs, in import order; empty
        for a module installed elsewhere (or, on another interpreter, not found here)."""
        where = self.function.partition(":")[0]
        if where.endswith(".py"):
            file = root / where
            if not file.is_file():
                self._fail(
                    "missing_reference",
                    f"`function: {self.function}` names {file}, which does not exist",
                    "create the file or correct `function` (a file is named relative to the "
                    "workflow file's folder)",
                )
                return []
            return self._parsed([(where, file)], own_interpreter)
        files = _module_files(where, folders)
        if files is None:
            if own_interpreter and not _installed(where):
                self._fail(
                    "missing_reference",
                    f"module `{where}` of `function: {self.function}` is not found in "
                    f"{', '.join(str(f) for f in folders)} or among the installed modules",
                    "correct `function`, or add the module's folder to `spec.python.path` "
                    "(relative to the workflow file's folder)",
                )
            return []
        return self._parsed(files, own_interpreter)

    def _parsed(
        self, files: list[tuple[str, Path]], own_interpreter: bool
    ) -> list[tuple[str, Path]]:
        if not own_interpreter:
            return files  # another interpreter may read syntax this one does not
        for _, file in files:
            try:
                ast.parse(file.read_bytes(), filename=str(file))
            except SyntaxError as error:
                self._fail(
                    "schema_violation",
                    f"{file} does not parse (line {error.lineno}: {error.msg}), so "
                    f"`{self.function}` cannot be imported",
                    "fix the syntax error",
                )
                return []
            except ValueError as error:  # NUL bytes
                self._fail("schema_violation", f"{file} is not Python source: {error}", "")
                return []
        return files


def _module_files(name: str, folders: Sequence[Path]) -> list[tuple[str, Path]] | None:
    """The files importing dotted module ``name`` from ``folders`` runs, or None when its
    first part is in none of them (it may be installed elsewhere).

    Found the way Python's path finder looks, by hand: ``part.py``, a package
    ``part/__init__.py``, or a namespace folder ``part/`` (which runs nothing)."""
    parts = name.split(".")
    locations = [Path(folder) for folder in folders]
    files: list[tuple[str, Path]] = []
    for depth, part in enumerate(parts):
        dotted = ".".join(parts[: depth + 1])
        last = depth == len(parts) - 1
        found: Path | None = None
        namespace: list[Path] = []
        for location in locations:
            package = location / part
            if (package / "__init__.py").is_file():
                found = package / "__init__.py"
                break
            if (location / f"{part}.py").is_file():
                found = location / f"{part}.py"
                break
            if package.is_dir():
                namespace.append(package)
        if found is not None:
            files.append((dotted, found))
            if last:
                return files
            locations = [found.parent] if found.name == "__init__.py" else []
            if not locations:
                return None  # a module is not a package: let the import itself say so
        elif namespace:
            locations = namespace  # a namespace package runs no file of its own
        else:
            return None
    return files


def _installed(name: str) -> bool:
    """Whether agentctl's own interpreter finds the first part of ``name`` (without
    importing it)."""
    top = name.split(".")[0]
    if top in sys.builtin_module_names or top in sys.stdlib_module_names:
        return True
    return importlib.machinery.PathFinder.find_spec(top, sys.path) is not None
