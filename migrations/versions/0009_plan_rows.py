"""Store a run's compiled plan as one row per task, and its whole workflow apart.

Why: the run row held the whole compiled plan (about 1 KB per task) and the whole
workflow document as JSON, so resuming a run, reading its state or re-submitting it
parsed (and, for SQLite, walked the overflow pages of) data proportional to the run's
length. Now the run row keeps the plan's header (``taskCount`` instead of ``tasks`` and
``order``) and the document without ``spec.tasks``; ``plan_tasks`` holds one compact
record per task (fields at their defaults left out, the id in the key) and
``run_workflows`` the whole document. Resume reads only the rows of the tasks it still has
to run. Existing runs are converted here, a batch of runs at a time; downgrade puts the
whole plan and document back into the run row.

The check for records written in a newer format, made before a run is resumed, scanned
every row of the run in eight tables; a partial index per table of the rows in a newer
format (none, in a database this release wrote) makes it one empty index probe each.

Revision ID: 0009_plan_rows
Revises: 0008_session_names
Create Date: 2026-12-04 10:00:00
"""

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0009_plan_rows"
down_revision: str | None = "0008_session_names"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: A task record's fields at these values are left out of its row (kept here, not
#: imported, so this revision converts the same way whatever the code does later).
_DEFAULTS: dict[str, Any] = {
    "needs": [],
    "expansion": None,
    "routeGuards": [],
    "memoryWrites": [],
    "when": None,
    "vars": {},
    "input": {},
    "retry": {"maxAttempts": 1, "backoffMs": 0},
    "failure": "stop",
    "compensate": None,
    "outputSchema": None,
}
_BATCH = 200
#: Tables whose records a resume checks for a newer format first: each gains a partial
#: index of such rows (format version 1 is the newest this revision knows).
_NEWER_FORMAT_TABLES = (
    "tasks",
    "effects",
    "approvals",
    "checkpoints",
    "audit_events",
    "provider_sessions",
    "tool_calls",
    "artifact_refs",
)


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _runs(conn: sa.Connection, columns: str) -> Any:
    """Every run's ``id`` and ``columns``, a batch at a time (keyset by id)."""
    after = ""
    while True:
        rows = conn.execute(
            sa.text(f"SELECT id, {columns} FROM runs WHERE id > :after ORDER BY id LIMIT :n"),
            {"after": after, "n": _BATCH},
        ).all()
        if not rows:
            return
        yield from rows
        after = rows[-1][0]


def _load(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def upgrade() -> None:
    op.create_table(
        "plan_tasks",
        sa.Column("run_id", sa.String(length=80), nullable=False),
        sa.Column("task_id", sa.String(length=512), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("record_json", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_plan_tasks_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "task_id", name="pk_plan_tasks"),
    )
    op.create_table(
        "run_workflows",
        sa.Column("run_id", sa.String(length=80), nullable=False),
        sa.Column("workflow_json", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_run_workflows_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", name="pk_run_workflows"),
    )
    for table in _NEWER_FORMAT_TABLES:
        op.create_index(
            f"ix_{table}_newer_format",
            table,
            ["run_id"],
            unique=False,
            sqlite_where=sa.text("format_version > 1"),
            postgresql_where=sa.text("format_version > 1"),
        )
    conn = op.get_bind()
    insert_task = sa.text(
        "INSERT INTO plan_tasks (run_id, task_id, ordinal, record_json) "
        "VALUES (:run, :task, :ordinal, :record)"
    )
    for run_id, plan_json, workflow_json in _runs(conn, "plan_json, workflow_json"):
        conn.execute(
            sa.text("INSERT INTO run_workflows (run_id, workflow_json) VALUES (:run, :doc)"),
            {"run": run_id, "doc": workflow_json or "{}"},
        )
        document = _load(workflow_json)
        spec = document.get("spec") if isinstance(document, dict) else None
        if isinstance(spec, dict) and "tasks" in spec:
            runtime = {**document, "spec": {k: v for k, v in spec.items() if k != "tasks"}}
            conn.execute(
                sa.text("UPDATE runs SET workflow_json = :doc WHERE id = :run"),
                {"doc": _dumps(runtime), "run": run_id},
            )
        plan = _load(plan_json)
        if not (
            isinstance(plan, dict)
            and isinstance(plan.get("tasks"), dict)
            and isinstance(plan.get("order"), list)
        ):
            continue  # not a plan this revision can split; readers report it as malformed
        rows = []
        for ordinal, task_id in enumerate(plan["order"]):
            record = dict(plan["tasks"].get(task_id) or {})
            record.pop("id", None)
            for key, default in _DEFAULTS.items():
                if key in record and record[key] == default:
                    del record[key]
            rows.append(
                {"run": run_id, "task": task_id, "ordinal": ordinal, "record": _dumps(record)}
            )
        if rows:
            conn.execute(insert_task, rows)
        header = {k: v for k, v in plan.items() if k not in ("tasks", "order")}
        header["taskCount"] = len(rows)
        header["artifactTasks"] = [
            t for t in plan["order"] if (plan["tasks"].get(t) or {}).get("artifacts")
        ]
        conn.execute(
            sa.text("UPDATE runs SET plan_json = :plan WHERE id = :run"),
            {"plan": _dumps(header), "run": run_id},
        )


def downgrade() -> None:
    conn = op.get_bind()
    for run_id, plan_json in _runs(conn, "plan_json"):
        header = _load(plan_json)
        if isinstance(header, dict) and "taskCount" in header:
            records = conn.execute(
                sa.text(
                    "SELECT task_id, record_json FROM plan_tasks WHERE run_id = :run "
                    "ORDER BY ordinal"
                ),
                {"run": run_id},
            ).all()
            plan = {k: v for k, v in header.items() if k not in ("taskCount", "artifactTasks")}
            plan["order"] = [task_id for task_id, _ in records]
            plan["tasks"] = {
                task_id: {**_DEFAULTS, **json.loads(record), "id": task_id}
                for task_id, record in records
            }
            conn.execute(
                sa.text("UPDATE runs SET plan_json = :plan WHERE id = :run"),
                {"plan": _dumps(plan), "run": run_id},
            )
        document = conn.execute(
            sa.text("SELECT workflow_json FROM run_workflows WHERE run_id = :run"),
            {"run": run_id},
        ).scalar()
        if document is not None:
            conn.execute(
                sa.text("UPDATE runs SET workflow_json = :doc WHERE id = :run"),
                {"doc": document, "run": run_id},
            )
    for table in _NEWER_FORMAT_TABLES:
        op.drop_index(f"ix_{table}_newer_format", table_name=table)
    op.drop_table("run_workflows")
    op.drop_table("plan_tasks")
