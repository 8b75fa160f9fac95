"""``agentctl providers inspect FILE`` and ``agentctl auth check FILE [--smoke]``."""

from __future__ import annotations

from typing import Annotated

import typer

from agentctl.cli import output

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
    from agentctl.runtime import Runtime

    plan = Runtime.compile(workflow).plan
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
    from agentctl.runtime import Runtime

    results = Runtime.check_credentials(workflow, smoke=smoke)
    out = output.current()

    def human() -> None:
        if not results:
            print("no agent task reaches a provider", file=out.stdout)
        for entry in results:
            credential = entry.credential
            where = (
                f"{credential.get('source')} sha256:{credential.get('sha256', '')[:12]}"
                if credential is not None
                else "none needed"
            )
            line = f"{entry.provider} ({entry.kind}): credential {where}"
            if entry.smoke is not None:
                line += f"; smoke ok in {entry.smoke.seconds:.2f}s"
            print(line, file=out.stdout)

    providers = [entry.to_json() for entry in results]
    out.success("AuthCheck", {"providers": providers}, human=human)


@providers_app.command("smoke-openai")
def smoke_openai_command(
    live: Annotated[
        bool,
        typer.Option(
            "--live", help="Really send the request (required: this command uses the network)."
        ),
    ] = False,
    model: Annotated[
        str,
        typer.Option(
            "--model", help="The model to ask (default: $OPENAI_MODEL, else gpt-4.1-mini)."
        ),
    ] = "",
) -> None:
    """Send one bounded live request to OpenAI's Responses API (16 output tokens, 30 s).

    The key is OPENAI_API_KEY; the base URL is OPENAI_BASE_URL (default
    https://api.openai.com/v1), so an OpenAI-compatible server or a local stand-in can be
    named. Exit 6 without a key, or when the request fails; exit 2 without --live.

    Example: agentctl providers smoke-openai --live --model gpt-4.1-mini
    """
    import os

    from agentctl.errors import UsageError
    from agentctl.runtime import Runtime

    if not live:
        raise UsageError(
            "providers smoke-openai sends a real request; pass --live to allow it",
            hint="agentctl providers smoke-openai --live [--model M]",
        )
    chosen = model or os.environ.get("OPENAI_MODEL") or "gpt-4.1-mini"
    endpoint = os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    definition = {"kind": "openai", "endpoint": endpoint, "credential": {"env": "OPENAI_API_KEY"}}
    answer = Runtime.smoke_provider("openai", definition, model=chosen)
    data = {
        "provider": "openai",
        "model": chosen,
        "endpoint": endpoint,
        "ok": True,
        "seconds": round(float(answer.seconds), 3),
        "finishReason": answer.finish_reason,
    }
    output.current().success(
        "LiveProviderSmoke",
        data,
        human=f"openai {chosen} answered in {data['seconds']:.2f}s ({data['finishReason']})",
    )
