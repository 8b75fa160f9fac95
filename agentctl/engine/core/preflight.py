"""Checks made before a run record exists (docs/providers.md, docs/workflow-language.md,
docs/user-guide.md).

Every provider an agent task reaches is built once: a credential that cannot be resolved
exits 6 before anything is journaled, and its endpoint's host must be allowed by
``policy.networkAllowlist`` (exact hosts, or ``*.suffix`` for subdomains — never the bare
suffix); a host outside it is a policy error (exit 3). Only sources and SHA-256 digests of
credentials are ever returned.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agentctl.compiler.plan import Plan
from agentctl.errors import BlockedError, PolicyDeniedError, ProviderError
from agentctl.spec.models_policy import Policy

__all__ = [
    "check_credentials",
    "check_providers",
    "host_allowed",
    "reached_providers",
    "smoke_request",
]


def host_allowed(host: str, allowlist: Sequence[str]) -> bool:
    host = host.lower().rstrip(".")
    for pattern in allowlist:
        pattern = pattern.lower().rstrip(".")
        if pattern.startswith("*."):
            if host.endswith(pattern[1:]) and host != pattern[2:]:
                return True
        elif host == pattern:
            return True
    return False


def reached_providers(plan: Plan, workflow: Mapping[str, Any]) -> list[str]:
    """Provider names used by at least one agent task of the plan, in plan order."""
    agents = (workflow.get("spec") or {}).get("agents") or {}
    names: list[str] = []
    for task_id in plan.order:
        task = plan.tasks[task_id]
        if task.uses.kind != "agent":
            continue
        provider = str((agents.get(str(task.uses.name)) or {}).get("provider"))
        if provider not in names:
            names.append(provider)
    return names


def check_providers(
    plan: Plan,
    workflow: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    workspace: Path | None = None,
) -> list[dict[str, Any]]:
    """Describe each reached provider; raise before the run when one cannot be used."""
    from agentctl.policy.secrets import secret_sources

    policy = (workflow.get("spec") or {}).get("policy") or {}
    root = policy.get("workspaceRoot") or Policy.default_of("workspace_root")
    base = (workspace or Path.cwd()) / str(root)
    with secret_sources(base.resolve(), policy):
        return _check_providers(plan, workflow, environ)


def _check_providers(
    plan: Plan, workflow: Mapping[str, Any], environ: Mapping[str, str] | None
) -> list[dict[str, Any]]:
    from agentctl.providers.registry import describe_provider

    spec = workflow.get("spec") or {}
    policy = spec.get("policy") or {}
    allowlist = list(policy.get("networkAllowlist") or [])
    described = []
    for name in reached_providers(plan, workflow):
        definition = (spec.get("providers") or {}).get(name) or {}
        try:
            info = describe_provider(
                name,
                definition,
                environ=environ if environ is not None else os.environ,
                process_allowlist=list(policy.get("processAllowlist") or []),
            )
        except PolicyDeniedError as exc:
            raise BlockedError(exc.message, code=exc.code, hint=exc.hint) from exc
        endpoint = info.get("endpoint")
        if isinstance(endpoint, str) and endpoint:
            host = urlsplit(endpoint).hostname or ""
            if not host_allowed(host, allowlist):
                raise BlockedError(
                    f"provider `{name}` calls {host}, which is not in spec.policy.networkAllowlist",
                    code="policy.network_denied",
                    hint=f"add `{host}` (or a `*.domain` pattern) to spec.policy.networkAllowlist",
                )
        described.append(info)
    return described


def check_credentials(workflow_path: str, *, smoke: bool = False) -> list[dict[str, Any]]:
    """What ``agentctl auth check`` reports: each reached provider with its credential's
    source and SHA-256 (never the value); with ``smoke``, the answer to one tiny request.

    The credential sources are the workflow's own (``policy.workspaceRoot`` beside the
    file), exactly as a run of it would resolve them.
    """
    from agentctl.engine.core.workflow_files import compile_workflow_file
    from agentctl.policy.secrets import secret_sources
    from agentctl.spec import load_workflow

    plan, _ = compile_workflow_file(workflow_path)
    loaded = load_workflow(workflow_path)
    assert loaded.document is not None  # it just compiled
    document = loaded.document.model_dump(mode="json", by_alias=True)
    described = check_providers(plan, document, workspace=Path(workflow_path).resolve().parent)
    results: list[dict[str, Any]] = []
    policy = (document.get("spec") or {}).get("policy") or {}
    root = policy.get("workspaceRoot") or Policy.default_of("workspace_root")
    base = Path(workflow_path).resolve().parent / str(root)
    with secret_sources(base.resolve(), policy):
        for info in described:
            entry = dict(info)
            if smoke:
                entry["smoke"] = asyncio.run(smoke_request(info["provider"], document))
            results.append(entry)
    return results


async def smoke_request(name: str, document: Mapping[str, Any]) -> dict[str, Any]:
    """One tiny live request to provider ``name`` (``auth check --smoke``); exit 6 on failure."""
    import time

    from agentctl.providers.base import Message, ModelRequest, ProviderCallError
    from agentctl.providers.registry import build_provider

    spec = document.get("spec") or {}
    definition = (spec.get("providers") or {}).get(name) or {}
    agents: dict[str, Any] = spec.get("agents") or {}
    agent: dict[str, Any] = next((a for a in agents.values() if a.get("provider") == name), {})
    provider = build_provider(
        name,
        definition,
        process_allowlist=list((spec.get("policy") or {}).get("processAllowlist") or []),
    )
    request = ModelRequest(
        provider=name,
        model=str(agent.get("model") or ""),
        instructions="Reply with OK.",
        messages=(Message(role="user", text="ping"),),
        tools=(),
        max_output_tokens=16,
        structured_output=None,
        options={},
        timeout_seconds=30.0,
    )
    started = time.monotonic()
    try:
        response = await asyncio.wait_for(provider.complete(request), 30)
    except (ProviderCallError, TimeoutError) as exc:
        raise ProviderError(
            f"smoke request to provider `{name}` failed: {exc}",
            code="provider.smoke_failed",
            hint="check the endpoint, model name and credential",
        ) from exc
    return {"seconds": time.monotonic() - started, "finishReason": response.finish_reason}
