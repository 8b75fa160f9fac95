"""``agentctl migrate FILE [--write PATH]``: a legacy ``playbook:`` file as ``agentctl.dev/v1``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentctl.cli import output


def migrate_command(
    workflow: Annotated[str, typer.Argument(help="The legacy `playbook:` file (YAML or JSON).")],
    write: Annotated[
        str | None,
        typer.Option(
            "--write",
            help="Write the translation to this new file (an existing file is never "
            "overwritten) instead of printing it.",
        ),
    ] = None,
) -> None:
    """Translate an unversioned legacy `playbook:` document to the agentctl.dev/v1 form.

    The translation is mechanical (playbook → metadata.name, modules → spec.actions,
    module:x → action:x, policy.approvalMode → policy.approval, working-memory initial →
    spec.memory.working, agents without a provider → the offline fake provider); each
    change is listed, and the result is validated as `check` would, so review it before
    use. Comments of the original are not carried over. Without --write the YAML goes to
    stdout (kind Migration in JSON mode).

    Example: agentctl migrate old-deploy.yaml --write deploy.yaml
    """
    import yaml

    from agentctl.errors import UsageError, ValidationError
    from agentctl.input_files import read_input_text
    from agentctl.spec import (
        MAX_DOCUMENT_BYTES,
        YamlProblem,
        is_legacy,
        migrate_document,
        parse_workflow_text,
        parse_yaml,
    )

    text = read_input_text(workflow, "workflow file", limit=MAX_DOCUMENT_BYTES)
    try:
        raw = parse_yaml(text).value
    except YamlProblem as exc:
        where = f":{exc.line}" if exc.line else ""
        raise ValidationError(
            f"{workflow}{where}: {exc.message}",
            code="workflow.invalid",
            hint="fix the YAML first; migrate reads the file as it is",
        ) from None
    if not is_legacy(raw):
        raise UsageError(
            f"{workflow} is not a legacy `playbook:` document"
            + (
                " (it already has an apiVersion)"
                if isinstance(raw, dict) and "apiVersion" in raw
                else ""
            ),
            code="migrate.not_legacy",
            hint=f"nothing to migrate; `agentctl check {workflow}` validates it",
        )
    document, notes = migrate_document(raw)
    translated = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)
    target = Path(write) if write is not None else None
    checked = parse_workflow_text(translated, str(target or workflow))
    diagnostics = list(checked.diagnostics)
    data = {
        "source": str(Path(workflow)),
        "apiVersion": document["apiVersion"],
        "document": document,
        "yaml": translated,
        "notes": notes,
        "valid": checked.ok,
        "written": None,
    }
    if target is not None:
        try:
            with target.open("x", encoding="utf-8") as handle:
                handle.write(translated)
        except FileExistsError:
            raise UsageError(
                f"{target} already exists; migrate never overwrites a file",
                hint="choose a new path with --write, or remove the file first",
            ) from None
        except OSError as exc:
            raise UsageError(f"cannot write {target}: {exc.strerror}") from exc
        data["written"] = str(target)
    out = output.current()

    def human() -> None:
        if target is None:
            out.stdout.write(translated)
        else:
            print(f"wrote {target} ({len(notes)} change(s))", file=out.stdout)
        for note in notes:
            print(f"  migrated: {note}", file=out.stderr)
        if not checked.ok:
            print(
                "  the translation does not validate yet: fix the diagnostics, then "
                "`agentctl check`",
                file=out.stderr,
            )

    out.success("Migration", data, diagnostics=diagnostics, human=human)
