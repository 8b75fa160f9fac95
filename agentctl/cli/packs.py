"""``agentctl pack lock`` and ``pack verify``: pin a workflow's local packs."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentctl.cli import output

app = typer.Typer(
    help="Local packs: pin them in agentctl.pack.lock and verify the pins."
    "\n\nExample: agentctl pack verify review.yaml",
    no_args_is_help=True,
)

WorkflowArgument = Annotated[
    str, typer.Argument(help="Workflow file whose spec.packs to lock or verify.")
]


def _render(kind: str, data: dict[str, Any], verb: str) -> None:
    diagnostics = data.pop("diagnostics")
    out = output.current()

    def human() -> None:
        print(f"{verb} {len(data['packs'])} pack(s) in {data['lockFile']}", file=out.stdout)
        for pack in data["packs"]:
            items = ", ".join(n for names in pack["items"].values() for n in names)
            print(
                f"  {pack['name']} {pack['version']}  {pack['integrity'][:19]}…  "
                f"{pack['trust']}\n    items: {items or '(none)'}",
                file=out.stdout,
            )
            if pack.get("policyDefaults"):
                print(
                    "    policyDefaults (informational, not applied): "
                    + ", ".join(sorted(pack["policyDefaults"])),
                    file=out.stdout,
                )

    out.success(kind, data, diagnostics=diagnostics, human=human)


@app.command("lock")
def lock_command(workflow: WorkflowArgument) -> None:
    """Verify the workflow's packs and pin them in agentctl.pack.lock beside it.

    Each pack's manifest bytes (integrity) and every file of its directory (content) are
    pinned; afterwards check, plan and roll refuse a pack whose bytes differ. Run it again
    after reviewing a pack change.

    Example: agentctl pack lock deploy.yaml
    """
    from agentctl.spec.pack_ops import lock_packs

    _render("PackLock", lock_packs(workflow), "locked")


@app.command("verify")
def verify_command(workflow: WorkflowArgument) -> None:
    """Check the workflow's packs against agentctl.pack.lock (exit 2 if anything differs).

    Example: agentctl pack verify deploy.yaml --output json
    """
    from agentctl.spec.pack_ops import verify_packs

    _render("PackVerification", verify_packs(workflow), "verified")
