"""``agentctl doctor FILE``: a workflow's prerequisites, checked without dispatching."""

from __future__ import annotations

from typing import Annotated

import typer

from agentctl.cli import output
from agentctl.errors import EXIT_OK, EXIT_PROVIDER


def doctor_command(
    workflow: Annotated[str, typer.Argument(help="Workflow file (.yaml, .yml, .json or .py).")],
    workspace: Annotated[
        str | None,
        typer.Option(
            "--workspace",
            help="Directory the workflow will run in (default: the workflow file's directory).",
        ),
    ] = None,
) -> int:
    """Check a workflow's prerequisites without dispatching anything.

    Commands on the allow-list found on PATH, providers' credentials resolvable, MCP and
    A2A endpoints accepting connections on their declared addresses, the sandbox or
    container runtime present, writable roots writable. Each problem names its fix. Exit 0
    when every check passes, 6 when one is missing or unverified (kind DoctorReport
    either way), 2 when the workflow itself is invalid.

    Example: agentctl doctor deploy.yaml --workspace ./checkout
    """
    from agentctl.runtime import Runtime

    report = Runtime.doctor(workflow, workspace)
    out = output.current()

    def human() -> None:
        for check in report.checks:
            print(f"{check.status:<10} {check.check}: {check.target}", file=out.stdout)
            if check.status != "ok":
                print(f"           {check.detail}", file=out.stdout)
                if check.fix:
                    print(f"           fix: {check.fix}", file=out.stdout)
        verdict = "ready" if report.ok else "not ready"
        print(f"{report.workflow}: {verdict} ({len(report.checks)} checks)", file=out.stdout)

    out.success("DoctorReport", report.to_json(), human=human)
    return EXIT_OK if report.ok else EXIT_PROVIDER
