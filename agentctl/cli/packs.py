"""``agentctl packs …`` (alias ``pack``): inspect and verify manifests, pin a workflow's
local packs in its lock, update and verify the pins."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentctl.cli import output

app = typer.Typer(
    help="Local packs: inspect and verify manifests, pin them in agentctl.pack.lock and "
    "verify the pins.\n\nExample: agentctl packs verify-lock review.yaml",
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

    Example: agentctl packs lock deploy.yaml
    """
    from agentctl.spec import lock_packs

    _render("PackLock", lock_packs(workflow), "locked")


@app.command("verify-lock")
def verify_lock_command(workflow: WorkflowArgument) -> None:
    """Check the workflow's packs against agentctl.pack.lock (exit 2 if anything differs).

    Example: agentctl packs verify-lock deploy.yaml --output json
    """
    from agentctl.spec import verify_packs

    _render("PackVerification", verify_packs(workflow), "verified")


@app.command("verify")
def verify_command(
    path: Annotated[
        str,
        typer.Argument(
            help="With --integrity: a pack manifest (or its directory). Without: a workflow, "
            "whose lock is checked as by verify-lock."
        ),
    ],
    integrity: Annotated[
        str | None,
        typer.Option(
            "--integrity", help="The manifest's expected sha256:<64 hex> (exit 2 if it differs)."
        ),
    ] = None,
) -> None:
    """Verify a pack manifest's bytes against --integrity; without it, a workflow's lock.

    Example: agentctl packs verify packs/utility --integrity sha256:2f53…
    Example: agentctl packs verify deploy.yaml
    """
    if integrity is None:
        verify_lock_command(path)
        return
    from agentctl.spec import verify_manifest

    data = verify_manifest(path, integrity)
    output.current().success(
        "PackVerification",
        data,
        human=f"verified {data['name']} {data['version']} ({data['integrity'][:19]}…)",
    )


@app.command("inspect")
def inspect_command(
    manifest: Annotated[str, typer.Argument(help="A pack manifest, or the pack's directory.")],
) -> None:
    """Show what a pack manifest declares: items, requirements, dependencies, integrity.

    Example: agentctl packs inspect packs/utility/agentctl-pack.yaml
    """
    from agentctl.spec import inspect_manifest

    data = inspect_manifest(manifest)
    out = output.current()

    def human() -> None:
        requires = data["agentctl"]
        fits = "ok" if requires["satisfied"] else f"not {requires['current']}"
        print(f"{data['name']} {data['version']}  {data['integrity']}", file=out.stdout)
        print(f"  agentctl {requires['requires']} ({fits})", file=out.stdout)
        for name, wanted in data["dependencies"].items():
            print(f"  depends on {name} {wanted}", file=out.stdout)
        for kind, names in data["items"].items():
            if names:
                print(f"  {kind}: {', '.join(names)}", file=out.stdout)

    out.success("PackInspection", data, human=human)


@app.command("update")
def update_command(
    workflow: WorkflowArgument,
    pack: Annotated[
        list[str] | None,
        typer.Option("--pack", help="Only this pack (repeatable); the others keep their pins."),
    ] = None,
) -> None:
    """Re-pin the workflow's packs (or only --pack P) in agentctl.pack.lock from their
    current bytes, after a reviewed change. Packs are local: nothing is fetched.

    Example: agentctl packs update deploy.yaml --pack example.utility
    """
    from agentctl.spec import update_lock

    _render("PackLock", update_lock(workflow, pack or ()), "updated")
