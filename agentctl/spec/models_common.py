"""Shared building blocks of the workflow document model (docs/workflow-language.md).

Every structured level of the document is a :class:`SpecModel`: unknown keys are rejected,
YAML keys are camelCase (aliases) while Python attributes are snake_case. A document
validates by the camelCase names only, as upstream's loader accepts no other spelling (a
``timeout_seconds`` key is an unknown field, not a synonym): every validation of document
data passes ``by_alias=True, by_name=False`` to ``model_validate``, while Python code may
still construct models with the snake_case keyword names. Inputs are validated strictly (a
YAML ``yes`` never becomes a boolean, ``"5"`` never becomes an int), and instances are
frozen so a parsed workflow cannot drift after validation.

Free-form JSON slots (``with``, ``vars``, JSON Schemas, ``providerOptions`` …) are plain
``dict[str, Any]`` / ``Any``: the format gives them no structure to check here.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    WrapValidator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

__all__ = [
    "IDENTIFIER_PATTERN",
    "ApprovalOverride",
    "Backoff",
    "EffectClass",
    "EnvSecretRef",
    "FileSecretRef",
    "Idempotency",
    "Identifier",
    "JsonObject",
    "JsonSchema",
    "ProcessSecretRef",
    "ProcessSecretSpec",
    "Retry",
    "Risk",
    "SecretRef",
    "SpecModel",
    "TimeoutSeconds",
    "ToolName",
    "VarsFilePath",
    "is_identifier",
]

IDENTIFIER_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]*$"
_IDENTIFIER_RE = re.compile(IDENTIFIER_PATTERN)
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

JsonObject: TypeAlias = dict[str, Any]
"""A free-form JSON object slot (``with``, ``vars``, ``inputs`` …)."""

JsonSchema: TypeAlias = dict[str, Any]
"""A JSON Schema document; the compiler checks that it is a valid schema
(docs/workflow-language.md)."""

EffectClass = Literal[
    "pure",
    "internal_state",
    "observe",
    "workspace_mutate",
    "external_mutate",
    "process_execution",
    "network",
    "model",
    "remote_agent",
]
Idempotency = Literal["pure", "idempotent", "keyed", "at_most_once", "unknown"]
Risk = Literal["low", "medium", "high", "critical"]
ApprovalOverride = Literal["policy", "never", "always"]


class SpecModel(BaseModel):
    """Base of every structured level: strict, closed, camelCase on the wire, frozen."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=True,
        extra="forbid",
        strict=True,
        frozen=True,
        validate_default=False,
        # Validators are built when a model is first used, not when its class is defined:
        # importing the ~50 models otherwise costs a third of `agentctl check`'s start-up.
        defer_build=True,
    )

    @classmethod
    def default_of(cls, name: str) -> Any:
        """The default this model declares for field ``name``: what an omitted key means.

        The compiler reads a dump without defaults (``exclude_unset``) and the engine a
        stored document; both take an omitted key's meaning from here, never a literal."""
        return cls.model_fields[name].get_default(call_default_factory=True)


def is_identifier(value: str) -> bool:
    """Whether ``value`` obeys the identifier rule (docs/workflow-language.md)."""
    return _IDENTIFIER_RE.fullmatch(value) is not None


def _check_identifier(value: str) -> str:
    if not is_identifier(value):
        raise PydanticCustomError(
            "identifier",
            "`{value}` is not a valid identifier: it must start with a letter and contain "
            "only letters, digits, `_` and `-`",
            {"value": value},
        )
    return value


Identifier = Annotated[
    str,
    AfterValidator(_check_identifier),
    WithJsonSchema({"type": "string", "pattern": IDENTIFIER_PATTERN}),
]
"""Task ids, tool names, ``foreach.as`` bindings and matrix axis names
(docs/workflow-language.md)."""

TimeoutSeconds = Annotated[int, Field(ge=1, le=86400)]


def _vars_file_path(value: str) -> str:
    if "${{" in value:
        raise ValueError("a varsFiles path must be a literal, not a template")
    parts = value.replace("\\", "/").split("/")
    if value.startswith("/") or (len(value) > 1 and value[1] == ":"):
        raise ValueError("a varsFiles path must be relative to the workflow file's directory")
    if ".." in parts:
        raise ValueError("a varsFiles path must not climb out of its directory with `..`")
    return value


ToolName = Annotated[
    str,
    Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]*(\.[A-Za-z][A-Za-z0-9_-]*)*$"),
]
"""A tool's name: an identifier, or ``<pack>.<tool>`` for a tool loaded from a pack."""

VarsFilePath = Annotated[str, Field(min_length=1), AfterValidator(_vars_file_path)]
"""A variables file named by a workflow: a literal relative path inside its directory."""


