"""Typed records with a camelCase JSON form: pydantic dataclasses instead of hand-written
``to_json`` / ``from_json``.

A record is declared once, with snake_case attributes::

    @dataclass(frozen=True, config=CAMEL)
    class ToolCall(CamelRecord):
        id: StrictStr
        name: StrictStr
        input: Mapping[str, Any]

and pydantic derives the rest: the camelCase keys (``alias_generator``; a field may name
its own alias), validation when a stored record is read back, and the JSON form. Records
are still built positionally or by attribute name (``populate_by_name``), so their callers
do not change.

The JSON form must stay byte-identical to what was stored before this module existed
(effect ids and digests are taken over it), which fixes three rules:

- keys come in field order, every key present, except the fields declared with
  :func:`omitted_when` (keys added after a record's first format are written only when
  they differ from their default, so older records keep their bytes);
- datetimes are written with :meth:`datetime.isoformat` (:data:`IsoDateTime`), as before;
- the strict scalar types (``StrictStr``, ``StrictInt``, ``StrictBool``) refuse what the
  hand-written readers refused (a ``true`` where a count belongs).

A value derived from the fields (``@computed_field``) is written after them; where the
JSON form has it among them, :func:`keys_in_order` puts it in its place.

A record built on the executor's per-step path (a task row, an audit event) is a plain
``dataclasses.dataclass`` with ``__pydantic_config__ = CAMEL`` instead: it is built
without validation, as fast as any dataclass (a pydantic dataclass costs about 2 µs more
per instance), and :class:`CamelRecord` still derives its JSON form and reads it back
through a ``TypeAdapter``. Such a record puts ``omitted_when`` in ``Annotated[...]`` and
its default after ``=``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar, Self

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    model_serializer,
)
from pydantic import ValidationError as PydanticValidationError
from pydantic.alias_generators import to_camel

from agentctl.errors import AgentctlError, PersistenceError

__all__ = [
    "CAMEL",
    "CamelRecord",
    "IsoDateTime",
    "describe_invalid",
    "keys_in_order",
    "omitted_when",
    "omitted_when_empty",
]

CAMEL = ConfigDict(alias_generator=to_camel, populate_by_name=True, ser_json_inf_nan="constants")


def _parse_datetime(value: Any) -> Any:
    return datetime.fromisoformat(value) if isinstance(value, str) else value


IsoDateTime = Annotated[
    datetime,
    BeforeValidator(_parse_datetime),
    PlainSerializer(lambda value: value.isoformat(), return_type=str),
]
"""A datetime stored as its ``isoformat()`` text."""


def omitted_when(default: Any) -> Any:
    """A field with ``default`` whose key is left out of the JSON form while it equals it.

    ``default`` must be immutable (None, False, an empty tuple)."""
    return Field(default=default, exclude_if=lambda value: value == default)


def omitted_when_empty() -> Any:
    """A list field (empty by default) whose key is left out of the JSON form while empty."""
    return Field(default_factory=list, exclude_if=lambda value: not value)


def keys_in_order(*keys: str) -> Any:
    """A serializer, assigned in a record's body, that writes ``keys`` (camelCase) first
    and in this order, then the rest as pydantic writes them::

        _order = keys_in_order("path", "ok", "damaged")
    """

    @model_serializer(mode="wrap")
    def in_order(self: Any, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {key: data[key] for key in keys if key in data} | data

    return in_order


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(cls: type[Any]) -> TypeAdapter[Any]:
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return adapter


def describe_invalid(error: PydanticValidationError) -> str:
    """The first problem of a failed read, with the stored (camelCase) path: "`a.b`: …"."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "record"
    message = first["msg"]
    return f"`{where}`: {message[:1].lower()}{message[1:]}"


class CamelRecord:
    """``to_json`` / ``from_json`` for a pydantic dataclass declared with ``config=CAMEL``.

    ``record_name`` says what the record is in messages; ``invalid`` builds the error a
    record that cannot be read raises (a subclass family overrides it with its own code).
    """

    record_name: ClassVar[str] = "record"

    def to_json(self) -> dict[str, Any]:
        """The camelCase JSON form (lists, not tuples; keys in field order)."""
        data: dict[str, Any] = _adapter(type(self)).dump_python(self, mode="json", by_alias=True)
        return data

    @classmethod
    def from_json(cls, data: Any) -> Self:
        """Read back :meth:`to_json` (or an older record of the same kind)."""
        try:
            record: Self = _adapter(cls).validate_python(data)
        except PydanticValidationError as error:
            raise cls.invalid(describe_invalid(error)) from None
        return record

    @classmethod
    def invalid(cls, detail: str) -> AgentctlError:
        return PersistenceError(f"invalid {cls.record_name}: {detail}", code="store.corrupt")
