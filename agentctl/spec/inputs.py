"""The inputs a run is given on the command line: ``--input KEY=VALUE``, ``--inputs JSON``
and ``--inputs-file PATH``, merged over the workflow's declared defaults.

How ``--input KEY=VALUE`` reads its value (docs/running.md): an input whose
``spec.inputSchema`` property says ``type: string`` takes the text as given
(``version=3.10`` stays ``"3.10"``); any other input takes the value as JSON when it parses
(``3.10`` is the number 3.1, ``true`` a boolean) and as the text otherwise. With an
``inputSchema`` the merged inputs must satisfy it (exit 2, ``input.schema_violation``).

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

__all__ = [
    "check_input_schema",
    "merge_inputs",
    "parse_input_pairs",
    "read_as",
    "require_declared_inputs",
    "text_inputs",
]


def text_inputs(input_schema: Any) -> frozenset[str]:
    """The inputs ``spec.inputSchema`` declares ``type: string``: their ``--input`` value is
    the text as given."""
    if not isinstance(input_schema, Mapping):
        return frozenset()
    properties = input_schema.get("properties")
    if not isinstance(properties, Mapping):
        return frozenset()
    return frozenset(
        name
        for name, prop in properties.items()
        if isinstance(prop, Mapping) and prop.get("type") == "string"
    )


def read_as(name: str, raw: str, text: frozenset[str] = frozenset()) -> tuple[Any, str]:
    """One ``--input`` value and how it was read: ``text (declared string)``, ``json`` or
    ``text (not JSON)``."""
    if name in text:
        return raw, "text (declared string)"
    try:
        return parse_json_text(raw), "json"
    except ValueError:
        return raw, "text (not JSON)"  # not JSON agentctl accepts (NaN, 1e999 ...)


def parse_input_pairs(pairs: Sequence[str], text: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``KEY=VALUE`` overrides: an input in ``text`` (declared ``type: string``) takes the
    text as given; any other the value parsed as JSON, else the text (docs/running.md)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UsageError(
                f"--input {pair!r} is not KEY=VALUE",
                hint="write --input name=value (the value is parsed as JSON when it can be)",
            )
        out[key] = read_as(key, raw, text)[0]
    return out


def check_input_schema(input_schema: Any, inputs: Mapping[str, Any]) -> None:
    """Refuse (exit 2) merged inputs that do not satisfy ``spec.inputSchema``."""
    if input_schema is None:
        return
    from agentctl.json_schemas import compile_schema, first_error

    mismatch = first_error(compile_schema(input_schema, "spec.inputSchema"), dict(inputs))
    if mismatch is not None:
        raise UsageError(
            f"the run's inputs do not satisfy spec.inputSchema at {mismatch.where}: "
            f"{mismatch.message}",
            code="input.schema_violation",
            hint="fix the --input/--inputs value, or the default in spec.inputs",
        )


def merge_inputs(
    defaults: Mapping[str, Any],
    inputs_json: str | None = None,
    inputs_file: str | None = None,
    pairs: Sequence[str] = (),
    *,
    given: Mapping[str, Any] | None = None,
    check_declared: bool = True,
    input_schema: Any = None,
    check_schema: bool = True,
) -> dict[str, Any]:
    """Defaults, then an object from --inputs/--inputs-file (or ``given``, the Python
    API's mapping), then KEY=VALUE (docs/workflow-language.md). With ``check_declared``
    every given name must be one of ``defaults`` (the workflow's declared inputs);
    ``input_schema`` (``spec.inputSchema``) decides which values are text and, with
    ``check_schema``, must be satisfied by the result."""
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
    if given is not None:
        if not isinstance(given, Mapping):
            raise UsageError(f"inputs must be a mapping, got {type(given).__name__}")
        merged.update(given)
    merged.update(parse_input_pairs(pairs, text_inputs(input_schema)))
    if check_declared:
        require_declared_inputs(defaults, merged)
    if check_schema:
        check_input_schema(input_schema, merged)
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
