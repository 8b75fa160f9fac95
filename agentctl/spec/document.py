"""The whole ``agentctl.dev/v1`` workflow document (docs/workflow-language.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agentctl.spec.models_common import (
    JsonObject,
    JsonSchema,
    SpecModel,
    ToolName,
    VarsFilePath,
)
from agentctl.spec.models_definitions import (
    A2APeer,
    Action,
    Agent,
    McpServer,
    Provider,
    Subworkflow,
    Tool,
)
from agentctl.spec.models_packs import Pack, PackTrust
from agentctl.spec.models_policy import Compensation, Policy
from agentctl.spec.models_runtime import Memory, OutputSettings, PythonSettings, Runtime
from agentctl.spec.models_tasks import Task

__all__ = ["API_VERSION", "KIND", "Metadata", "Spec", "Workflow"]

API_VERSION = "agentctl.dev/v1"
KIND = "Workflow"


class Metadata(SpecModel):
    """Identity of the workflow: its stable name appears in plans, runs and cache keys."""

    name: str = Field(min_length=1)
    description: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)


class Spec(SpecModel):
    """Everything a workflow declares (docs/workflow-language.md)."""

    inputs: JsonObject = Field(default_factory=dict)
    input_schema: JsonSchema | None = None
    vars: JsonObject = Field(default_factory=dict)
    vars_files: list[VarsFilePath] = Field(default_factory=list)
    outputs: JsonObject = Field(default_factory=dict)
    providers: dict[str, Provider] = Field(default_factory=dict)
    agents: dict[str, Agent] = Field(default_factory=dict)
    actions: dict[str, Action] = Field(default_factory=dict)
    tools: dict[ToolName, Tool] = Field(default_factory=dict)
    subworkflows: dict[str, Subworkflow] = Field(default_factory=dict)
    compensation: Compensation = Field(default_factory=Compensation)
    tasks: list[Task] = Field(min_length=1)
    policy: Policy = Field(default_factory=Policy)
    memory: Memory = Field(default_factory=Memory)
    mcp_servers: dict[str, McpServer] = Field(default_factory=dict)
    a2a_peers: dict[str, A2APeer] = Field(default_factory=dict, alias="a2aPeers")
    packs: list[Pack] = Field(default_factory=list)
    pack_trust: PackTrust = Field(default_factory=PackTrust)
    runtime: Runtime = Field(default_factory=Runtime)
    python: PythonSettings = Field(default_factory=PythonSettings)
    output: OutputSettings = Field(default_factory=OutputSettings)


class Workflow(SpecModel):
    """A parsed, shape-validated workflow document; the compiler's input."""

    api_version: Literal["agentctl.dev/v1"] = Field(alias="apiVersion")
    kind: Literal["Workflow"]
    metadata: Metadata
    spec: Spec

    @property
    def name(self) -> str:
        """The workflow's stable name (``metadata.name``)."""
        return self.metadata.name
