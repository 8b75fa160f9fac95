"""The compiler's view of templates: syntax problems, task reads and sub-workflow rewriting.

Thin over :mod:`agentctl.spec.templates`; what it adds is the compile-time shape: errors as
``(location, message)`` pairs ready for a diagnostic path, and task reads that skip strings
whose syntax is already reported (one bad template yields one diagnostic, not two).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentctl.spec.expressions import parse_condition
from agentctl.spec.template_exceptions import TemplateError
from agentctl.spec.template_rewrite import alias_loop_output, rewrite_template_roots
from agentctl.spec.templates import (
    OPEN,
    is_whole_template,
    parse_template,
    template_errors,
    walk_strings,
)

__all__ = [
    "ARTIFACT_FIELDS",
    "alias_loop_output",
    "artifact_reads",
    "condition_problem",
    "contains_template",
    "has_template",
    "is_whole_template",
    "problems",
    "rewrite_subworkflow",
    "task_reads",
]


def has_template(text: str) -> bool:
    return OPEN in text


def contains_template(value: Any) -> bool:
    """Whether any string inside ``value`` has ``${{`` (cheap pre-check before walking)."""
    if isinstance(value, str):
        return OPEN in value
    if isinstance(value, Mapping):
        return any(contains_template(item) for item in value.values())
    if isinstance(value, list):
        return any(contains_template(item) for item in value)
    return False


def problems(value: Any) -> list[tuple[str, str]]:
    """``(location, message)`` for every template syntax error inside ``value``."""
    return [(location, str(error)) for location, error in template_errors(value)]


def condition_problem(text: str) -> str | None:
    """Why a ``when``/``while`` text is not a valid condition (``None`` when it is).

    Only text inside ``${{ }}`` is checked, like the reference (a bare ``when`` is checked
    at run time).
    """
    if OPEN not in text:
        return None
    found = template_errors(text)
    if found:
        return str(found[0][1])
    if is_whole_template(text):
        try:
            parse_condition(text.strip())
        except TemplateError as error:
            return str(error)
    return None


def task_reads(value: Any) -> list[tuple[str, str]]:
    """``(location, task id)`` for every ``tasks.ID`` read by a well-formed template."""
    reads: list[tuple[str, str]] = []
    for location, text in walk_strings(value):
        if OPEN not in text:
            continue
        try:
            template = parse_template(text)
        except TemplateError:
            continue
        for expression in template.expressions:
            if expression.root == "tasks" and len(expression.path) > 1:
                reads.append((location, expression.path[1]))
    return reads


#: What ``tasks.<id>.artifacts.<name>.<field>`` may read of a named artifact's version.
ARTIFACT_FIELDS = ("digest", "version", "path", "size")


def artifact_reads(value: Any) -> list[tuple[str, str, tuple[str, ...]]]:
    """``(location, task id, path after artifacts)`` for every ``tasks.ID.artifacts…`` read
    by a well-formed template (``("report", "digest")`` for ``….artifacts.report.digest``)."""
    reads: list[tuple[str, str, tuple[str, ...]]] = []
    for location, text in walk_strings(value):
        if OPEN not in text:
            continue
        try:
            template = parse_template(text)
        except TemplateError:
            continue
        for expression in template.expressions:
            path = expression.path
            if expression.root == "tasks" and len(path) > 3 and path[2] == "artifacts":
                reads.append((location, path[1], path[3:]))
    return reads


def rewrite_subworkflow(
    value: Any,
    *,
    inputs_to: str,
    memory_prefix: str,
    task_ids: Mapping[str, str],
    condition: bool = False,
) -> Any:
    """Namespace a definition's templates for one invocation (template paths only; see
    docs/compiler.md)."""
    return rewrite_template_roots(
        value,
        inputs_to=inputs_to,
        memory_prefix=memory_prefix,
        task_ids=task_ids,
        condition=condition,
    )