class Backoff(SpecModel):
    """How long to wait before a retried attempt: a fixed or an exponentially growing delay.

    ``jitter`` is the fraction of each delay that is randomised (0 = none, 1 = anywhere
    between 0 and the full delay); the random part is derived from the run, task and attempt,
    so the same run always waits the same.
    """

    kind: Literal["fixed", "exponential"] = "fixed"
    initial_ms: int = Field(default=1000, ge=0, le=60000)
    max_ms: int = Field(default=60000, ge=0, le=300000)
    multiplier: float = Field(default=2.0, ge=1.0, le=10.0)
    jitter: float = Field(default=0.0, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _bounded(self) -> Backoff:
        if self.max_ms < self.initial_ms:
            raise ValueError(
                f"maxMs ({self.max_ms}) must not be below initialMs ({self.initial_ms})"
            )
        return self


class Retry(SpecModel):
    """Task retry policy: total attempts, the wait between them, and what is retried.

    ``retryOn`` narrows which confirmed failures are retried: error codes (``*`` matches any
    suffix, as in ``provider.*``) or the classes ``transient`` and ``timeout``.
    """

    max_attempts: int = Field(default=1, ge=1, le=20)
    backoff_ms: int = Field(default=0, ge=0, le=60000)
    backoff: Backoff | None = None
    retry_on: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        default=None, min_length=1, max_length=64
    )

    @model_validator(mode="after")
    def _one_backoff(self) -> Retry:
        if self.backoff is not None and "backoff_ms" in self.model_fields_set:
            raise ValueError("set either `backoffMs` (a fixed delay) or `backoff`, not both")
        return self


# --- secret references (docs/workflow-language.md) ------------------------------------------------


def _check_env_name(value: str) -> str:
    if _ENV_NAME_RE.fullmatch(value) is None:
        raise ValueError(f"environment variable name `{value}` must match [A-Za-z_][A-Za-z0-9_]*")
    return value


def _check_file_path(value: str) -> str:
    if not value or "\x00" in value:
        raise ValueError("a secret file path must be non-empty and contain no NUL byte")
    return value


def _check_process_args(value: list[str]) -> list[str]:
    if len(value) > 64:
        raise ValueError("a secret process takes at most 64 arguments")
    for arg in value:
        if len(arg.encode("utf-8")) > 4096:
            raise ValueError("a secret process argument must be at most 4096 bytes")
    return value


class EnvSecretRef(SpecModel):
    """``{env: NAME}``: the value of an environment variable."""

    env: Annotated[str, AfterValidator(_check_env_name)]


class FileSecretRef(SpecModel):
    """``{file: PATH}`` **[ADV]**: a small file under a ``policy.secretFileRoots`` entry."""

    file: Annotated[str, AfterValidator(_check_file_path)]


class ProcessSecretSpec(SpecModel):
    """The body of a ``{process: …}`` secret reference **[ADV]**."""

    command: Annotated[str, Field(min_length=1)]
    args: Annotated[list[str], AfterValidator(_check_process_args)] = Field(default_factory=list)
    timeout_seconds: int = Field(default=5, ge=1, le=60)
    output_limit_bytes: int = Field(default=16384, ge=1, le=65536)


class ProcessSecretRef(SpecModel):
    """``{process: {command, args?, …}}`` **[ADV]**: stdout of an allow-listed executable."""

    process: ProcessSecretSpec


def _secret_ref(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """Validate one of the three shapes; any failure becomes ``invalid_secret_reference``."""
    if isinstance(value, EnvSecretRef | FileSecretRef | ProcessSecretRef):
        return value
    if isinstance(value, dict) and len(value) == 1:
        (key,) = value
        shapes: dict[str, type[SpecModel]] = {
            "env": EnvSecretRef,
            "file": FileSecretRef,
            "process": ProcessSecretRef,
        }
        shape = shapes.get(key) if isinstance(key, str) else None
        if shape is not None:
            try:
                return shape.model_validate(value, by_alias=True, by_name=False)
            except ValidationError as exc:
                first = exc.errors()[0]
                if first["type"] == "extra_forbidden":
                    # Reported as an unknown field at its own path, like everywhere else.
                    raise PydanticCustomError(
                        "secret_unknown_field",
                        "unknown field `{field}` in a `{shape}` secret reference",
                        {
                            "shape": key,
                            "field": str(first["loc"][-1]),
                            "inner": [str(part) for part in first["loc"]],
                        },
                    ) from None
                raise PydanticCustomError(
                    "invalid_secret_reference",
                    "invalid `{shape}` secret reference: {detail}",
                    {"shape": key, "detail": first["msg"].removeprefix("Value error, ")},
                ) from None
    raise PydanticCustomError(
        "invalid_secret_reference",
        "a secret reference must be a mapping with exactly one key: `env: NAME`, "
        "`file: PATH` or `process: (command, args, …)`",
    )


SecretRef = Annotated[
    EnvSecretRef | FileSecretRef | ProcessSecretRef,
    WrapValidator(_secret_ref),
]
"""A secret reference (docs/workflow-language.md); any malformed shape reports
``invalid_secret_reference``."""
