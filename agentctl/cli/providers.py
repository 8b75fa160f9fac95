"""``agentctl providers inspect FILE`` and ``agentctl auth check FILE [--smoke]``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer

from agentctl.cli import output
from agentctl.cli.authoring import compile_workflow_file
from agentctl.errors import ProviderError

providers_app = typer.Typer(
    name="providers",
    help="Inspect a workflow's model providers.\n\nExample: agentctl providers inspect review.yaml",
    no_args_is_help=True,
)
auth_app = typer.Typer(
    name="auth",
    help="Check provider credentials without printing them.\n\n"
    "Example: agentctl auth check review.yaml",
    no_args_is_help=True,
)

FileArgument = Annotated[str, typer.Argument(help="The workflow file.")]


@providers_app.command("inspect")
def inspect_command(workflow: FileArgument) -> None:
    """List each provider: kind, endpoint or command, capabilities, and what agents need.

    Example: agentctl providers inspect review.yaml
    """
    plan, _ = compile_workflow_file(workflow)
    data = {
        "workflow": plan.workflow_name,
        "providers": [p.to_json() for p in plan.requirements.providers],
    }
    out = output.current()

    def human() -> None:
        for provider in plan.requirements.providers:
            print(
                f"{provider.name} ({provider.kind}) agents: {', '.join(provider.agents)}",
                file=out.stdout,
            )
            print(f"  offers   {', '.join(provider.capabilities)}", file=out.stdout)
            print(f"  required {', '.join(provider.required)}", file=out.stdout)

    out.success("ProviderList", data, human=human)


@auth_app.command("check")
def check_command(
    workflow: FileArgument,
    smoke: Annotated[
        bool,
        typer.Option(
            "--smoke", help="Also send one tiny live request per provider (exit 6 on failure)."
        ),
    ] = False,
) -> None:
    """Resolve every reached provider's credentials; print sources and SHA-256 only.

    Exit 6 when a credential cannot be resolved (or a --smoke request fails), 3 when an
    endpoint is outside policy.networkAllowlist.

    Example: agentctl auth check review.yaml
    """
    from agentctl.engine.preflight import check_providers
    from agentctl.policy.secrets import secret_sources

    plan, _ = compile_workflow_file(workflow)
    from agentctl.spec import load_workflow

    loaded = load_workflow(workflow)
    assert loaded.document is not None
    document = loaded.document.model_dump(mode="json", by_alias=True)
    described = check_providers(plan, document, workspace=Path(workflow).resolve().parent)
    results: list[dict[str, Any]] = []
    policy = (document.get("spec") or {}).get("policy") or {}
    base = Path(workflow).resolve().parent / str(policy.get("workspaceRoot") or ".")
    with secret_sources(base.resolve(), policy):
        for info in described:
            entry = dict(info)
            if smoke:
                entry["smoke"] = asyncio.run(_smoke(info["provider"], document))
            results.append(entry)
    out = output.current()

    def human() -> None:
        if not results:
            print("no agent task reaches a provider", file=out.stdout)
        for entry in results:
            credential = entry.get("credential")
            where = (
                f"{credential.get('source')} sha256:{credential.get('sha256', '')[:12]}"
                if isinstance(credential, dict)
                else "none needed"
            )
            line = f"{entry['provider']} ({entry['kind']}): credential {where}"
            if "smoke" in entry:
                line += f"; smoke ok in {entry['smoke']['seconds']:.2f}s"
            print(line, file=out.stdout)

    out.success("AuthCheck", {"providers": results}, human=human)


async def _smoke(name: str, document: dict[str, Any]) -> dict[str, Any]:
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
