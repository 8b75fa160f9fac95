"""Reading provider JSON defensively, and small wire-format rules shared by providers.

A provider answer is outside input: every field is checked, and a missing or mistyped one
raises ``provider.invalid_response`` naming the field by its path in the answer
(``choices[0].message.tool_calls[1].function.arguments``), so an operator can tell a
misbehaving compatible server from a bug here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agentctl.providers.base import Message, ProviderCallError

__all__ = [
    "int_field",
    "invalid_response",
    "list_field",
    "object_at",
    "optional_str",
    "parse_arguments",
    "str_field",
    "strict_compatible",
    "tool_result_text",
    "user_text",
]


def invalid_response(provider: str, path: str, detail: str) -> ProviderCallError:
    """The provider answered, but not in a shape we can use; the call did happen."""
    return ProviderCallError(
        f"provider `{provider}` returned an invalid response: `{path}` {detail}",
        retryable=False,
        applied="applied",
        code="provider.invalid_response",
        hint="check that the endpoint speaks this provider kind's wire format",
    )


def object_at(provider: str, value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise invalid_response(provider, path, f"must be an object, got {_kind(value)}")
    return value


def str_field(provider: str, obj: Mapping[str, Any], key: str, path: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise invalid_response(provider, _join(path, key), f"must be a string, got {_kind(value)}")
    return value


def optional_str(provider: str, obj: Mapping[str, Any], key: str, path: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise invalid_response(
            provider, _join(path, key), f"must be a string or null, got {_kind(value)}"
        )
    return value


def list_field(
    provider: str, obj: Mapping[str, Any], key: str, path: str, *, required: bool = True
) -> list[Any]:
    value = obj.get(key)
    if value is None and not required:
        return []
    if not isinstance(value, list):
        raise invalid_response(provider, _join(path, key), f"must be a list, got {_kind(value)}")
    return value


def int_field(provider: str, obj: Mapping[str, Any] | None, key: str, path: str) -> int:
    """A token count: absent or null counts as 0, anything else must be an integer >= 0."""
    if obj is None:
        return 0
    value = obj.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise invalid_response(
            provider, _join(path, key), f"must be a non-negative integer, got {value!r}"
        )
    return value


def parse_arguments(provider: str, value: Any, path: str) -> Mapping[str, Any]:
    """Tool-call arguments: a JSON object, or a string holding one (empty means ``{}``)."""
    if isinstance(value, Mapping):
        return value
    if not isinstance(value, str):
        raise invalid_response(provider, path, f"must be a JSON string, got {_kind(value)}")
    if value.strip() == "":
        return {}
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise invalid_response(provider, path, f"is not valid JSON: {exc}") from exc
    if not isinstance(parsed, Mapping):
        raise invalid_response(provider, path, f"must encode an object, got {_kind(parsed)}")
    return parsed


def tool_result_text(message: Message) -> str:
    """A tool result as the text every wire format carries: strings verbatim, else JSON."""
    result = message.tool_result
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def user_text(message: Message) -> str:
    return message.text if message.text is not None else ""


def strict_compatible(schema: Any) -> bool:
    """Whether OpenAI strict mode accepts ``schema`` as written.

    Strict mode needs every object to list all its properties as required and to forbid
    additional properties. A schema that does not is still sent, with ``strict: false``,
    rather than rewritten: rewriting would change what the workflow author declared.
    """
    if isinstance(schema, list):
        return all(strict_compatible(item) for item in schema)
    if not isinstance(schema, Mapping):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        if not isinstance(properties, Mapping):
            return False
        if schema.get("additionalProperties") is not False:
            return False
        if sorted(schema.get("required", [])) != sorted(properties):
            return False
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            if not all(strict_compatible(sub) for sub in value.values()):
                return False
        elif key in _SCHEMA_SLOTS and not strict_compatible(value):
            return False
    return True


_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions"})
_SCHEMA_SLOTS = frozenset({"items", "anyOf", "allOf", "oneOf", "not", "prefixItems"})


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__
