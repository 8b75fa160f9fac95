"""``agentctl db``: schema migration and database statistics."""

from __future__ import annotations

import typer

from agentctl.cli import db_encryption, output
from agentctl.cli.options import DbOption, db_from_context

app = typer.Typer(
    name="db",
    help="Inspect and migrate the store (a SQLite file or a PostgreSQL database)."
    "\n\nExample: agentctl db check --db .agentctl/runtime.db",
    no_args_is_help=True,
)


@app.callback()
def _group(ctx: typer.Context, db: DbOption = None) -> None:
    """Inspect and migrate the store (a SQLite file or a PostgreSQL database).

    Example: agentctl db stats --db .agentctl/runtime.db
    """
    ctx.obj = {"db": db}


@app.command("migrate")
def migrate_command(ctx: typer.Context, db: DbOption = None) -> None:
    """Upgrade the database to this agentctl's schema (also done automatically on open).

    A database written by a newer agentctl is refused (exit 5) and left unchanged. A
    PostgreSQL database must exist already (createdb); its URL is never created as a file.

    Example: agentctl db migrate --db postgresql://agentctl@db.internal/agentctl
    """
    from agentctl.runtime import Runtime

    migration = Runtime(db_from_context(ctx, db)).migrate()
    path = migration.path  # a URL's password is never printed
    before, after = migration.from_revision, migration.to_revision
    if not migration.changed:
        human = f"{path} is up to date at schema revision {after}"
    else:
        human = f"{path} migrated from {before or 'an empty database'} to {after}"
    output.current().success("DbMigration", migration.to_json(), human=human)


@app.command("stats")
def stats_command(ctx: typer.Context, db: DbOption = None) -> None:
    """Print the schema revision, record counts, database and WAL size.

    Example: agentctl --output json db stats
    """
    from agentctl.runtime import Runtime

    stats = Runtime(db_from_context(ctx, db)).stats()
    out = output.current()

    def human() -> None:
        print(f"database        {stats.path}", file=out.stdout)
        print(f"schema revision {stats.revision} (head {stats.head_revision})", file=out.stdout)
        print(
            f"size            {stats.database_bytes} bytes, WAL {stats.wal_bytes} bytes",
            file=out.stdout,
        )
        print(
            f"journal         {stats.journal_mode}, synchronous={stats.synchronous}",
            file=out.stdout,
        )
        for table, count in stats.counts.items():
            print(f"  {table:<22} {count}", file=out.stdout)

    out.success("DbStats", stats.to_json(), human=human)


@app.command("check")
def check_command(ctx: typer.Context, db: DbOption = None) -> None:
    """Check the database: SQLite integrity, foreign keys, audit chains, artifact bytes.

    Exit 0 when everything is sound, 5 otherwise (each finding is listed). A database
    found damaged is marked so that no run starts on it until a later check finds it
    sound (after you restore it from a backup).

    Example: agentctl db check --db .agentctl/runtime.db
    """
    from agentctl.diagnostics import Diagnostic
    from agentctl.errors import PersistenceError
    from agentctl.runtime import Runtime

    path = db_from_context(ctx, db)
    report = Runtime(path).check_database()
    if not report.ok:
        raise PersistenceError(
            f"database {path} failed its check: {len(report.findings())} finding(s)",
            code="store.damaged" if report.damaged else "store.check_failed",
            hint="restore the database from a backup, then run `agentctl db check` again"
            if report.damaged
            else "inspect the runs and blobs named above; `agentctl artifacts verify --all` "
            "and `agentctl audit RUN --verify` show each in detail",
            diagnostics=[
                Diagnostic(code="store.check", message=line) for line in report.findings()
            ],
        )
    out = output.current()
    out.success(
        "DatabaseCheck",
        report.to_json(),
        human=f"{path}: integrity ok, foreign keys ok, {report.audit_chains.checked} audit "
        f"chain(s) verify, {report.artifact_blobs.checked} artifact blob(s) intact",
    )


app.add_typer(db_encryption.app, name="encryption")
