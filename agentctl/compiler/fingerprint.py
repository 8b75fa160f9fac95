"""Per-task fingerprints without re-serialising shared values 10,000 times.

``definitionFingerprint`` is ``sha256:`` + SHA-256 of the canonical JSON of the task record
(``PlanTask.definition_json()``). Canonical JSON of an object is ``{`` + the sorted
``"key":value`` pairs + ``}``, so the text can be assembled from the canonical JSON of each
field. Expanded children share their ``input``, ``compensate``, ``outputSchema`` (and
foreach children their ``needs``) by object identity, so those fragments are encoded once
and reused; only the child's id, bindings and vars are encoded per child. The bytes are
identical to ``agentctl.digest.canonical_json(task.definition_json())`` — a unit test
holds that equality.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from agentctl.compiler.task_parts import Expansion
from agentctl.digest import canonical_json, scalar_json, string_json

__all__ = ["Fingerprinter"]

# How a string is written: canonical JSON's own rule (agentctl.digest).
_string = string_json


class Fingerprinter:
    def __init__(self) -> None:
        self._memo: dict[int, tuple[Any, str]] = {}
        self._middles: dict[tuple[int, int, int, int, str, int, str], str] = {}

    def _shared(self, value: Any, to_json: Any = None) -> str:
        """Canonical JSON of ``value`` (converted by ``to_json``), memoised by identity."""
        cached = self._memo.get(id(value))
        if cached is not None and cached[0] is value:
            return cached[1]
        text = canonical_json(value if to_json is None else to_json(value))
        self._memo[id(value)] = (value, text)
        return text

    def contract(self, contract: Any) -> str:
        return _digest(self._shared(contract))

    def definition(self, fields: Mapping[str, Any], needs: list[str]) -> str:
        """Fingerprint of a task given its ``PlanTask`` constructor arguments (without the
        fingerprints); ``needs`` is the (possibly shared) list the task was built from."""
        expansion = fields["expansion"]
        guards = fields["route_guards"]
        when = fields["when"]
        artifacts = fields.get("artifacts")
        session = fields.get("session")
        text = (
            "{"
            + (f'"artifacts":{self._shared(artifacts, _artifacts_json)},' if artifacts else "")
            + f'"compensate":{self._compensate(fields["compensate"])}'
            f',"expansion":{"null" if expansion is None else self._expansion(expansion)}'
            f',"failure":{_string(fields["failure"])}'
            f',"id":{_string(fields["id"])}'
            f",{self._middle(fields, needs)}"
            f',"routeGuards":{self._guards(guards)}'
            + (f',"session":{canonical_json(session)}' if session else "")
            + f',"timeoutSeconds":{int(fields["timeout_seconds"])}'
            f',"uses":{self._shared(fields["uses"], lambda u: u.to_json())}'
            f',"vars":{self._object(fields["vars"])}'
            f',"when":{"null" if when is None else _string(when)}}}'
        )
        return _digest(text)

    def _compensate(self, compensate: Any) -> str:
        return "null" if compensate is None else self._shared(compensate, lambda c: c.to_json())

    def _guards(self, guards: Any) -> str:
        return canonical_json([g.to_json() for g in guards]) if guards else "[]"

    def _middle(self, fields: Mapping[str, Any], needs: list[str]) -> str:
        """``input`` … ``retry``: identical for the children of one source, so cached."""
        resolved = fields.get("resolved_definition") or ""
        key = (
            id(fields["input"]),
            id(fields["memory_writes"]),
            id(needs),
            id(fields["output_schema"]),
            fields["predictability"],
            id(fields["retry"]),
            resolved,
        )
        cached = self._middles.get(key)
        if cached is not None:
            return cached
        text = (
            f'"input":{self._shared(fields["input"], dict)}'
            f',"memoryWrites":{self._shared(fields["memory_writes"], list)}'
            f',"needs":{self._shared(needs)}'
            f',"outputSchema":{self._shared(fields["output_schema"])}'
            f',"predictability":{_string(fields["predictability"])}'
            + (f',"resolvedDefinition":{_string(resolved)}' if resolved else "")
            + f',"retry":{self._shared(fields["retry"], lambda r: r.to_json())}'
        )
        # The objects behind the ids are held by _memo through the _shared calls above.
        self._middles[key] = text
        return text

    def _value(self, value: Any) -> str:
        """Canonical JSON of one value; containers are memoised (bindings appear twice)."""
        scalar = scalar_json(value)
        if scalar is not None:
            return scalar
        if isinstance(value, dict | list):
            return self._shared(value)
        return canonical_json(value)

    def _object(self, mapping: Mapping[str, Any]) -> str:
        """Canonical JSON of a mapping with string keys, one value at a time."""
        if not mapping:
            return "{}"
        value = self._value
        return (
            "{" + ",".join(f"{_string(key)}:{value(mapping[key])}" for key in sorted(mapping)) + "}"
        )

    def _expansion(self, expansion: Expansion) -> str:
        return (
            f'{{"bindings":{self._object(expansion.bindings)},"index":{int(expansion.index)},'
            f'"parent":{_string(expansion.parent)}}}'
        )


def _artifacts_json(artifacts: Any) -> list[dict[str, str]]:
    return [artifact.to_json() for artifact in artifacts]


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
