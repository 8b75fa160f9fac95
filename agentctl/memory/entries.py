"""Typed long-term memory entries: validation, the searchable text, the stored record.

A typed entry (docs/memory.md) is ``{formatVersion: 1, content, metadata}`` where
``content`` is ``{type: text, text}`` or ``{type: json, value, text?}``. Validation happens
once, before anything is embedded or written, so a bad entry fails with exit 2 and leaves
the store untouched. The searchable text is what both indexes see: the text of a text
entry, else the explicit ``text`` of a JSON entry, else the value's canonical JSON (whose
keys and string values the tokenizer splits into words). It must not be blank.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, PlainSerializer, computed_field
from pydantic.dataclasses import dataclass

from agentctl.digest import canonical_json
from agentctl.errors import UsageError
from agentctl.store.timestamps import to_iso
from agentctl.typed_records import CAMEL, CamelRecord, keys_in_order

if TYPE_CHECKING:
    from agentctl.store.memory_repo import EntryRow

__all__ = [
    "ENTRY_FORMAT_VERSION",
    "MAX_ENTRY_BYTES",
    "MAX_KEY_CHARS",
    "MAX_NAMESPACE_CHARS",
    "MAX_RETENTION_DAYS",
    "MemoryEntry",
    "MemoryRecord",
    "ZuluTime",
    "entry_from_write_arguments",
    "expiry_for",
    "validate_key",
    "validate_namespace",
    "validate_retention_days",
]

ENTRY_FORMAT_VERSION = 1
MAX_ENTRY_BYTES = 1024 * 1024
MAX_RETENTION_DAYS = 36_500
# The column widths of memory_entries: longer values would be stored but never fit the
# documented schema, so they are refused up front.
MAX_NAMESPACE_CHARS = 255
MAX_KEY_CHARS = 512

ValueType = Literal["text", "json"]

ZuluTime = Annotated[datetime, PlainSerializer(to_iso, return_type=str)]
"""A time written as ISO 8601 in UTC with a ``Z`` (:func:`agentctl.store.timestamps.to_iso`)."""


def _invalid(message: str, hint: str | None = None) -> UsageError:
    return UsageError(message, code="memory.invalid_entry", hint=hint)


def validate_namespace(namespace: object) -> str:
    if not isinstance(namespace, str) or not namespace.strip():
        raise _invalid("memory namespace must be a non-empty string")
    if len(namespace) > MAX_NAMESPACE_CHARS:
        raise _invalid(f"memory namespace is longer than {MAX_NAMESPACE_CHARS} characters")
    return namespace


def validate_key(key: object) -> str:
    if not isinstance(key, str) or not key:
        raise _invalid("memory key must be a non-empty string")
    if len(key) > MAX_KEY_CHARS:
        raise _invalid(f"memory key is longer than {MAX_KEY_CHARS} characters")
    return key


def validate_retention_days(days: object) -> int | None:
    if days is None:
        return None
    if isinstance(days, bool) or not isinstance(days, int):
        raise _invalid(f"retentionDays must be an integer (got {type(days).__name__})")
    if not 1 <= days <= MAX_RETENTION_DAYS:
        raise _invalid(f"retentionDays must be within 1..{MAX_RETENTION_DAYS} (got {days})")
    return days


def expiry_for(now: datetime, retention_days: int | None) -> datetime | None:
    """When an entry written at ``now`` expires (None: kept until deleted)."""
    days = validate_retention_days(retention_days)
    return None if days is None else now + timedelta(days=days)


@dataclass(frozen=True, slots=True, config=CAMEL)
class MemoryEntry(CamelRecord):
    """A validated typed entry; ``content`` keeps exactly the fields the writer gave.

    Its JSON form is ``{formatVersion, content, metadata}``; :meth:`from_json` is the
    validation of a new entry (exit 2 with what is wrong), not only a read."""

    value_type: Annotated[ValueType, Field(exclude=True)]
    content: Mapping[str, Any]
    metadata: Mapping[str, Any]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def format_version(self) -> int:
        return ENTRY_FORMAT_VERSION

    _order = keys_in_order("formatVersion")

    @classmethod
    def text(cls, text: str, metadata: Mapping[str, Any] | None = None) -> MemoryEntry:
        return cls.from_json({"content": {"type": "text", "text": text}, "metadata": metadata})

    @classmethod
    def json_value(
        cls, value: Any, text: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> MemoryEntry:
        content: dict[str, Any] = {"type": "json", "value": value}
        if text is not None:
            content["text"] = text
        return cls.from_json({"content": content, "metadata": metadata})

    @classmethod
    def from_json(cls, document: object) -> MemoryEntry:
        """Validate ``{formatVersion?, content, metadata?}``; raise exit 2 when it is wrong."""
        if not isinstance(document, Mapping):
            raise _invalid("memory entry must be an object with `content`")
        unknown = set(document) - {"formatVersion", "content", "metadata"}
        if unknown:
            raise _invalid(f"memory entry has unknown fields: {', '.join(sorted(unknown))}")
        version = document.get("formatVersion", ENTRY_FORMAT_VERSION)
        if version != ENTRY_FORMAT_VERSION:
            raise _invalid(
                f"memory entry formatVersion {version!r} is not supported",
                hint=f"this agentctl writes and reads formatVersion {ENTRY_FORMAT_VERSION}",
            )
        content = _content(document.get("content"))
        metadata = document.get("metadata")
        if metadata is None:
            metadata = {}
        if not isinstance(metadata, Mapping):
            raise _invalid("memory entry `metadata` must be an object")
        entry = cls(
            value_type=content["type"],
            content=content,
            metadata=dict(metadata),
        )
        try:
            size = len(canonical_json(entry.to_json()).encode("utf-8"))
        except (TypeError, ValueError) as exc:
            raise _invalid(f"memory entry is not plain JSON: {exc}") from exc
        if size > MAX_ENTRY_BYTES:
            raise _invalid(
                f"memory entry is {size} bytes; the limit is {MAX_ENTRY_BYTES} (1 MiB)",
                hint="store large payloads as artifacts and keep a reference in memory",
            )
        if not entry.searchable_text.strip():
            raise _invalid(
                "memory entry has no searchable text",
                hint="give the entry non-blank `text`",
            )
        return entry

    @property
    def value(self) -> Any:
        """What ``builtin.long_term_memory.read`` returns as ``value``."""
        if self.value_type == "text":
            return self.content["text"]
        return self.content["value"]

    @property
    def searchable_text(self) -> str:
        text = self.content.get("text")
        if isinstance(text, str):
            return text
        return canonical_json(self.content.get("value"))


def _content(content: object) -> dict[str, Any]:
    if not isinstance(content, Mapping):
        raise _invalid(
            "memory entry `content` must be {type: text, text} or {type: json, value, text?}"
        )
    kind = content.get("type")
    if kind == "text":
        if set(content) - {"type", "text"}:
            raise _invalid("text content takes only `type` and `text`")
        if not isinstance(content.get("text"), str):
            raise _invalid("text content requires string `text`")
        return {"type": "text", "text": content["text"]}
    if kind == "json":
        if set(content) - {"type", "value", "text"}:
            raise _invalid("json content takes only `type`, `value` and `text`")
        if "value" not in content:
            raise _invalid("json content requires `value`")
        result: dict[str, Any] = {"type": "json", "value": content["value"]}
        if "text" in content and content["text"] is not None:
            if not isinstance(content["text"], str):
                raise _invalid("json content `text` must be a string")
            result["text"] = content["text"]
        return result
    raise _invalid(f"memory entry content type must be `text` or `json` (got {kind!r})")


def entry_from_write_arguments(arguments: Mapping[str, Any]) -> MemoryEntry:
    """The entry a ``builtin.long_term_memory.write`` task asks for (docs/actions.md).

    Exactly one of ``entry`` (a full typed entry), ``content`` or the legacy ``value``
    (+ optional ``text``: a string value becomes a text entry, anything else a JSON
    entry) is accepted; a top-level ``metadata`` applies to the latter two.
    """
    given = [name for name in ("entry", "content", "value") if name in arguments]
    if len(given) != 1:
        raise _invalid(
            "long-term memory write needs exactly one of `entry`, `content` or `value`"
            + (f" (got {', '.join(given)})" if given else "")
        )
    metadata = arguments.get("metadata")
    if given == ["entry"]:
        if metadata is not None:
            raise _invalid("pass `metadata` inside `entry`, not beside it")
        return MemoryEntry.from_json(arguments["entry"])
    if given == ["content"]:
        return MemoryEntry.from_json({"content": arguments["content"], "metadata": metadata})
    value = arguments["value"]
    text = arguments.get("text")
    if isinstance(value, str) and text is None:
        return MemoryEntry.from_json(
            {"content": {"type": "text", "text": value}, "metadata": metadata}
        )
    content: dict[str, Any] = {"type": "json", "value": value}
    if text is not None:
        content["text"] = text
    return MemoryEntry.from_json({"content": content, "metadata": metadata})


@dataclass(frozen=True, slots=True, config=CAMEL)
class MemoryRecord(CamelRecord):
    """One stored entry with its identity, embedding identity, times and provenance."""

    namespace: str
    key: str
    entry: MemoryEntry
    embedding_model: str | None
    created_at: ZuluTime
    updated_at: ZuluTime
    expires_at: ZuluTime | None
    provenance: Mapping[str, Any] | None

    @classmethod
    def from_row(cls, row: EntryRow) -> MemoryRecord:
        value_type: ValueType = "json" if row.value_type == "json" else "text"
        return cls(
            namespace=row.namespace,
            key=row.key,
            entry=MemoryEntry(
                value_type=value_type,
                content=json.loads(row.value_json),
                metadata=json.loads(row.metadata_json),
            ),
            embedding_model=row.embedding_model,
            created_at=row.created_at,
            updated_at=row.updated_at,
            expires_at=row.expires_at,
            provenance=None if row.provenance_json is None else json.loads(row.provenance_json),
        )
