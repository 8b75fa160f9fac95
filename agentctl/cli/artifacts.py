"""``agentctl artifacts list|versions|inspect|verify|export|gc``: the content-addressed
store."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from agentctl.cli import output
from agentctl.cli.options import DbOption, db_from_context

if TYPE_CHECKING:
    from agentctl.artifacts import ArtifactStore

__all__ = ["app"]

app = typer.Typer(
    name="artifacts",
    help="Files tasks wrote, stored by SHA-256: list, versions, inspect, verify, export, gc."
    "\n\nExample: agentctl artifacts list --run RUN",
    no_args_is_help=True,
)

DigestArgument = Annotated[
    str, typer.Argument(help="sha256:<hex>, or at least 8 leading hex digits of it.")
]


@app.callback()
def _group(ctx: typer.Context, db: DbOption = None) -> None:
    """Files tasks wrote, stored by SHA-256: list, versions, inspect, verify, export, gc.

    Example: agentctl artifacts list --run RUN
    """
    ctx.obj = {"db": db}


@contextmanager
def _opened(ctx: typer.Context, db: str | None) -> Iterator[ArtifactStore]:
    from agentctl.runtime import Runtime

    with Runtime(db_from_context(ctx, db)).artifact_store() as artifacts:
        yield artifacts


def _size(size: int | None) -> str:
    if size is None:
        return "?"
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


@app.command("list")
def list_command(
    ctx: typer.Context,
    run: Annotated[str | None, typer.Option("--run", help="Only this run's artifacts.")] = None,
    task: Annotated[str | None, typer.Option("--task", help="Only this task's artifacts.")] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Only versions of this artifact name.")
    ] = None,
    blobs: Annotated[
        bool,
        typer.Option(
            "--blobs",
            help="List stored blobs instead of versions: size, age, refs, leases, and "
            "whether `artifacts gc` would remove them.",
        ),
    ] = False,
    older_than_days: Annotated[
        int,
        typer.Option(
            "--older-than-days",
            min=0,
            help="With --blobs: the gc grace period used to mark collectable blobs.",
        ),
    ] = 30,
    db: DbOption = None,
) -> None:
    """List artifact versions (name, version, digest, size, run, task), or with --blobs
    every stored blob, referenced or not.

    Example: agentctl artifacts list --blobs --older-than-days 7
    """
    from agentctl.runtime import Runtime

    if blobs:
        if run is not None or task is not None or name is not None:
            from agentctl.errors import UsageError

            raise UsageError(
                "--blobs lists every blob; it cannot be combined with --run, --task or --name",
                hint="drop the filters, or list versions without --blobs",
            )
        _list_blobs(ctx, db, older_than_days)
        return
    listed = Runtime(db_from_context(ctx, db)).artifacts(run_id=run, task_id=task, name=name)
    found = [ref.to_json() for ref in listed]
    out = output.current()

    def human() -> None:
        if not found:
            print("no artifacts", file=out.stdout)
        for ref in found:
            print(
                f"{ref['name']} v{ref['version']}  {ref['digest'][:19]}  {_size(ref['size'])}  "
                f"run {ref['runId']} task {ref['taskId']}",
                file=out.stdout,
            )

    out.success("ArtifactList", {"artifacts": found}, human=human)


@app.command("versions")
def versions_command(
    ctx: typer.Context,
    name: Annotated[
        str,
        typer.Argument(
            help="The artifact's name: a name a task declares in `artifacts`, or the path "
            "of a file a task wrote."
        ),
    ],
    db: DbOption = None,
) -> None:
    """List every version of one artifact, oldest first: version, digest, size, the run
    and task that wrote it, and when.

    Example: agentctl artifacts versions report
    """
    from agentctl.errors import NotFoundError

    with _opened(ctx, db) as artifacts:
        found = [ref.to_json() for ref in artifacts.versions(name)]
    if not found:
        raise NotFoundError(
            f"no artifact named `{name}` has been recorded",
            code="artifact.not_found",
            hint="list names with `agentctl artifacts list`; a task declares one with "
            "artifacts: [{name: NAME, path: FILE}]",
        )
    out = output.current()

    def human() -> None:
        for ref in found:
            print(
                f"v{ref['version']}  {ref['digest'][:19]}  {_size(ref['size']):>9}  "
                f"run {ref['runId']} task {ref['taskId']}  {ref['createdAt']}",
                file=out.stdout,
            )

    out.success("ArtifactVersions", {"name": name, "versions": found}, human=human)


def _age(seconds: float) -> str:
    for unit, span in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= span:
            return f"{int(seconds // span)}{unit}"
    return f"{int(seconds)}s"


def _list_blobs(ctx: typer.Context, db: str | None, older_than_days: int) -> None:
    from agentctl.artifacts import list_blobs

    with _opened(ctx, db) as artifacts:
        found = list_blobs(artifacts, older_than_days=older_than_days)
    out = output.current()

    def human() -> None:
        if not found:
            print("no blobs", file=out.stdout)
        for blob in found:
            notes = [] if blob.present else ["MISSING"]
            if blob.leases:
                notes.append(f"leased ({blob.leases})")
            if blob.collectable:
                notes.append("gc would remove")
            print(
                f"{blob.digest[:19]}  {_size(blob.size):>9}  {_age(blob.age_seconds):>4}  "
                f"{blob.refs} ref(s)  {', '.join(notes)}".rstrip(),
                file=out.stdout,
            )

    data = {
        "olderThanDays": older_than_days,
        "blobs": [blob.to_json() for blob in found],
        "collectable": sum(1 for blob in found if blob.collectable),
    }
    out.success("BlobList", data, human=human)


@app.command("inspect")
def inspect_command(ctx: typer.Context, digest: DigestArgument, db: DbOption = None) -> None:
    """Show one blob: size, media type, whether its file is present, refs and leases.

    Example: agentctl artifacts inspect sha256:3a4a
    """
    with _opened(ctx, db) as artifacts:
        info = artifacts.inspect(digest)
    state = "present" if info.present else "MISSING"
    names = ", ".join(f"{ref.name} v{ref.version}" for ref in info.refs) or "no refs"
    output.current().success(
        "Artifact",
        info.to_json(),
        human=f"{info.digest} {_size(info.size)} {state}; {names}",
    )


@app.command("verify")
def verify_command(
    ctx: typer.Context,
    digest: Annotated[
        str | None, typer.Argument(help="The blob to check (default: every blob).")
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Check every blob in the store.")] = False,
    db: DbOption = None,
) -> None:
    """Rehash stored bytes; exit 5 when any blob is missing or corrupt.

    Example: agentctl artifacts verify
    """
    from agentctl.diagnostics import Diagnostic
    from agentctl.errors import PersistenceError, UsageError

    if digest is not None and all_:
        raise UsageError(
            "pass either DIGEST or --all, not both",
            hint="agentctl artifacts verify --all, or agentctl artifacts verify DIGEST",
        )
    with _opened(ctx, db) as artifacts:
        report = artifacts.verify(digest)
    if report.problems:
        raise PersistenceError(
            f"{len(report.problems)} problem(s) in {report.checked} artifact blob(s): "
            "bytes are missing or corrupt",
            code="artifact.verify_failed",
            hint="rerun the tasks that wrote them (retry/repair refuse to reuse them)",
            diagnostics=[
                Diagnostic(
                    code=f"artifact.{problem.kind}", message=problem.message, file=problem.path
                )
                for problem in report.problems
            ],
        )
    output.current().success(
        "ArtifactVerification",
        report.to_json(),
        human=f"verified {report.ok} of {report.checked} artifact blob(s): all intact",
    )


@app.command("export")
def export_command(
    ctx: typer.Context,
    artifact: Annotated[
        str,
        typer.Argument(
            help="NAME (its newest version), NAME@VERSION, or a blob's sha256:<hex> (or at "
            "least 8 leading hex digits of it)."
        ),
    ],
    dest: Annotated[
        str, typer.Argument(help="The file to create: any path you could write with cp.")
    ],
    overwrite: Annotated[
        bool, typer.Option("--force", "--overwrite", help="Replace DEST if it already exists.")
    ] = False,
    db: DbOption = None,
) -> None:
    """Copy an artifact version (or a blob) to DEST atomically: the bytes are checked
    against their digest, then appear under DEST in one step. An existing DEST is kept
    unless --force, and a symlink at DEST is replaced, never written through.

    Example: agentctl artifacts export report@2 /tmp/report-v2.md --force
    """
    from agentctl.artifacts import find_version

    with _opened(ctx, db) as artifacts:
        ref = find_version(artifacts, artifact)
        digest = artifact if ref is None else ref.digest
        result = artifacts.export(digest, dest, overwrite=overwrite, confine=False)
    data = result.to_json()
    shown = result.digest
    if ref is not None:
        data.update({"name": ref.name, "version": ref.version})
        shown = f"{ref.name}@{ref.version} ({result.digest[:19]})"
    output.current().success(
        "ArtifactExport",
        data,
        human=f"exported {shown} to {result.path} ({_size(result.size)})",
    )


@app.command("gc")
def gc_command(
    ctx: typer.Context,
    older_than_days: Annotated[
        int,
        typer.Option(
            "--older-than-days", min=0, help="Grace period for unreferenced blobs, in days."
        ),
    ] = 30,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Report what would go; delete nothing.")
    ] = False,
    db: DbOption = None,
) -> None:
    """Remove blobs no ref or live lease keeps (and stale temporary files).

    Example: agentctl artifacts gc --dry-run
    """
    with _opened(ctx, db) as artifacts:
        report = artifacts.gc(older_than_days=older_than_days, dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    output.current().success(
        "ArtifactGc",
        report.to_json(),
        human=f"{verb} {len(report.removed_blobs)} blob(s) ({_size(report.removed_bytes)}) and "
        f"{len(report.removed_temp_files)} temporary file(s); kept {report.kept_referenced} "
        f"referenced, {report.kept_leased} leased, {report.kept_recent} recent",
    )
