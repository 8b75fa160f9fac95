"""Named building blocks: providers, agents, actions, tools, sub-workflows, MCP servers and
A2A peers (docs/providers.md, docs/workflow-language.md, docs/protocols.md, docs/actions.md).

Tasks refer to these by map key (``agent:triager``); cross-references between them are
resolved by the compiler, so only the shape and per-field bounds are checked here.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from agentctl.spec.models_common import (
    ApprovalOverride,
    EffectClass,
    Idempotency,
    JsonObject,
    JsonSchema,
    Retry,
    Risk,
    SecretRef,
    SpecModel,
    TimeoutSeconds,
    VarsFilePath,
)
from agentctl.spec.models_tasks import Task

__all__ = [
    "DEFAULT_COMBINED_OUTPUT_LIMIT_BYTES",
    "DEFAULT_OUTPUT_LIMIT_BYTES",
    "MCP_DEFAULT_TIMEOUT_SECONDS",
    "PROCESS_ACTION_KINDS",
    "SEMVER_PATTERN",
    "A2APeer",
    "Action",
    "ActionKind",
    "Agent",
    "ContainerSpec",
    "McpServer",
    "Provider",
    "ProviderKind",
    "Reasoning",
    "Subworkflow",
    "Tool",
    "ToolKind",
    "UsageLimit",
]

ProviderKind = Literal["fake", "openai", "anthropic", "google", "azure_openai", "command"]
ActionKind = Literal[
    "builtin.assign",
    "builtin.assert",
    "builtin.read",
    "builtin.write",
    "builtin.shell.exec",
    "builtin.memory.read",
    "builtin.memory.write",
    "builtin.long_term_memory.read",
    "builtin.long_term_memory.write",
    "builtin.long_term_memory.search",
    "builtin.long_term_memory.promote",
    "mcp.call",
    "a2a.delegate",
    "extension.process",
    "builtin.ask",
    "builtin.fail",
    "builtin.pause",
    "python.function",
]
ToolKind = Literal["builtin.workspace.read", "builtin.workspace.write", "builtin.echo"]

PROCESS_ACTION_KINDS = frozenset({"builtin.shell.exec", "extension.process", "python.function"})
#: ``module:callable`` (a module imported from the workflow's folder) or
#: ``path/to/file.py:callable`` (a file under it); the callable may be a dotted name.
FUNCTION_PATTERN = (
    r"^(?:[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*|[^:\0]+\.py)"
    r":[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$"
)
_FUNCTION_RE = re.compile(FUNCTION_PATTERN)
#: Variables that steer a container runtime client; a container action's `env` may not set
#: them (they come from agentctl's own environment).
CONTAINER_ENGINE_VARIABLES = frozenset(
    {
        "CONTAINER_CONNECTION",
        "CONTAINER_HOST",
        "DOCKER_CERT_PATH",
        "DOCKER_CONFIG",
        "DOCKER_CONTEXT",
        "DOCKER_HOST",
        "DOCKER_TLS_VERIFY",
        "HOME",
        "PATH",
        "PODMAN_CONNECTIONS_CONF",
        "TEMP",
        "TMP",
        "TMPDIR",
        "XDG_CONFIG_HOME",
        "XDG_RUNTIME_DIR",
    }
)
EXTENSION_PROTOCOL_VERSION = "agentctl.dev/process-extension/v1"
SEMVER_PATTERN = (
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
_SEMVER_RE = re.compile(SEMVER_PATTERN)
_IMAGE_RE = re.compile(r"^(?:[^@\s]+@)?sha256:[0-9a-f]{64}$")
_MIB = 1024 * 1024
OutputLimit = Annotated[int, Field(ge=1, le=16 * _MIB)]
# What a process action keeps of its output when it sets no limit (docs/actions.md):
# stdout and stderr each, and both together.
DEFAULT_OUTPUT_LIMIT_BYTES = _MIB
DEFAULT_COMBINED_OUTPUT_LIMIT_BYTES = 2 * _MIB


class SandboxLimitsSpec(SpecModel):
    """Limits of a sandboxed process **[ADV]** (docs/isolation.md); unset is unbounded."""

    cpu_seconds: int | None = Field(default=None, ge=1, le=86400)
    memory_bytes: int | None = Field(default=None, ge=16 * _MIB, le=1024 * 1024 * _MIB)
    processes: int | None = Field(default=None, ge=1, le=65536)
    file_size_bytes: int | None = Field(default=None, ge=1, le=1 << 50)


class SandboxSpec(SpecModel):
    """bubblewrap isolation for a process action **[ADV]** (docs/isolation.md)."""

    network: bool = False
    read_paths: list[str] = Field(default_factory=list)
    limits: SandboxLimitsSpec = Field(default_factory=SandboxLimitsSpec)

    @field_validator("read_paths")
    @classmethod
    def _absolute(cls, value: list[str]) -> list[str]:
        for path in value:
            if not path.startswith("/") or "\0" in path or ".." in path.split("/"):
                raise ValueError(f"readPaths entries must be absolute paths without `..`: {path!r}")
        return value


class Provider(SpecModel):
    """A model provider entry (docs/providers.md).

    ``kind: command`` (beyond upstream) runs an agent CLI — ``claude -p``, ``codex exec``,
    ``llm`` or any program — with the prompt on stdin or as the last argument and its stdout
    as the reply, bounded like ``builtin.shell.exec``; its fields are only valid there.
    """

    kind: ProviderKind
    endpoint: str | None = None
    credential: SecretRef | None = None
    api_version: str | None = None
    headers: dict[str, SecretRef] = Field(default_factory=dict)
    command: str | None = Field(default=None, min_length=1)
    args: list[str] | None = Field(default=None, max_length=64)
    prompt_via: Literal["stdin", "argv"] | None = None
    timeout_seconds: int | None = Field(default=None, ge=1, le=86400)
    output_limit_bytes: int | None = Field(default=None, ge=1, le=16 * 1024 * 1024)
    env: dict[str, SecretRef] | None = None
    isolation: Literal["process", "sandbox"] | None = None
    sandbox: SandboxSpec | None = None

    @model_validator(mode="after")
    def _kind_fields(self) -> Provider:
        if self.kind == "azure_openai" and not self.endpoint:
            raise ValueError("an `azure_openai` provider requires `endpoint`")
        command_fields = {
            "command": self.command,
            "args": self.args,
            "promptVia": self.prompt_via,
            "timeoutSeconds": self.timeout_seconds,
            "outputLimitBytes": self.output_limit_bytes,
            "env": self.env,
            "isolation": self.isolation,
            "sandbox": self.sandbox,
        }
        if self.kind == "command":
            if not self.command:
                raise ValueError("a `command` provider requires `command` (the program)")
            http_only = {
                "endpoint": self.endpoint,
                "credential": self.credential,
                "apiVersion": self.api_version,
                "headers": self.headers or None,
            }
            misplaced = [name for name, value in http_only.items() if value]
            if misplaced:
                raise ValueError(f"{', '.join(misplaced)} do not apply to a `command` provider")
            for part in [self.command, *(self.args or [])]:
                if "\0" in part:
                    raise ValueError("`command` and `args` must not contain NUL")
            if self.sandbox is not None and self.isolation != "sandbox":
                raise ValueError("`sandbox` settings only apply with `isolation: sandbox`")
        else:
            misplaced = [name for name, value in command_fields.items() if value is not None]
            if misplaced:
                raise ValueError(
                    f"{', '.join(misplaced)} only apply to a provider of kind `command`"
                )
        return self


class Reasoning(SpecModel):
    """Requested reasoning effort (needs the ``reasoning_effort`` capability)."""

    effort: Literal["none", "low", "medium", "high", "xhigh", "max"]
    mode: str | None = None


class UsageLimit(SpecModel):
    """Cumulative per-attempt usage ceilings of an agent task."""

    max_input_tokens: int | None = Field(default=None, gt=0)
    max_output_tokens: int | None = Field(default=None, gt=0)
    max_cost_usd: float | None = Field(default=None, gt=0)


class Agent(SpecModel):
    """A model-driven agent (docs/providers.md)."""

    provider: str
    model: str
    description: str | None = None
    instructions: str | None = None
    instructions_file: str | None = None
    vars: JsonObject = Field(default_factory=dict)
    vars_files: list[VarsFilePath] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    max_turns: int = Field(default=8, ge=1, le=64)
    max_tool_calls: int = Field(default=16, ge=0, le=256)
    max_output_tokens: int = Field(default=2048, gt=0)
    timeout_seconds: int = Field(default=120, gt=0)
    retry: Retry = Field(default_factory=Retry)
    reasoning: Reasoning | None = None
    structured_output: JsonSchema | None = None
    usage_limit: UsageLimit | None = None
    stream: bool = False
    provider_options: JsonObject = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_instruction_source(self) -> Agent:
        if (self.instructions is None) == (self.instructions_file is None):
            raise ValueError("exactly one of `instructions` and `instructionsFile` must be set")
        return self


class ContainerSpec(SpecModel):
    """Container isolation for a process action **[ADV]** (docs/actions.md)."""

    image: str
    runtime: Literal["auto", "docker", "podman"] = "auto"
    memory_limit_bytes: int = Field(default=268435456, ge=16 * _MIB, le=16 * 1024 * _MIB)
    cpu_limit_millis: int = Field(default=1000, ge=1, le=64000)
    pids_limit: int = Field(default=64, ge=1, le=4096)

    @field_validator("image")
    @classmethod
    def _pinned_image(cls, value: str) -> str:
        if _IMAGE_RE.fullmatch(value) is None:
            raise ValueError("a container image must be pinned: `NAME@sha256:<64 hex>`")
        return value


class Action(SpecModel):
    """A named configuration of one built-in action kind (docs/actions.md).

    Kind-specific fields default to ``None`` (meaning "the kind's default applies") so that
    the rule "this field is not allowed on that kind" can be checked exactly.
    """

    kind: ActionKind
    description: str | None = None
    with_: JsonObject = Field(default_factory=dict, alias="with")
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    cwd: str | None = None
    env: dict[str, SecretRef] = Field(default_factory=dict)
    timeout_seconds: int | None = None
    stdout_limit_bytes: OutputLimit | None = None
    stderr_limit_bytes: OutputLimit | None = None
    combined_output_limit_bytes: OutputLimit | None = None
    idempotency: Idempotency | None = None
    isolation: Literal["process", "sandbox", "container"] | None = None
    container: ContainerSpec | None = None
    sandbox: SandboxSpec | None = None
    protocol_version: str | None = None
    input_schema: JsonSchema | None = None
    output_schema: JsonSchema | None = None
    capabilities: list[str] = Field(default_factory=list)
    function: str | None = None
    python: str | None = Field(default=None, min_length=1)
    source_digest: str | None = Field(default=None, pattern=r"^sha256:[0-9a-f]{64}$")

    @model_validator(mode="after")
    def _kind_rules(self) -> Action:
        process = self.kind in PROCESS_ACTION_KINDS
        extension = self.kind == "extension.process"
        function_step = self.kind == "python.function"
        set_fields = self.model_fields_set
        _function_rules(self, function_step)
        if process:
            if not self.command and not function_step:
                raise ValueError(f"a `{self.kind}` action requires `command`")
            if self.timeout_seconds is not None and not 1 <= self.timeout_seconds <= 86400:
                raise ValueError(
                    f"timeoutSeconds must be between 1 and 86400, got {self.timeout_seconds}"
                )
            if (self.isolation == "container") != (self.container is not None):
                raise ValueError("`container` is required exactly when `isolation: container`")
            if self.sandbox is not None and self.isolation != "sandbox":
                raise ValueError("`sandbox` settings only apply with `isolation: sandbox`")
            reserved = sorted(set(self.env) & CONTAINER_ENGINE_VARIABLES)
            if self.isolation == "container" and reserved:
                raise ValueError(
                    f"env {', '.join(reserved)} would steer the container runtime; a "
                    "container action may not set it"
                )
        else:
            process_only = [
                "command",
                "args",
                "cwd",
                "env",
                "stdout_limit_bytes",
                "stderr_limit_bytes",
                "combined_output_limit_bytes",
                "isolation",
                "container",
                "sandbox",
            ]
            bad = [_alias(n) for n in process_only if n in set_fields]
            if bad:
                raise ValueError(
                    f"{', '.join(bad)} only apply to builtin.shell.exec and extension.process"
                )
        if self.idempotency is not None and self.kind not in (
            "mcp.call",
            "extension.process",
            "python.function",
        ):
            raise ValueError(
                "`idempotency` may only be declared on mcp.call, extension.process and "
                "python.function"
            )
        extension_only = ["protocol_version", "input_schema", "output_schema", "capabilities"]
        if function_step:
            extension_only = ["protocol_version", "capabilities"]
        if extension:
            if self.idempotency is None:
                raise ValueError("an extension.process action requires `idempotency`")
            if self.protocol_version != EXTENSION_PROTOCOL_VERSION:
                raise ValueError(f"`protocolVersion` must be `{EXTENSION_PROTOCOL_VERSION}`")
            if self.input_schema is None or self.output_schema is None:
                raise ValueError(
                    "an extension.process action requires inputSchema and outputSchema"
                )
            if any(not c for c in self.capabilities) or len(set(self.capabilities)) != len(
                self.capabilities
            ):
                raise ValueError("extension capabilities must be non-empty and unique")
        else:
            bad = [_alias(n) for n in extension_only if n in set_fields]
            if bad:
                raise ValueError(f"{', '.join(bad)} only apply to extension.process")
        return self


def _function_rules(action: Action, function_step: bool) -> None:
    """``python.function`` (docs/python-steps.md): a function instead of a command."""
    own = ["function", "python", "source_digest"]
    if not function_step:
        bad = [_alias(n) for n in own if n in action.model_fields_set]
        if bad:
            raise ValueError(f"{', '.join(bad)} only apply to python.function")
        return
    if action.function is None or _FUNCTION_RE.fullmatch(action.function) is None:
        raise ValueError(
            "a python.function action requires `function: module:callable` (or "
            f"`file.py:callable`), got {action.function!r}"
        )
    if ".." in action.function.split(":", 1)[0].split("/") or action.function.startswith("/"):
        raise ValueError("`function` must name a module or a file under the workflow's folder")
    misplaced = [_alias(n) for n in ("command", "args") if n in action.model_fields_set]
    if misplaced:
        raise ValueError(f"{', '.join(misplaced)} do not apply to python.function (see `function`)")
    if action.python is not None and "\0" in action.python:
        raise ValueError("`python` must not contain NUL")


def _alias(field_name: str) -> str:
    return Action.model_fields[field_name].alias or field_name


class Tool(SpecModel):
    """A model-callable tool contract (docs/workflow-language.md)."""

    kind: ToolKind
    description: str
    input_schema: JsonSchema
    output_schema: JsonSchema
    capability: str
    risk: Risk
    effect_class: EffectClass
    idempotency: Idempotency
    retry_safe: bool
    timeout_seconds: TimeoutSeconds
    secrets: list[SecretRef] = Field(default_factory=list)
    network: list[str] = Field(default_factory=list)
    approval: ApprovalOverride = "policy"


class Subworkflow(SpecModel):
    """A reusable, typed task graph invoked by ``uses: workflow:<name>``
    (docs/workflow-language.md)."""

    version: str
    inputs: JsonObject = Field(default_factory=dict)
    input_schema: JsonSchema
    outputs: JsonObject = Field(default_factory=dict)
    output_schema: JsonSchema
    tasks: list[Task]

    @field_validator("version")
    @classmethod
    def _semver(cls, value: str) -> str:
        if _SEMVER_RE.fullmatch(value) is None:
            raise ValueError(f"version `{value}` is not a semantic version such as 1.2.0")
        return value


# How long an MCP request may take when the server sets no timeoutSeconds.
MCP_DEFAULT_TIMEOUT_SECONDS = 120


class McpServer(SpecModel):
    """An MCP server reached over Streamable HTTP (``url``, docs/protocols.md) or, beyond upstream,
    a
    local server spoken to over stdio (``command`` with ``args``, ``env`` and ``cwd``; its
    executable must be in ``policy.processAllowlist``)."""

    url: str | None = None
    headers: dict[str, SecretRef] = Field(default_factory=dict)
    timeout_seconds: TimeoutSeconds = MCP_DEFAULT_TIMEOUT_SECONDS
    protocol_version: str = "2025-11-25"
    command: str | None = Field(default=None, min_length=1)
    args: list[str] | None = None
    env: dict[str, SecretRef] | None = None
    cwd: str | None = None

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.url is None) == (self.command is None):
            raise ValueError(
                "an MCP server needs exactly one of `url` (Streamable HTTP) or `command` (stdio)"
            )
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError("`args`, `env` and `cwd` only apply to a stdio server (`command`)")
        if self.command is not None and self.headers:
            raise ValueError("`headers` only apply to an HTTP server (`url`)")
        return self


class A2APeer(SpecModel):
    """An A2A peer agent (docs/protocols.md)."""

    card_url: str
    headers: dict[str, SecretRef] = Field(default_factory=dict)
    timeout_seconds: TimeoutSeconds = 120
    max_polls: int = Field(default=100, ge=1, le=1000)
    poll_interval_ms: int = Field(default=100, ge=1, le=60000)
    protocol_version: str = "1.0"
