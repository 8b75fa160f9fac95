"""The one place a JSON Schema given to agentctl is compiled and applied (docs/json-schemas.md).

Workflows (output contracts, tool, agent and sub-workflow schemas), extensions (their
handshake schemas), questions (their answer schema) and operators (``reconcile
--result-schema-file``, the dashboard's reconcile form) all hand agentctl schemas. Each is
compiled here, and only here, so one rule holds for all of them: **a schema never reaches
outside itself.** References resolve through the ``referencing`` library over an empty
registry with no retrieval, so only in-document references (``#``, ``#/json/pointer``,
``#anchor``) can resolve; ``file://``, ``http://`` and relative references are refused before
anything is validated, and nothing is ever read or fetched to follow them (jsonschema's
default would open the URL).

:func:`schema_problem` says what is wrong with a schema and where (``check`` locates it in
the workflow file); :func:`compile_schema` refuses such a schema with ``schema.invalid``;
:func:`first_error` applies a compiled schema to a value.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentctl.errors import UsageError

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = [
    "REFERENCE_KEYWORDS",
    "SchemaMismatch",
    "SchemaProblem",
    "compile_schema",
    "first_error",
    "schema_problem",
]

# Keywords whose string value is a URI reference the validator follows.
REFERENCE_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
# Keywords that hold data, not schemas: a `$ref` key inside them is a value, never followed.
_DATA_KEYWORDS = frozenset(("enum", "const", "default", "examples"))
# Keywords whose value maps names to schemas.
_NAME_MAPS = frozenset(
    ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
)
_NESTING_LIMIT = 64


@dataclass(frozen=True)
class SchemaProblem:
    """Why a schema is refused; ``segments`` locate the offending keyword inside it."""

    message: str
    segments: tuple[str | int, ...] = ()

    @property
    def where(self) -> str:
        return "/" + "/".join(str(s) for s in self.segments) if self.segments else "(root)"


@dataclass(frozen=True)
class SchemaMismatch:
    """The first way a value fails its schema: the message and the value's JSON path."""

    message: str
    where: str


def schema_problem(schema: Any) -> SchemaProblem | None:
    """What is wrong with ``schema`` (``None`` when it may be compiled)."""
    if isinstance(schema, bool):
        return None
    if not isinstance(schema, Mapping):
        return SchemaProblem("a JSON Schema must be an object or a boolean")
    schema = dict(schema)
    from jsonschema import exceptions, validators

    specification = _specification(schema)
    if specification is None:
        return SchemaProblem(
            f"`$schema` names an unknown dialect {schema.get('$schema')!r} (use a JSON Schema "
            "draft URI, e.g. https://json-schema.org/draft/2020-12/schema, or leave it out)",
            ("$schema",),
        )
    validator_class = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        validator_class.check_schema(schema)
    except exceptions.SchemaError as exc:
        return SchemaProblem(exc.message, tuple(exc.absolute_path))
    except RecursionError:
        return SchemaProblem(f"the schema is nested deeper than {_NESTING_LIMIT} levels")
    return _reference_problem(schema, specification)


def compile_schema(schema: Any, what: str = "the schema") -> Validator:
    """A validator for ``schema`` that never resolves a reference outside it.

    Raises ``UsageError`` (``schema.invalid``) naming ``what`` when the schema is not valid
    JSON Schema or refers outside itself; callers inside a run turn it into a task failure.
    """
    problem = schema_problem(schema)
    if problem is not None:
        raise _invalid(what, problem.message, problem.where)
    from jsonschema import validators
    from referencing import Registry

    as_dict = schema if isinstance(schema, bool) else dict(schema)
    validator_class = validators.validator_for(as_dict, default=validators.Draft202012Validator)
    # An empty registry that retrieves nothing: a reference that is not in the document
    # fails as unresolvable instead of being opened.
    return validator_class(as_dict, registry=Registry())


