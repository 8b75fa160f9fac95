"""The inputs a run is given on the command line: ``--input KEY=VALUE``, ``--inputs JSON``
and ``--inputs-file PATH``, merged over the workflow's declared defaults.

Every command that takes ``--input`` (roll, plan, schedule add, monitor add) and the Python
API check the names with :func:`require_declared_inputs`, so an undeclared name is refused
the same way everywhere: exit 2, naming the declared inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentctl.errors import UsageError
from agentctl.input_files import read_input_text
from agentctl.json_text import parse_json_text

__all__ = ["merge_inputs", "parse_input_pairs", "require_declared_inputs"]


def parse_input_pairs(pairs: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` overrides: the value parsed as JSON, else taken as a string
    (docs/cli-reference.md)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UsageError(
                f"--input {pair!r} is not KEY=VALUE",
                hint="write --input name=value (the value is parsed as JSON when it can be)",
            )
        try:
            out[key] = parse_json_text(raw)
        except ValueError:
            out[key] = raw  # not JSON agentctl accepts (NaN, 1e999 ...): the text itself
    return out


def merge_inputs(
    defaults: Mapping[str, Any],
    inputs_json: str | None = None,
    inputs_file: str | None = None,
    pairs: Sequence[str] = (),
    *,
    check_declared: bool = True,
) -> dict[str, Any]:
    """Defaults, then an object from --inputs/--inputs-file, then KEY=VALUE
    (docs/workflow-language.md). With ``check_declared`` every given name must be one of
    ``defaults`` (the workflow's declared inputs)."""
    merged = dict(defaults)
    if inputs_json is not None and inputs_file is not None:
        raise UsageError("give --inputs or --inputs-file, not both")
    text, where = None, ""
    if inputs_json is not None:
        text, where = inputs_json, "--inputs"
    elif inputs_file is not None:
        path = Path(inputs_file)
        text = read_input_text(path, "inputs file")
        where = str(path)
    if text is not None:
        try:
            value = parse_json_text(text)
        except ValueError as exc:
            raise UsageError(
                f"{where} is not valid JSON: {exc}",
                hint='pass a JSON object such as \'{"team": "core"}\'',
            ) from exc
        if not isinstance(value, dict):
            raise UsageError(f"{where} must be a JSON object, got {type(value).__name__}")
        merged.update(value)
    merged.update(parse_input_pairs(pairs))
    if check_declared:
        require_declared_inputs(defaults, merged)
    return merged


def require_declared_inputs(declared: Mapping[str, Any], given: Mapping[str, Any]) -> None:
    """Refuse (exit 2) an input the workflow does not declare in ``spec.inputs``."""
    undeclared = sorted(set(given) - set(declared))
    if undeclared:
        names = ", ".join(sorted(declared)) or "none"
        raise UsageError(
            f"input {undeclared[0]!r} is not declared in the workflow's spec.inputs "
            f"(declared: {names})",
            code="input.undeclared",
            hint="check the name, or declare the input with a default in spec.inputs",
        )
