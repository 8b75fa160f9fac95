"""The workflow registry: workflows by name from the project's workflow directories.

``agentctl roll review`` finds ``review`` in the project's workflow directories instead of
needing a path. The directories, in order of precedence:

1. ``$AGENTCTL_WORKFLOWS_PATH``: directories separated by ``os.pathsep`` (``:`` on POSIX);
2. ``workflows.paths`` in the project config file ``.agentctl/config.yaml``;
3. ``.agentctl/workflows`` and ``workflows``.

Relative directories are taken from the project directory (the current directory). Each
workflow file directly inside one of them (``.yaml``, ``.yml``, ``.json``, ``.py``) answers
to its ``metadata.name`` and to its file stem (``review.workflow.yaml`` answers to
``review.workflow`` and ``review``). A name that more than one file answers to is
ambiguous (exit 2, listing the files); a name no file answers to gets the near names.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from pydantic import Field
from pydantic.dataclasses import dataclass

from agentctl.errors import UsageError
from agentctl.typed_records import CAMEL, CamelRecord, keys_in_order

__all__ = [
    "CONFIG_FILE",
    "DEFAULT_DIRS",
    "ENV_VAR",
    "WORKFLOW_SUFFIXES",
    "WorkflowEntry",
    "discover",
    "find_workflow",
    "looks_like_path",
    "resolve_workflow",
    "search_path",
]

ENV_VAR = "AGENTCTL_WORKFLOWS_PATH"
CONFIG_FILE = Path(".agentctl") / "config.yaml"
DEFAULT_DIRS = (Path(".agentctl") / "workflows", Path("workflows"))
WORKFLOW_SUFFIXES = (".yaml", ".yml", ".json", ".py")
_MAX_CONFIG_BYTES = 1 << 20


@dataclass(frozen=True, slots=True, config=CAMEL)
class WorkflowEntry(CamelRecord):
    """One workflow file of the registry, loaded and compiled (``workflows list`` shows
    it without the stems)."""

    name: str
    stems: Annotated[tuple[str, ...], Field(exclude=True)]
    file: Path
    description: str | None
    digest: str | None
    problem: str | None

    def answers_to(self, name: str) -> bool:
        return name == self.name or name in self.stems

    _order = keys_in_order("name", "description")


def _stems(file: Path) -> tuple[str, ...]:
    stem = file.name[: -len(file.suffix)] if file.suffix else file.name
    short = stem.removesuffix(".workflow")
    return (stem,) if short == stem or not short else (stem, short)


def looks_like_path(argument: str) -> bool:
    """A workflow argument is a path when it names an existing file, holds a directory
    separator or ends with a workflow suffix; anything else is a registry name."""
    if os.sep in argument or (os.altsep and os.altsep in argument) or "/" in argument:
        return True
    if argument.lower().endswith(WORKFLOW_SUFFIXES):
        return True
    return Path(argument).is_file()


def _config_paths(project: Path) -> list[str] | None:
    config = project / CONFIG_FILE
    if not config.is_file():
        return None
    import yaml

    try:
        if config.stat().st_size > _MAX_CONFIG_BYTES:
            raise UsageError(f"project config {config} is larger than 1 MiB")
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UsageError(
            f"cannot read project config {config}: {exc}",
            code="config.invalid",
            hint=f"fix {config} (YAML with `workflows: {{paths: [DIR, ...]}}`) or remove it",
        ) from exc
    if data is None:
        return None
    section = data.get("workflows") if isinstance(data, Mapping) else None
    if section is None and isinstance(data, Mapping):
        return None
    paths = section.get("paths") if isinstance(section, Mapping) else None
    if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
        raise UsageError(
            f"{config}: workflows.paths must be a list of directory names",
            code="config.invalid",
            hint="write for example `workflows: {paths: [workflows, ops/workflows]}`",
        )
    return paths


def search_path(
    project: Path | None = None, environ: Mapping[str, str] | None = None
) -> list[Path]:
    """The workflow directories, in precedence order (existing or not)."""
    project = (project or Path.cwd()).resolve()
    env = os.environ if environ is None else environ
    raw = env.get(ENV_VAR)
    chosen: list[str] | list[Path]
    if raw:
        chosen = [part for part in raw.split(os.pathsep) if part]
    else:
        chosen = _config_paths(project) or list(DEFAULT_DIRS)
    out: list[Path] = []
    for entry in chosen:
        path = Path(entry).expanduser()
        path = path if path.is_absolute() else project / path
        if path not in out:
            out.append(path)
    return out


def _entry(file: Path, *, compile_plan: bool = True) -> WorkflowEntry:
    from agentctl.compiler import compile_workflow
    from agentctl.spec import load_workflow

    stems = _stems(file)
    loaded = load_workflow(file)
    if not loaded.ok or loaded.document is None:
        errors = [d for d in loaded.diagnostics if d.is_error]
        first = errors[0].message if errors else "it does not load"
        return WorkflowEntry(stems[0], stems, file, None, None, f"invalid: {first}")
    metadata = loaded.document.metadata
    if not compile_plan:  # resolving a name needs the name only
        return WorkflowEntry(metadata.name, stems, file, metadata.description, None, None)
    compiled = compile_workflow(loaded.document, source=loaded.source)
    problem = None
    digest = None
    if compiled.ok and compiled.plan is not None:
        digest = compiled.plan.workflow_digest
    else:
        errors = [d for d in compiled.diagnostics if d.is_error]
        problem = "does not compile: " + (errors[0].message if errors else "see agentctl check")
    return WorkflowEntry(metadata.name, stems, file, metadata.description, digest, problem)


def discover(
    project: Path | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    compile_plan: bool = True,
) -> list[WorkflowEntry]:
    """Every workflow file of the registry, directories in order, files sorted by name;
    ``compile_plan=False`` skips compiling (no digest, no compile problem)."""
    entries: list[WorkflowEntry] = []
    seen: set[Path] = set()
    for directory in search_path(project, environ):
        if not directory.is_dir():
            continue
        for file in sorted(directory.iterdir()):
            if not file.is_file() or file.suffix.lower() not in WORKFLOW_SUFFIXES:
                continue
            resolved = file.resolve()
            if resolved in seen:
                continue
            seen.add(resolved)
            entries.append(_entry(resolved, compile_plan=compile_plan))
    return entries


def find_workflow(
    name: str, project: Path | None = None, environ: Mapping[str, str] | None = None
) -> WorkflowEntry:
    """The one registry entry answering to ``name`` (compiled, with its digest); exit 2
    when none or several do."""
    return _entry(_match(name, project, environ).file)


def _match(name: str, project: Path | None, environ: Mapping[str, str] | None) -> WorkflowEntry:
    entries = discover(project, environ, compile_plan=False)
    matches = [entry for entry in entries if entry.answers_to(name)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        listing = "; ".join(f"{m.name} ({m.file})" for m in matches)
        raise UsageError(
            f"workflow name {name!r} is ambiguous: {len(matches)} files answer to it: {listing}",
            code="workflow.ambiguous",
            hint="pass the file path instead of the name, or rename one of the workflows",
        )
    known = sorted({n for e in entries for n in (e.name, *e.stems)})
    near = difflib.get_close_matches(name, known, n=5, cutoff=0.7)
    dirs = ", ".join(str(d) for d in search_path(project, environ))
    message = f"no workflow named {name!r} in the workflow directories ({dirs})"
    if near:
        hint = "did you mean: " + ", ".join(near) + "? (`agentctl workflows list` shows all)"
    elif known:
        hint = "`agentctl workflows list` shows the registered workflows"
    else:
        hint = (
            "put workflow files in workflows/ or .agentctl/workflows/, set "
            f"{ENV_VAR}, or pass a file path"
        )
    raise UsageError(message, code="workflow.not_found", hint=hint)


def resolve_workflow(
    argument: str, project: Path | None = None, environ: Mapping[str, str] | None = None
) -> str:
    """The workflow file for a command argument: a path as given, a name from the registry."""
    if looks_like_path(argument):
        return argument
    return str(_match(argument, project, environ).file)