def first_error(
    validator: Validator, value: Any, what: str = "the schema"
) -> SchemaMismatch | None:
    """The first way (by value path) ``value`` fails ``validator``; ``None`` when it fits.

    A reference that cannot be resolved while validating raises ``schema.invalid``.
    """
    from referencing.exceptions import Unresolvable

    try:
        error = min(validator.iter_errors(value), key=_path_order, default=None)
    except Unresolvable as exc:  # jsonschema wraps it in a subclass of Unresolvable
        raise _invalid(what, f"a reference cannot be resolved inside it: {exc}", None) from exc
    except RecursionError as exc:
        raise _invalid(what, "its references recurse without end", None) from exc
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "(root)"
    return SchemaMismatch(error.message, where)


def _path_order(error: Any) -> list[tuple[int, int, str]]:
    """Errors ordered by where they are in the value (list indexes before keys, in order)."""
    return [
        (0, part, "") if isinstance(part, int) else (1, 0, str(part))
        for part in error.absolute_path
    ]


def _invalid(what: str, why: str, where: str | None) -> UsageError:
    at = f" at {where}" if where and where != "(root)" else ""
    return UsageError(
        f"{what} is not a usable JSON Schema{at}: {why}",
        code="schema.invalid",
        hint="references may only point inside the schema (`#/$defs/...`); "
        "see docs/json-schemas.md",
    )


def _specification(schema: Mapping[str, Any]) -> Any:
    """The referencing specification of the schema's dialect (``None``: an unknown one)."""
    from referencing.jsonschema import DRAFT202012, UnknownDialect, specification_with

    dialect = schema.get("$schema")
    if dialect is None:
        return DRAFT202012
    if not isinstance(dialect, str):
        return None
    try:
        return specification_with(dialect)
    except UnknownDialect:
        return None


def _reference_problem(schema: Mapping[str, Any], specification: Any) -> SchemaProblem | None:
    """The first reference that is not in-document, or in-document but not resolvable."""
    from referencing import Registry
    from referencing.exceptions import Unresolvable

    root = specification.create_resource(schema)
    registry: Registry[Any] = Registry().with_resource(root.id() or "", root)
    base = registry.resolver_with_root(root)
    for segments, ref, resolver in _references(schema, (), base, specification, False, 0):
        if not ref.startswith("#"):
            return SchemaProblem(
                f"`{segments[-1]}: {ref}` points outside the schema; only in-document "
                "references (`#`, `#/$defs/name`) are allowed, nothing is read or fetched",
                segments,
            )
        try:
            resolver.lookup(ref)
        except Unresolvable:
            return SchemaProblem(
                f"`{segments[-1]}: {ref}` does not resolve to anything inside the schema",
                segments,
            )
    return None


def _references(
    node: Any,
    segments: tuple[str | int, ...],
    resolver: Any,
    specification: Any,
    names: bool,
    depth: int,
) -> Iterator[tuple[tuple[str | int, ...], str, Any]]:
    """Every reference string in ``node`` with the resolver its base URI gives.

    ``names`` is True for a map whose keys are names (``properties``, ``$defs`` ...): there
    a key ``$ref`` or ``enum`` is a name, not a keyword. Data keywords are not walked.
    """
    if depth > _NESTING_LIMIT:
        return
    if isinstance(node, list):
        for index, item in enumerate(node):
            yield from _references(
                item, (*segments, index), resolver, specification, False, depth + 1
            )
        return
    if not isinstance(node, Mapping):
        return
    if not names:
        resource = specification.create_resource(node)
        if resource.id() is not None:
            resolver = resolver.in_subresource(resource)
    for key, value in node.items():
        if not names and key in REFERENCE_KEYWORDS and isinstance(value, str):
            yield (*segments, key), value, resolver
        elif names or key not in _DATA_KEYWORDS:
            yield from _references(
                value,
                (*segments, key),
                resolver,
                specification,
                not names and key in _NAME_MAPS,
                depth + 1,
            )
