"""Policy (docs/workflow-language.md) and workflow-level compensation settings
(docs/durable-execution.md).

Policy is data here; deciding allow / approve / deny per effect is the policy engine's job.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from agentctl.spec.models_common import SecretRef, SpecModel

__all__ = ["ApprovalMode", "Compensation", "NetworkPolicy", "NonInteractiveMode", "Policy"]

ApprovalMode = Literal["never", "mutations", "high_risk", "always"]
NonInteractiveMode = Literal["pause", "deny_approval", "fail"]
Port = Annotated[int, Field(ge=1, le=65535)]
Scheme = Literal["http", "https"]
IsolationLevel = Literal["process", "sandbox", "container"]

#: Isolation levels from weakest to strongest; ``minimumIsolation`` compares with this order.
ISOLATION_LEVELS: tuple[str, ...] = ("process", "sandbox", "container")


def _default_schemes() -> list[Scheme]:
    return ["https", "http"]


class NetworkPolicy(SpecModel):
    """Scheme, port, address and transport rules for outbound HTTP **[ADV]**
    (docs/workflow-language.md)."""

    allowed_schemes: list[Scheme] = Field(default_factory=_default_schemes, min_length=1)
    allowed_ports: list[Port] = Field(default_factory=list)
    allow_private: bool = False
    allow_proxy: bool = False
    custom_ca: SecretRef | None = None
    connect_timeout_seconds: int = Field(default=10, ge=1, le=120)
    max_response_bytes: int = Field(default=8388608, ge=1, le=67108864)


class Policy(SpecModel):
    """What a run may touch and when a human must approve (docs/workflow-language.md)."""

    workspace_root: str = "."
    writable_roots: list[str] = Field(default_factory=list)
    environment_allowlist: list[str] = Field(default_factory=list)
    network_allowlist: list[str] = Field(default_factory=list)
    network: NetworkPolicy = Field(default_factory=NetworkPolicy)
    process_allowlist: list[str] = Field(default_factory=list)
    secret_file_roots: list[str] = Field(default_factory=list)
    secret_process_allowlist: list[str] = Field(default_factory=list)
    providers: list[str] = Field(default_factory=list)
    tools_allow: list[str] = Field(default_factory=list)
    tools_deny: list[str] = Field(default_factory=list)
    approval: ApprovalMode = "mutations"
    non_interactive: NonInteractiveMode = "pause"
    minimum_isolation: IsolationLevel = "process"


class Compensation(SpecModel):
    """How compensation runs are started and approved (docs/durable-execution.md)."""

    on_failure: Literal["manual", "automatic"] = "manual"
    approval: Literal["policy", "never", "always"] = "policy"
