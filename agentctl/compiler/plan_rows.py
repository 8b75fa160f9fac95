"""Writing a run's plan rows (docs/compiler.md): :func:`encoded_rows` gives the text of each
task's compact stored record (:meth:`~agentctl.compiler.plan.PlanTask.to_row`), encoding
the parts a fan-out's children share once for all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from agentctl.compiler.plan import ROW_DEFAULTS, PlanTask
from agentctl.compiler.task_parts import RetryPolicy
from agentctl.digest import canonical_json, string_json

__all__ = ["encoded_rows"]


def encoded_rows(tasks: Iterable[PlanTask]) -> Iterator[str]:
    """``canonical_json(task.to_row())`` of each task, in order, written out member by member
    in sorted key order: a run stores one row per task, and a fan-out's children share
    their input, output schema, uses and retry objects, whose texts are made once here
    rather than once per child. The text is the same (a property test holds it to
    ``canonical_json(task.to_row())``)."""
    writer = _RowWriter()
    for task in tasks:
        yield writer.row(task)


class _RowWriter:
    """:func:`encoded_rows`' texts of shared parts, by identity, for one call."""

    def __init__(self) -> None:
        self._memo: dict[tuple[str, int], tuple[Any, str]] = {}
        self._retries: dict[int, tuple[RetryPolicy, str | None]] = {}

    def _shared(self, key: str, value: Any, to_json: Callable[[Any], Any]) -> str:
        found = self._memo.get((key, id(value)))
        if found is None or found[0] is not value:
            found = self._memo[(key, id(value))] = (value, canonical_json(to_json(value)))
        return found[1]

    def _retry(self, retry: RetryPolicy) -> str | None:
        """The retry policy's text, or None when it is the default a row leaves out."""
        found = self._retries.get(id(retry))
        if found is None or found[0] is not retry:
            data = retry.to_json()
            text = None if data == ROW_DEFAULTS["retry"] else canonical_json(data)
            found = self._retries[id(retry)] = (retry, text)
        return found[1]

    def row(self, task: PlanTask) -> str:
        # Members in sorted key order; those left out of a row at their defaults
        # (ROW_DEFAULTS) are skipped under the same conditions as PlanTask.to_row.
        parts: list[str] = []
        if task.artifacts:
            parts.append('"artifacts":' + canonical_json([a.to_json() for a in task.artifacts]))
        if task.compensate is not None:
            parts.append('"compensate":' + self._shared("c", task.compensate, _to_json))
        parts.append('"definitionFingerprint":' + string_json(task.definition_fingerprint))
        if task.expansion is not None:
            parts.append('"expansion":' + canonical_json(task.expansion.to_json()))
        if task.failure != "stop":
            parts.append('"failure":' + string_json(task.failure))
        if task.input:
            parts.append('"input":' + self._shared("i", task.input, dict))
        if task.memory_writes:
            parts.append('"memoryWrites":' + canonical_json(list(task.memory_writes)))
        if task.needs:
            parts.append('"needs":' + canonical_json(list(task.needs)))
        parts.append('"outputContractFingerprint":' + string_json(task.output_contract_fingerprint))
        if task.output_schema is not None:
            parts.append('"outputSchema":' + self._shared("o", task.output_schema, dict))
        parts.append('"predictability":' + string_json(task.predictability))
        if task.resolved_definition:
            parts.append('"resolvedDefinition":' + string_json(task.resolved_definition))
        retry = self._retry(task.retry)
        if retry is not None:
            parts.append('"retry":' + retry)
        if task.route_guards:
            parts.append(
                '"routeGuards":' + canonical_json([g.to_json() for g in task.route_guards])
            )
        if task.session:
            parts.append('"session":' + canonical_json(dict(task.session)))
        seconds = task.timeout_seconds
        parts.append(
            '"timeoutSeconds":'
            + (int.__repr__(seconds) if type(seconds) is int else canonical_json(seconds))
        )
        parts.append('"uses":' + self._shared("u", task.uses, _to_json))
        if task.vars:
            parts.append('"vars":' + canonical_json(dict(task.vars)))
        if task.when is not None:
            parts.append('"when":' + string_json(task.when))
        return "{" + ",".join(parts) + "}"


def _to_json(value: Any) -> Any:
    return value.to_json()
