"""``agentctl db encryption``: seal payloads at rest (docs/encryption.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from agentctl.cli import output
from agentctl.cli.options import DbOption, db_from_context

app = typer.Typer(
    name="encryption",
    help="Seal run payloads and artifact bytes at rest with AES-256-GCM (docs/encryption.md)."
    "\n\nExample: agentctl db encryption enable --key-id k1 --key-env AGENTCTL_KEY",
    no_args_is_help=True,
)

KeyIdOption = Annotated[
    str, typer.Option("--key-id", help="Name of the key, recorded beside each sealed value.")
]
KeyEnvOption = Annotated[
    str,
    typer.Option(
        "--key-env",
        help="Environment variable holding the base64 32-byte key (its name is recorded, "
        "never the key).",
    ),
]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Report what would be sealed; change nothing.")
]


@app.command("inventory")
def inventory_command(ctx: typer.Context, db: DbOption = None) -> None:
    """List which payload columns are sealed, under which key ids, and what is still clear.

    Needs no key: it counts values, it never opens them.

    Example: agentctl --output json db encryption inventory
    """
    from agentctl.runtime import Runtime

    data = Runtime(db_from_context(ctx, db)).encryption_inventory().to_json()
    out = output.current()

    def human() -> None:
        state = f"on, key {data['activeKeyId']}" if data["enabled"] else "off"
        print(f"encryption      {state}", file=out.stdout)
        for key in data["keys"]:
            print(f"  key {key['keyId']:<12} {key['status']:<8} ${key['keyEnv']}", file=out.stdout)
        for column in data["columns"]:
            sealed = ", ".join(f"{k}: {n}" for k, n in column["sealed"].items()) or "-"
            name = f"{column['table']}.{column['column']}"
            print(f"  {name:<34} clear {column['clear']:<6} sealed {sealed}", file=out.stdout)
        blobs = data.get("blobs", {})
        if blobs:
            sealed = ", ".join(f"{k}: {n}" for k, n in blobs.items() if k != "clear") or "-"
            print(
                f"  {'artifact blobs':<34} clear {blobs['clear']:<6} sealed {sealed}",
                file=out.stdout,
            )

    out.success("EncryptionInventory", data, human=human)


def _migrate(
    ctx: typer.Context, db: str | None, key_id: str, key_env: str, dry_run: bool, rotating: bool
) -> None:
    from agentctl.runtime import Runtime

    data = (
        Runtime(db_from_context(ctx, db))
        .encrypt(key_id, key_env, rotating=rotating, dry_run=dry_run)
        .to_json()
    )
    verb = "rotated to" if rotating else "enabled under"
    if dry_run:
        human = f"would seal {data['valuesToSeal']} value(s) under key {key_id} (dry run)"
    else:
        human = (
            f"encryption {verb} key {key_id}: {data['valuesSealed']} value(s) sealed in "
            f"{data['batches']} batch(es); {data['clearValuesLeft']} clear value(s) left"
        )
    output.current().success("EncryptionMigration", data, human=human)


@app.command("enable")
def enable_command(
    ctx: typer.Context,
    key_id: KeyIdOption,
    key_env: KeyEnvOption,
    dry_run: DryRunOption = False,
    db: DbOption = None,
) -> None:
    """Seal every payload under a new key, then every new write.

    Works in short batches, so runs go on meanwhile; interrupted, run it again to finish.
    Keep the key: without it sealed payloads cannot be read (exit 5, encryption.key_missing).

    Example: agentctl db encryption enable --key-id k1 --key-env AGENTCTL_KEY
    """
    _migrate(ctx, db, key_id, key_env, dry_run, rotating=False)


@app.command("rotate")
def rotate_command(
    ctx: typer.Context,
    key_id: KeyIdOption,
    key_env: KeyEnvOption,
    dry_run: DryRunOption = False,
    db: DbOption = None,
) -> None:
    """Re-seal every payload under a new key; the old key may then be dropped.

    The old key must be readable during the rotation: from the variable recorded at
    enable, or as ID=BASE64 in AGENTCTL_ENCRYPTION_KEYS.

    Example: agentctl db encryption rotate --key-id k2 --key-env AGENTCTL_KEY_2
    """
    _migrate(ctx, db, key_id, key_env, dry_run, rotating=True)
