"""The one copy path for results a derived run takes over from its source run.

Replay, retry, repair and fork all create a run whose reused (or replayed) tasks must stand
on their own: the source run may be collected by ``agentctl gc`` later. The task record
(status, attempt, output and its digest, resolved-input digest, working-memory delta and
its digest, artifact manifest, the recorded condition decisions, error for replays,
provenance) and the task's artifact refs
are copied together, in the caller's transaction. A copied ref is a new version of the
same name pointing at the same blob, so ``agentctl artifacts gc`` keeps the bytes while
any run that lists them survives.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentctl.errors import NotFoundError
from agentctl.store import artifacts_repo
from agentctl.store.records import check_format_version
from agentctl.store.sealing import unseal_columns
from agentctl.store.statements import columns, statement
from agentctl.store.transitions import guarded_update

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect

__all__ = ["copy_task_record"]

_TASK_COLUMNS = (
    "status",
    "attempt",
    "output_json",
    "output_digest",
    "input_digest",
    "state_delta_json",
    "state_delta_digest",
    "artifact_manifest_json",
    "error_json",
    "format_version",
    "condition_json",
)
_REF_COLUMNS = (
    "blob_digest",
    "name",
    "path",
    "definition_fingerprint",
    "input_digest",
    "output_digest",
    "format_version",
)


def copy_task_record(
    conn: Any,
    *,
    source_run_id: str,
    target_run_id: str,
    task_id: str,
    disposition: str,
    now: datetime,
    keep_error: bool = False,
) -> dict[str, Any]:
    """Copy one task's record and artifact refs; returns its working-memory delta."""
    row = _task.run(conn, run_id=source_run_id, task_id=task_id).first()
    if row is None:
        raise NotFoundError(f"task {source_run_id}/{task_id} does not exist", run_id=source_run_id)
    check_format_version("task", f"{source_run_id}/{task_id}", int(row[9]))
    # Opened under the source's record; guarded_update seals them again under the target's.
    row = unseal_columns(
        conn,
        "tasks",
        (source_run_id, task_id),
        row,
        {"output_json": 2, "state_delta_json": 5, "error_json": 8},
    )
    (status, attempt, output, output_digest, input_digest, delta, delta_digest, manifest) = row[:8]
    values: dict[str, Any] = {
        "status": status,
        "attempt": attempt,
        "disposition": disposition,
        "output_json": output,
        "output_digest": output_digest,
        "input_digest": input_digest,
        "state_delta_json": delta,
        "state_delta_digest": delta_digest,
        "artifact_manifest_json": manifest,
        "condition_json": row[10],
        "source_run_id": source_run_id,
        "source_task_id": task_id,
        "finished_at": now,
    }
    if keep_error:
        values["error_json"] = row[8]
    guarded_update(conn, "task", (target_run_id, task_id), values)
    _copy_refs(conn, source_run_id, target_run_id, task_id, now)
    return dict(json.loads(delta)) if delta else {}


@statement
def _task(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import tasks

    return select(*columns(tasks, _TASK_COLUMNS)).where(
        tasks.c.run_id == bindparam("run_id"), tasks.c.task_id == bindparam("task_id")
    )


def _copy_refs(
    conn: Any, source_run_id: str, target_run_id: str, task_id: str, now: datetime
) -> None:
    refs = list(_refs.run(conn, run_id=source_run_id, task_id=task_id))
    for blob, name, path, fingerprint, input_digest, output_digest, version in refs:
        check_format_version("artifact ref", f"{source_run_id}/{task_id}/{name}", int(version))
        artifacts_repo.insert_ref(
            conn,
            digest=blob,
            run_id=target_run_id,
            task_id=task_id,
            name=name,
            path=path,
            definition_fingerprint=fingerprint,
            input_digest=input_digest,
            output_digest=output_digest,
            now=now,
            format_version=int(version),
        )


@statement
def _refs(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.artifact_tables import artifact_refs

    c = artifact_refs.c
    return (
        select(*columns(artifact_refs, _REF_COLUMNS))
        .where(c.run_id == bindparam("run_id"), c.task_id == bindparam("task_id"))
        .order_by(c.id)
    )
