"""What each dashboard page shows, read from the store (no Starlette here).

Every read is one read transaction through the store repositories or the engine's own read
functions (the same ones behind ``agentctl inspect``, ``runs list``, ``approvals list`` and
``reconcile --list``), so the dashboard shows exactly what the CLI shows and never holds
the write lock a running ``roll`` needs.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agentctl import RunState, hints
from agentctl.errors import UsageError
from agentctl.runtime_dashboard import TERMINAL_RUN_STATES, Dashboard, TaskProgress, holder_gone
from agentctl.web.graph import plan_shape
from agentctl.web.reconcile_form import shape_of
from agentctl.web.timeline import MAX_ROWS, run_timeline
from agentctl.web.units import budget_rows

__all__ = [
    "RunPage",
    "format_duration",
    "format_seconds",
    "graph_document",
    "inbox",
    "page_cursor",
    "recorded_source",
    "run_page",
    "runs_page",
    "uncertain_effects",
]

RUN_STATES = [state.value for state in RunState]
MAX_SHOWN_JSON = 20_000
MAX_SEARCH_CHARS = 200
"""Longest run search; SQLite refuses LIKE patterns past 50,000 bytes, people type words."""
MAX_TASKS_SHOWN = 100
MAX_EVENTS_SHOWN = 100
DONE_STATES = frozenset({"succeeded", "failed", "skipped", "cancelled"})


def format_duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"


def format_seconds(seconds: float) -> str:
    """A short duration for the timeline: ``120 ms``, ``4.2 s``, ``2m 05s``."""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    return format_duration(seconds)


def pretty(value: Any) -> str:
    """JSON for a ``<pre>`` block, cut at a size a page can hold."""
    # Only what fits is indented (the indenting encoder is pure Python, and took seconds
    # over the outputs of a 1,000-item foreach); a longer value is written compact and
    # only as far as it is shown (a fan-out's join holds every child's output: a megabyte).
    head = _compact_head(value, MAX_SHOWN_JSON)
    if len(head) > MAX_SHOWN_JSON:
        return head[:MAX_SHOWN_JSON] + "\n… (cut here; `agentctl inspect` shows all of it)"
    text = json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)
    if len(text) > MAX_SHOWN_JSON:
        return text[:MAX_SHOWN_JSON] + f"\n… ({len(text) - MAX_SHOWN_JSON} more characters)"
    return text


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def _compact_head(value: Any, limit: int) -> str:
    """The start of ``_compact(value)``: all of it when it is at most ``limit`` characters,
    else at least ``limit + 1`` of them, written without encoding the rest."""
    parts: list[str] = []
    size = 0

    def put(text: str) -> bool:
        nonlocal size
        parts.append(text)
        size += len(text)
        return size > limit

    def walk(item: Any) -> bool:
        """Write ``item``; True once past the limit (the caller stops)."""
        if isinstance(item, dict) and item and all(isinstance(k, str) for k in item):
            if put("{"):
                return True
            for n, key in enumerate(sorted(item)):
                if put((", " if n else "") + _compact(key) + ": ") or walk(item[key]):
                    return True
            return put("}")
        if isinstance(item, list | tuple) and item:
            if put("["):
                return True
            for n, element in enumerate(item):
                if (n and put(", ")) or walk(element):
                    return True
            return put("]")
        return put(_compact(item))

    walk(value)
    return "".join(parts)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _duration(created: datetime, updated: datetime, state: str) -> str:
    # A parked run is not using time: its clock stops at its last change.
    end = _now() if state == RunState.RUNNING else updated
    return format_duration((end - created).total_seconds())


def runs_page(
    dashboard: Dashboard,
    *,
    state: str | None,
    workflow: str | None,
    search: str | None,
    limit: int,
    before: str | None = None,
) -> dict[str, Any]:
    """One page of runs, newest first; ``before`` is the cursor of the page's "older runs"
    link (:func:`page_cursor` of the last run shown)."""
    if search is not None and len(search) > MAX_SEARCH_CHARS:
        raise UsageError(
            f"the search text is {len(search)} characters long; at most {MAX_SEARCH_CHARS}",
            code="ui.search_too_long",
            hint="search for a shorter part of the run id or workflow name",
        )
    # One more row than shown tells whether an older page exists.
    found = dashboard.runs(
        state=state,
        workflow=workflow,
        search=search,
        limit=limit + 1,
        before=_parse_cursor(before),
    )
    rows, workflows = found.runs, found.workflows
    older = rows[limit - 1] if len(rows) > limit else None
    rows = rows[:limit]
    return {
        "runs": [
            {
                "id": row.id,
                "workflow": row.workflow_name,
                "state": row.status,
                "mode": row.mode,
                "started": row.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                "duration": _duration(row.created_at, row.updated_at, row.status),
                "done": row.tasks_done,
                "total": row.tasks_total,
                "waiting": row.pending_approvals,
                "ownerGone": row.status == RunState.RUNNING
                and row.owner_id is not None
                and holder_gone(row.owner_id, row.owner_lease_expires_at, _now()),
            }
            for row in rows
        ],
        "workflows": workflows,
        "states": RUN_STATES,
        "filters": {"state": state or "", "workflow": workflow or "", "q": search or ""},
        "limit": limit,
        "older": page_cursor(older.created_at, older.id) if older is not None else None,
        "paged": before is not None,
    }


def page_cursor(created_at: datetime, run_id: str) -> str:
    """The ``before=`` value that continues the runs list after this run."""
    return f"{created_at.isoformat()}~{run_id}"


def _parse_cursor(cursor: str | None) -> tuple[datetime, str] | None:
    if not cursor:
        return None
    stamp, _, run_id = cursor.partition("~")
    try:
        return datetime.fromisoformat(stamp), run_id
    except ValueError:
        raise UsageError(
            f"before={cursor!r} is not a page cursor",
            hint="follow the runs page's “older runs” link, or start again from /",
        ) from None


@dataclass
class RunPage:
    run: dict[str, Any]
    duration: str
    terminal: bool
    graph: dict[str, Any]
    tasks: list[dict[str, Any]]
    budget: list[dict[str, Any]]
    audit: dict[str, Any]
    events: list[dict[str, Any]]
    pending: list[dict[str, Any]]
    uncertain: list[dict[str, Any]]
    #: What a retry from the dashboard re-runs: the run's recorded workflow file (empty
    #: when it has none: retry is then offered only on the command line) and the tasks
    #: ``--from`` may name (expanded children are chosen through their source task).
    workflow_file: str = ""
    retry_roots: list[str] = field(default_factory=list)
    #: Tasks parked at a pause step (each offers Resume).
    paused: list[dict[str, Any]] = field(default_factory=list)
    #: What the run waits for, in words, one sentence each.
    waits: list[str] = field(default_factory=list)
    #: A run still marked running (or paused) whose owning process is gone.
    owner_gone: bool = False
    #: Bars per attempt and wait (agentctl/web/timeline.py).
    timeline: dict[str, Any] = field(default_factory=dict)
    #: Settled expanded children past the first MAX_TASKS_SHOWN tasks, and audit events
    #: before the last MAX_EVENTS_SHOWN, left off the page (a 1,000-item foreach stays
    #: quick to draw).
    hidden_tasks: int = 0
    hidden_events: int = 0
    #: Tasks settled, of all the run's tasks (listed or not).
    done: int = 0
    total: int = 0


def _detailed(plan_tasks: Mapping[str, Any], progress: list[TaskProgress]) -> list[str]:
    """The tasks the page draws in full: those its task list shows (the first
    MAX_TASKS_SHOWN, then only what is not a settled expanded child) and the first rows of
    its timeline. The rest are counted from their state alone, never decoded."""
    chosen: list[str] = []
    listed = drawn = 0
    for task in progress:
        plan_task = plan_tasks.get(task.task_id) or {}
        wanted = False
        if listed < MAX_TASKS_SHOWN or not (
            plan_task.get("expansion") and task.state in ("succeeded", "skipped")
        ):
            listed += 1
            wanted = True
        if task.state != "pending" and drawn < MAX_ROWS:
            # A skipped or cancelled task without a finish time may not be drawn: it is
            # detailed without counting towards the timeline's rows.
            if task.finished_at is not None or task.state not in ("skipped", "cancelled"):
                drawn += 1
            wanted = True
        if wanted:
            chosen.append(task.task_id)
    return chosen


def _light(task: TaskProgress) -> dict[str, Any]:
    """A task the page only counts: its state and times, as ``inspect`` names them."""
    return {
        "taskId": task.task_id,
        "state": task.state,
        "attempt": task.attempt,
        "startedAt": task.started_at.isoformat() if task.started_at else None,
        "finishedAt": task.finished_at.isoformat() if task.finished_at else None,
    }


def run_page(dashboard: Dashboard, run_id: str) -> RunPage:
    # One read of the run, its plan (kept per version) and its events; only the tasks the
    # page draws are decoded: a 1,000-item foreach has a thousand task outputs.
    view = dashboard.run_view(run_id, _detailed)
    row, data, events = view.row, view.document, view.events
    plan_tasks: Mapping[str, Any] = view.plan.get("tasks") or {}
    states = {task.task_id: task.state for task in view.progress}
    detailed = {task["taskId"]: task for task in data["tasks"]}
    by_task: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for key in ("effects", "approvals", "artifacts", "toolCalls"):
        for item in data[key]:
            by_task[item.get("taskId") or ""][key].append(item)
    for retry in data["retries"]:
        by_task[retry.get("taskId") or ""]["retries"].append(retry)
    shape = plan_shape(view.plan_key, view.plan)
    graph = shape.graph(states)
    tasks: list[dict[str, Any]] = []
    hidden_tasks = 0
    for progress in view.progress:
        task_id = progress.task_id
        plan_task = plan_tasks.get(task_id) or {}
        if (
            len(tasks) >= MAX_TASKS_SHOWN
            and plan_task.get("expansion")
            and progress.state in ("succeeded", "skipped")
        ):
            hidden_tasks += 1  # a long fan-out: its settled children stay in `inspect`
            continue
        task = detailed[task_id]
        related = by_task.get(task_id, {})
        tasks.append(
            {
                **task,
                "label": shape.labels.get(task_id, task_id),
                "kind": (plan_task.get("uses") or {}).get("kind", ""),
                "uses": (plan_task.get("uses") or {}).get("name", ""),
                "needs": plan_task.get("needs") or [],
                "input": pretty(plan_task.get("input") or {}),
                "outputText": pretty(task.get("output")) if task.get("output") is not None else "",
                "errorText": pretty(task["error"]) if task.get("error") else "",
                "effects": [
                    {**effect, "requestText": pretty(effect.get("request"))}
                    for effect in related.get("effects", [])
                ],
                "approvals": related.get("approvals", []),
                "artifacts": related.get("artifacts", []),
                "toolCalls": related.get("toolCalls", []),
                "retries": related.get("retries", []),
            }
        )
    run = data["run"]
    created = datetime.fromisoformat(run["createdAt"])
    updated = datetime.fromisoformat(run["updatedAt"])
    pending = [a for a in data["approvals"] if a["status"] == "pending"]
    terminal = run["state"] in TERMINAL_RUN_STATES
    uncertain = [
        {**effect, "requestText": pretty(effect.get("request")), "shape": shape_of(effect)}
        for effect in view.uncertain
    ]
    owner_gone = (
        run["state"] == RunState.RUNNING
        and row.owner_id is not None
        and holder_gone(row.owner_id, row.owner_lease_expires_at, _now())
    )
    timeline_data = {
        **data,
        "tasks": [detailed.get(task.task_id) or _light(task) for task in view.progress],
    }
    return RunPage(
        run={
            **run,
            "outputText": pretty(run["output"]) if run.get("output") is not None else "",
            "errorText": pretty(run["error"]) if run.get("error") else "",
            "inputsText": pretty(run.get("inputs") or {}),
        },
        duration=_duration(created, updated, run["state"]),
        terminal=terminal,
        graph=graph,
        tasks=tasks,
        budget=budget_rows(data["budget"]),
        audit=data["audit"],
        events=[
            {
                "seq": event.seq,
                "kind": event.kind,
                "taskId": event.task_id,
                "effectId": event.effect_id,
                "at": event.created_at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3],
                "payload": pretty(event.payload),
            }
            for event in events[-MAX_EVENTS_SHOWN:]
        ],
        hidden_tasks=hidden_tasks,
        hidden_events=max(0, len(events) - MAX_EVENTS_SHOWN),
        pending=pending,
        uncertain=uncertain,
        workflow_file=row.workflow_file or "",
        retry_roots=shape.retry_roots,
        paused=view.paused,
        waits=_waits(pending, view.paused, uncertain, owner_gone, row.owner_id),
        owner_gone=owner_gone,
        timeline=run_timeline(timeline_data, events, plan_tasks, _now()),
        done=sum(1 for task in view.progress if task.state in DONE_STATES),
        total=len(view.progress),
    )


def _waits(
    pending: list[dict[str, Any]],
    paused: list[dict[str, Any]],
    uncertain: list[dict[str, Any]],
    owner_gone: bool,
    owner: str | None,
) -> list[str]:
    """What a run waits for, as sentences a reader understands without the CLI."""
    said: list[str] = []
    if owner_gone:
        said.append(
            f"Owner gone — adopt or reconcile: the process that executed this run ({owner}) "
            "no longer exists, so nothing moves it on. Conclude any effect in doubt below, "
            "then adopt it: the dashboard resumes it from its durable state."
        )
    for item in pending:
        if item["kind"] == "question":
            said.append(f"An answer to “{item['prompt']}” (task {item['taskId']}).")
        else:
            said.append(
                f"A person to approve or reject “{item['prompt']}” (task {item['taskId']})."
            )
    for item in paused:
        note = f": “{item['message']}”" if item.get("message") else ""
        said.append(
            f"Someone to resume it past the pause step {item['taskId']}{note}. "
            "Resume it below when ready."
        )
    for effect in uncertain:
        said.append(
            f"An operator to say whether {effect['operation']} of task {effect['taskId']} "
            "happened: it started, but its outcome was never recorded (reconcile it below)."
        )
    return said


def graph_document(dashboard: Dashboard, run_id: str) -> dict[str, Any]:
    """``/runs/{run_id}/graph.json``: the graph the run page draws (agentctl/web/graph.py),
    with the run's id and state."""
    view = dashboard.graph_view(run_id)
    return {
        "runId": run_id,
        "state": view.state,
        **plan_shape(view.plan_key, view.plan).graph(view.states),
    }


