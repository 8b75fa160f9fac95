"""The workflow language front end: document model, YAML/JSON/Python loaders, JSON Schema.

``load_workflow(path)`` turns a file into a :class:`LoadResult` holding a validated
:class:`Workflow` (or located diagnostics); the compiler takes it from there.
"""

from agentctl.spec.document import API_VERSION, KIND, Metadata, Spec, Workflow
from agentctl.spec.inputs import merge_inputs
from agentctl.spec.loader import (
    MAX_DOCUMENT_BYTES,
    LoadResult,
    load_workflow,
    parse_workflow_text,
)
from agentctl.spec.migrate_legacy import is_legacy, migrate_document
from agentctl.spec.models_common import (
    EnvSecretRef,
    FileSecretRef,
    ProcessSecretRef,
    ProcessSecretSpec,
    Retry,
    SecretRef,
    SpecModel,
    is_identifier,
)
from agentctl.spec.models_definitions import (
    A2APeer,
    Action,
    ActionKind,
    Agent,
    ContainerSpec,
    McpServer,
    Provider,
    ProviderKind,
    Reasoning,
    Subworkflow,
    Tool,
    ToolKind,
    UsageLimit,
)
from agentctl.spec.models_packs import Pack, PackTrust
from agentctl.spec.models_policy import Compensation, NetworkPolicy, Policy
from agentctl.spec.models_runtime import (
    Budgets,
    Embedding,
    LongTermMemory,
    Memory,
    OutputSettings,
    PriceEntry,
    Pricing,
    Runtime,
)
from agentctl.spec.models_tasks import (
    Compensate,
    Foreach,
    Loop,
    Matrix,
    Route,
    RouteCase,
    Task,
    UsesRef,
    parse_uses,
)
from agentctl.spec.pack_ops import (
    inspect_manifest,
    lock_packs,
    update_lock,
    verify_manifest,
    verify_packs,
)
from agentctl.spec.packs import require_lock
from agentctl.spec.schema import workflow_json_schema
from agentctl.spec.source_map import SourceMap, diagnostic_at
from agentctl.spec.yaml_source import YamlProblem, parse_yaml

__all__ = [
    "API_VERSION",
    "KIND",
    "MAX_DOCUMENT_BYTES",
    "A2APeer",
    "Action",
    "ActionKind",
    "Agent",
    "Budgets",
    "Compensate",
    "Compensation",
    "ContainerSpec",
    "Embedding",
    "EnvSecretRef",
    "FileSecretRef",
    "Foreach",
    "LoadResult",
    "LongTermMemory",
    "Loop",
    "Matrix",
    "McpServer",
    "Memory",
    "Metadata",
    "NetworkPolicy",
    "OutputSettings",
    "Pack",
    "PackTrust",
    "Policy",
    "PriceEntry",
    "Pricing",
    "ProcessSecretRef",
    "ProcessSecretSpec",
    "Provider",
    "ProviderKind",
    "Reasoning",
    "Retry",
    "Route",
    "RouteCase",
    "Runtime",
    "SecretRef",
    "SourceMap",
    "Spec",
    "SpecModel",
    "Subworkflow",
    "Task",
    "Tool",
    "ToolKind",
    "UsageLimit",
    "UsesRef",
    "Workflow",
    "YamlProblem",
    "diagnostic_at",
    "inspect_manifest",
    "is_identifier",
    "is_legacy",
    "load_workflow",
    "lock_packs",
    "merge_inputs",
    "migrate_document",
    "parse_uses",
    "parse_workflow_text",
    "parse_yaml",
    "require_lock",
    "update_lock",
    "verify_manifest",
    "verify_packs",
    "workflow_json_schema",
]
