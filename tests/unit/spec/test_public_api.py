"""The names other packages rely on: pinned so a rename is a deliberate, visible change."""

from __future__ import annotations

import inspect

import agentctl.spec as spec
from agentctl.spec import loader


def test_spec_all_is_pinned() -> None:
    assert sorted(spec.__all__) == sorted(
        [
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
            "diagnostic_at",
            "is_identifier",
            "load_workflow",
            "parse_uses",
            "parse_workflow_text",
            "workflow_json_schema",
            # The faces the command line uses (docs/architecture.md, "The door").
            "YamlProblem",
            "inspect_manifest",
            "is_legacy",
            "lock_packs",
            "merge_inputs",
            "migrate_document",
            "parse_yaml",
            "require_lock",
            "update_lock",
            "verify_manifest",
            "verify_packs",
        ]
    )
    for name in spec.__all__:
        assert hasattr(spec, name), name


def test_loader_signatures() -> None:
    assert str(inspect.signature(loader.load_workflow)) == (
        "(path: 'str | os.PathLike[str]') -> 'LoadResult'"
    )
    assert str(inspect.signature(loader.parse_workflow_text)) == (
        "(text: 'str', file: 'str' = '<input>') -> 'LoadResult'"
    )
    assert list(inspect.signature(loader.diagnostic_at).parameters) == [
        "code",
        "message",
        "path",
        "source",
        "help",
        "severity",
    ]
    fields = {"path", "document", "diagnostics", "source", "raw"}
    assert fields <= set(loader.LoadResult.__dataclass_fields__)
    assert isinstance(inspect.getattr_static(loader.LoadResult, "ok"), property)
    assert loader.SourceMap.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_spec_does_not_import_cli_or_store_libraries() -> None:
    import subprocess
    import sys

    code = (
        "import sys, agentctl.spec, agentctl.spec.python_api; "
        "bad = [m for m in ('typer', 'rich', 'sqlalchemy', 'httpx') if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