def recorded_source(dashboard: Dashboard, run_id: str) -> tuple[str, str | None]:
    """The workflow file and workspace run ``run_id`` was created from (a dashboard retry
    compiles that same file in that same workspace)."""
    row = dashboard.recorded_source(run_id)
    if not row.workflow_file:
        raise UsageError(
            f"run {run_id} has no recorded workflow file to retry",
            hint="retry it from the command line: "
            + hints.quoted(hints.retry_failed("WORKFLOW", run_id)),
        )
    return row.workflow_file, row.workspace


def inbox(dashboard: Dashboard) -> list[dict[str, Any]]:
    """Every pending approval and question, oldest first, with its run's workflow."""
    found = []
    for approval, workflow in dashboard.pending_approvals():
        item = approval.to_json()
        item["workflow"] = workflow
        item["inputText"] = pretty(item.get("input")) if item.get("input") is not None else ""
        found.append(item)
    return found


def uncertain_effects(dashboard: Dashboard) -> list[dict[str, Any]]:
    """Effects whose outcome nobody knows, across runs (``agentctl reconcile --list``)."""
    return [
        {**effect, "requestText": pretty(effect.get("request")), "shape": shape_of(effect)}
        for effect in (record.to_json() for record in dashboard.uncertain_effects())
    ]
