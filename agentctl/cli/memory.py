"""``agentctl memory get|put|search|reindex`` and the top-level ``agentctl gc``.

The CLI embeds with ``local_hash`` only: it has no workflow to name a remote embedding
provider. It uses the dimensions the namespace's ``local_hash`` entries already have
(default 64), and refuses vector work on a namespace embedded by another provider rather
than silently comparing vectors from different spaces.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentctl.cli import output
from agentctl.cli.options import DbOption, db_from_context

if TYPE_CHECKING:
    from agentctl.memory import LongTermMemory

__all__ = ["app", "gc_command"]

app = typer.Typer(
    name="memory",
    no_args_is_help=True,
)

NamespaceArgument = Annotated[str, typer.Argument(help="The memory namespace.")]
KeyArgument = Annotated[str, typer.Argument(help="The entry's key within the namespace.")]


@app.callback()
def _group(ctx: typer.Context, db: DbOption = None) -> None:
    """Long-term memory: get, put, search (text, vector, hybrid) and reindex entries.

    Example: agentctl memory search notes 'release checklist'
    """
    ctx.obj = {"db": db}


@contextmanager
def _opened(
    ctx: typer.Context, db: str | None, namespace: str, *, create: bool = False
) -> Iterator[LongTermMemory]:
    from agentctl.runtime import Runtime

    with Runtime(db_from_context(ctx, db)).long_term_memory(namespace, create=create) as memory:
        yield memory


def _require_local_vectors(memory: LongTermMemory, namespace: str) -> None:
    from agentctl.errors import UsageError

    foreign = sorted(m for m in memory.embedding_models(namespace) if m != memory.embedder.identity)
    if foreign:
        raise UsageError(
            f"namespace {namespace!r} holds entries embedded as {', '.join(foreign)}; "
            f"the CLI embeds with {memory.embedder.identity} only",
            code="memory.embedding_mismatch",
            hint="search with --mode text, or run the workflow that configured the embedder",
        )


def _parse_json(text: str, what: str) -> Any:
    from agentctl.errors import UsageError

    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(
            f"{what} is not valid JSON: {exc}",
            hint="quote JSON strings inside the shell quotes, e.g. '\"some text\"'",
        ) from exc


@app.command("get")
def get_command(
    ctx: typer.Context, namespace: NamespaceArgument, key: KeyArgument, db: DbOption = None
) -> None:
    """Show one live entry (exit 5 when the key is absent or expired).

    Example: agentctl memory get notes k1
    """
    with _opened(ctx, db, namespace) as memory:
        record = memory.require(namespace, key)
    data = record.to_json()
    value = json.dumps(record.entry.value, ensure_ascii=False)
    output.current().success("MemoryEntry", data, human=f"{namespace}/{key} = {value}")


@app.command("put")
def put_command(
    ctx: typer.Context,
    namespace: NamespaceArgument,
    key: KeyArgument,
    value_json: Annotated[
        str,
        typer.Argument(
            metavar="VALUE_JSON",
            help="The value as JSON; a JSON string without --text makes a text entry.",
        ),
    ],
    text: Annotated[
        str | None, typer.Option("--text", help="Searchable text for a JSON value.")
    ] = None,
    metadata: Annotated[
        str | None, typer.Option("--metadata", help="Metadata as a JSON object.")
    ] = None,
    retention_days: Annotated[
        int | None,
        typer.Option("--retention-days", help="Expire the entry after N days (1..36500)."),
    ] = None,
    db: DbOption = None,
) -> None:
    """Create or replace an entry (upsert), embedding its searchable text.

    Example: agentctl memory put notes k1 '{"city": "Oslo"}'
    """
    from agentctl.memory import entry_from_write_arguments

    arguments: dict[str, Any] = {"value": _parse_json(value_json, "VALUE_JSON")}
    if text is not None:
        arguments["text"] = text
    if metadata is not None:
        arguments["metadata"] = _parse_json(metadata, "--metadata")
    entry = entry_from_write_arguments(arguments)
    with _opened(ctx, db, namespace, create=True) as memory:
        result = memory.put(
            namespace,
            key,
            entry,
            retention_days=retention_days,
            provenance={"source": "cli"},
        )
    verb = "created" if result.created else "replaced"
    output.current().success("MemoryWrite", result.to_json(), human=f"{verb} {namespace}/{key}")


@app.command("search")
def search_command(
    ctx: typer.Context,
    namespace: NamespaceArgument,
    query: Annotated[str, typer.Argument(help="What to look for (free text).")],
    mode: Annotated[
        str, typer.Option("--mode", help="text (FTS5 BM25), vector (cosine) or hybrid (RRF).")
    ] = "text",
    limit: Annotated[int, typer.Option("--limit", help="Results to return (1..100).")] = 10,
    filters: Annotated[
        list[str] | None,
        typer.Option(
            "--filter",
            help="Exact metadata match K=JSON, e.g. team='\"ops\"' (repeatable).",
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Search a namespace; results by score (higher is better), then key.

    Example: agentctl memory search notes 'release checklist' --limit 5
    """
    from agentctl.errors import UsageError
    from agentctl.memory import SearchQuery

    parsed: dict[str, Any] = {}
    for item in filters or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(
                f"--filter {item!r} must look like KEY=JSON", hint="--filter team='\"ops\"'"
            )
        parsed[name] = _parse_json(value, f"--filter {name}")
    search = SearchQuery.build(namespace, query, mode=mode, limit=limit, filters=parsed)
    with _opened(ctx, db, namespace) as memory:
        if search.mode != "text":
            _require_local_vectors(memory, namespace)
        result = memory.retrieve(search)
    out = output.current()

    def human() -> None:
        if not result.hits:
            print("no results", file=out.stdout)
        for hit in result.hits:
            text = hit.entry["content"].get("text")
            if text is None:
                text = json.dumps(hit.entry["content"].get("value"), ensure_ascii=False)
            print(f"{hit.score:.6g}  {hit.key}  {text[:80]}", file=out.stdout)

    out.success("MemorySearch", result.to_json(), human=human)


@app.command("reindex")
def reindex_command(ctx: typer.Context, namespace: NamespaceArgument, db: DbOption = None) -> None:
    """Recompute a namespace's embeddings (local_hash) and rebuild the text index.

    Example: agentctl memory reindex notes
    """
    with _opened(ctx, db, namespace) as memory:
        report = memory.reindex(namespace)
    output.current().success(
        "MemoryReindex",
        report.to_json(),
        human=f"reindexed {report.entries} entries of {namespace} ({report.embedding_model})",
    )


def gc_command(
    ctx: typer.Context,
    older_than_days: Annotated[
        int,
        typer.Option(
            "--older-than-days", help="Remove terminal runs last updated more than N days ago."
        ),
    ] = 30,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would go; delete nothing.")
    ] = False,
    db: DbOption = None,
) -> None:
    """Remove expired long-term memory entries and old terminal runs.

    Example: agentctl gc --older-than-days 30 --dry-run
    """
    from agentctl.runtime import Runtime

    report = Runtime(db_from_context(ctx, db)).collect_garbage(
        older_than_days=older_than_days, dry_run=dry_run
    )
    verb = "would remove" if dry_run else "removed"
    output.current().success(
        "GcReport",
        report.to_json(),
        human=f"{verb} {report.memory_entries} expired memory entries and {report.runs} runs "
        f"finished before {report.to_json()['runsUpdatedBefore']}",
    )
