"""The run page's timeline: one row per task, a bar per attempt, and the waits drawn apart.

Built from what ``inspect`` returns (task start and finish, retry history, approvals) and the
run's audit events (when it parked and resumed; agentctl/engine/run/timing.py reads the same
events for ``inspect``'s execution and waiting times). Positions are percentages of the
run's span, so the page draws it with plain HTML and CSS, and a live refresh redraws it.

Segment kinds: ``attempt`` (the task executing), ``backoff`` (between two attempts),
``approval`` and ``question`` (waiting for a person's decision or answer), ``pause``
(parked at a pause step) and ``parked`` (the run parked for another reason, until resumed).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from agentctl.runtime_dashboard import parked_intervals
from agentctl.signals import PAUSE_PREFIX
from agentctl.web.graph import child_label

__all__ = ["MAX_ROWS", "run_timeline"]

#: Rows drawn at most (a 1,000-item foreach shows its first rows and says how many more).
MAX_ROWS = 100

_TERMINAL_EVENTS = {
    "task.succeeded",
    "task.failed",
    "task.skipped",
    "task.cancelled",
}
_RUN_MARKERS = {
    "run.created": "created",
    "run.paused": "parked",
    "run.resumed": "resumed",
    "run.succeeded": "succeeded",
    "run.failed": "failed",
    "run.cancelled": "cancelled",
}


def _at(text: str | None) -> datetime | None:
    if not text:
        return None
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)


def _naive(moment: datetime) -> datetime:
    return moment if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)


def _seconds(value: float) -> str:
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    return f"{int(value // 60)}m {int(value % 60):02d}s"


def run_timeline(
    data: dict[str, Any],
    events: list[Any],
    plan_tasks: Mapping[str, Any],
    now: datetime,
) -> dict[str, Any]:
    """``{rows, markers, span, hidden}`` for the run page (``data`` is ``inspect_run``'s)."""
    run = data["run"]
    start = _at(run["createdAt"]) or now
    running = run["state"] == "running"
    end = now if running or run["state"] == "paused" else (_at(run["updatedAt"]) or now)
    end = max(end, start + timedelta(milliseconds=1))
    total = (end - start).total_seconds()
    parked = parked_intervals(events)
    finished_by_event: dict[str, datetime] = {}
    resumes: list[datetime] = [start]
    pause_tasks: set[str] = set()
    first_event: dict[str, datetime] = {}
    markers = []
    for event in events:
        when = _naive(event.created_at)
        if event.kind in _TERMINAL_EVENTS and event.task_id:
            finished_by_event[event.task_id] = when
        if event.task_id and event.task_id not in first_event:
            first_event[event.task_id] = when
        if event.kind == "run.resumed":
            resumes.append(when)
        if event.kind == "run.paused":
            # "waiting for pause:TASK, approval-…": the pause steps it parked at.
            message = str(((event.payload or {}).get("error") or {}).get("message") or "")
            pause_tasks.update(
                word.strip(",")[len(PAUSE_PREFIX) :]
                for word in message.split()
                if word.startswith(PAUSE_PREFIX)
            )
        if event.kind in _RUN_MARKERS:
            markers.append({"label": _RUN_MARKERS[event.kind], "kind": event.kind, "at": when})

    def place(left: datetime, right: datetime) -> dict[str, float]:
        lo = max(0.0, (left - start).total_seconds() / total * 100)
        hi = min(100.0, (right - start).total_seconds() / total * 100)
        return {"left": round(lo, 3), "width": round(max(hi - lo, 0.25), 3)}

    retries: dict[str, list[dict[str, Any]]] = {}
    for retry in data["retries"]:
        retries.setdefault(retry.get("taskId") or "", []).append(retry)
    waits_of: dict[str, list[dict[str, Any]]] = {}
    for approval in data["approvals"]:
        waits_of.setdefault(approval.get("taskId") or "", []).append(approval)

    finished: dict[str, datetime] = {}
    rows: list[dict[str, Any]] = []
    hidden = 0
    for task in data["tasks"]:
        task_id = task["taskId"]
        state = task["state"]
        if state == "pending":
            continue
        last = _at(task.get("finishedAt")) or finished_by_event.get(task_id)
        if last is None:
            last = end if state not in ("skipped", "cancelled") else None
        if last is None:
            continue
        finished[task_id] = last
        if len(rows) >= MAX_ROWS:
            hidden += 1  # counted only: no later row is drawn to need its times
            continue
        first = _at(task.get("startedAt"))
        if first is None:
            # Not recorded for a task without effects: it began once its needs had finished
            # and the run was executing (created, or last resumed before it finished).
            # Its first own event (a park, an effect) bounds that from above.
            anchor = min(first_event.get(task_id, last), last)
            needs = (plan_tasks.get(task_id) or {}).get("needs") or []
            ready = [finished[n] for n in needs if n in finished]
            began = max([r for r in resumes if r <= anchor] or [start])
            first = min(max(ready + [began]), anchor)
        segments: list[dict[str, Any]] = []
        attempt_start = first
        for retry in sorted(retries.get(task_id, []), key=lambda r: r["at"]):
            failed_at = _at(retry["at"]) or attempt_start
            segments.append(
                {
                    "kind": "attempt",
                    "state": "failed",
                    "label": f"attempt {retry['failedAttempt']} failed",
                    **place(attempt_start, failed_at),
                }
            )
            wait = timedelta(milliseconds=float(retry.get("waitMs") or 0))
            segments.append(
                {
                    "kind": "backoff",
                    "label": f"backoff {_seconds(wait.total_seconds())}",
                    **place(failed_at, failed_at + wait),
                }
            )
            attempt_start = failed_at + wait
        segments.append(
            {
                "kind": "attempt",
                "state": state,
                "label": f"attempt {task['attempt'] or 1} {state.replace('_', ' ')}",
                **place(attempt_start, last),
            }
        )
        paused_here = (
            task_id in pause_tasks or (task.get("error") or {}).get("code") == "task.paused"
        )
        for approval in waits_of.get(task_id, []):
            asked = _at(approval["createdAt"]) or first
            answered = _at(approval.get("resolvedAt")) or end
            kind = "question" if approval["kind"] == "question" else "approval"
            segments.append(
                {
                    "kind": kind,
                    "label": f"{kind} wait {_seconds((answered - asked).total_seconds())}",
                    **place(asked, answered),
                }
            )
        for left, right in parked:
            lo, hi = max(left, first), min(right or end, last)
            if hi <= lo:
                continue
            kind = "pause" if paused_here else "parked"
            segments.append(
                {
                    "kind": kind,
                    "label": f"{'paused' if kind == 'pause' else 'run parked'} "
                    f"{_seconds((hi - lo).total_seconds())}",
                    **place(lo, hi),
                }
            )
        expansion = (plan_tasks.get(task_id) or {}).get("expansion")
        rows.append(
            {
                "taskId": task_id,
                "label": child_label(expansion.get("bindings") or {}) if expansion else task_id,
                "state": state,
                "attempts": sum(1 for s in segments if s["kind"] == "attempt"),
                "segments": segments,
                "ran": task.get("executionSeconds"),
                "waited": task.get("waitingSeconds"),
            }
        )
    placed = []
    shown_at = -100.0
    for marker in markers:
        offset = place(marker["at"], marker["at"])["left"]
        # A label too close to the previous one is left off (its line is still drawn).
        text = marker["label"] if offset - shown_at >= 8 else ""
        if text:
            shown_at = offset
        placed.append({"label": text, "kind": marker["kind"], "left": offset})
    return {"rows": rows, "hidden": hidden, "markers": placed, "span": _seconds(total)}
