"""The human view of ``agentctl inspect RUN``.

Sections, each shown only when it has something to say: the run (state, start, duration,
error), its tasks as a tree (expanded children under the task they came from) with state,
attempts, time spent running and time spent waiting, its outputs, the budget ledger
(limit / reserved / used), the approvals and questions, the effects (uncertain ones
highlighted with the exact reconcile command), the next steps, and the checkpoint and audit
totals.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from agentctl.cli.table import STATE_COLORS, Cell, duration_text, render, time_text

__all__ = ["render_inspection"]

Paint = Callable[[str, str | None], str]


def render_inspection(data: dict[str, Any], *, color: bool) -> str:
    def paint(text: str, sgr: str | None) -> str:
        return f"\x1b[{sgr}m{text}\x1b[0m" if color and sgr else text

    lines = _run_lines(data["run"], paint)
    lines += _task_lines(data["tasks"], paint, color=color)
    for retry in data.get("retries") or []:
        code = (retry.get("error") or {}).get("code")
        lines.append(
            f"  retried {retry['taskId']}: attempt {retry['failedAttempt']} failed ({code}),"
            f" waited {retry['waitMs']} ms"
        )
    lines += _output_lines(data["run"].get("output"))
    lines += _budget_lines(data.get("budget") or [], color=color)
    lines += _approval_lines(data.get("approvals") or [], paint)
    lines += _effect_lines(data.get("effects") or [], paint)
    steps = data.get("next") or []
    if steps:
        lines.append(paint("next:", "1"))
        lines += [f"  {step['command']}  # {step['why']}" for step in steps]
    audit = data["audit"]
    verdict = "verified" if audit["verified"] else paint(f"BROKEN at {audit['brokenAt']}", "1;31")
    lines.append(f"checkpoints {data['checkpoints']}, audit events {audit['events']} ({verdict})")
    return "\n".join(lines)


def _run_lines(run: dict[str, Any], paint: Paint) -> list[str]:
    state = paint(run["state"], STATE_COLORS.get(run["state"]))
    started = datetime.fromisoformat(run["createdAt"])
    took = duration_text((datetime.fromisoformat(run["updatedAt"]) - started).total_seconds())
    if run.get("waitingSeconds"):
        # Parked for a person (approval, answer, pause, reconcile) is not time spent working.
        took += (
            f" (ran {duration_text(run['executionSeconds'])}, "
            f"waited {duration_text(run['waitingSeconds'])})"
        )
    lines = [
        f"{run['runId']} {state}  workflow {run['workflow']}  "
        f"started {time_text(run['createdAt'])}, {took}"
    ]
    if run.get("sourceRunId"):
        lines.append(f"  {run['mode']} of {run['sourceRunId']}")
    started_by = run.get("startedBy")
    if started_by:
        lines.append(
            f"  started by schedule {started_by['schedule']} slot {started_by['slot']}"
            f" ({started_by['trigger']})"
        )
    if run.get("traceId"):
        lines.append(f"  trace {run['traceId']} span {run['spanId']}")
    error = run.get("error") or {}
    if error.get("message") and run["state"] == "paused":
        # Why it parked (an approval, a question, an uncertain effect): not an error.
        lines.append("  " + paint(error["message"], STATE_COLORS["paused"]))
    elif error.get("message") and run["state"] != "succeeded":
        lines.append(f"  {paint('error:', '1;31')} {error['message']}")
    return lines


def _tree(tasks: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """``(depth, task)``: an expanded child (``parent--…``) is listed under the task whose
    id prefixes it (in plan order the children come before the aggregate they feed), and
    the rest keep plan order."""
    ids = {task["taskId"] for task in tasks}

    def parent(task_id: str) -> str | None:
        parts = task_id.split("--")
        found = ["--".join(parts[:i]) for i in range(1, len(parts))]
        return next((p for p in reversed(found) if p in ids), None)

    children: dict[str | None, list[dict[str, Any]]] = {}
    for task in tasks:
        children.setdefault(parent(task["taskId"]), []).append(task)
    out: list[tuple[int, dict[str, Any]]] = []

    def visit(task: dict[str, Any], depth: int) -> None:
        out.append((depth, task))
        for child in children.get(task["taskId"], []):
            visit(child, depth + 1)

    for task in children.get(None, []):
        visit(task, 0)
    return out


def _task_lines(tasks: list[dict[str, Any]], paint: Paint, *, color: bool) -> list[str]:
    if not tasks:
        return []
    rows = []
    notes: dict[int, list[str]] = {}
    for depth, task in _tree(tasks):
        ran = task.get("executionSeconds")
        waited = task.get("waitingSeconds")
        rows.append(
            [
                ("  " * depth) + task["taskId"],
                Cell(task["state"], STATE_COLORS.get(task["state"])),
                str(task["attempt"]),
                "" if ran is None else duration_text(ran),
                duration_text(waited) if waited else "",
            ]
        )
        extra = []
        error = task.get("error") or {}
        if error.get("message"):
            extra.append(paint(error["message"], "31"))
        condition = task.get("condition")
        if condition:
            extra.append(
                f"{condition['kind']} {condition['expression']} -> "
                f"{str(condition['result']).lower()}"
            )
        if task.get("traceId"):
            extra.append(f"trace {task['traceId']} span {task['spanId']}")
        if extra:
            notes[len(rows) - 1] = extra
    table = render(["TASK", "STATE", "ATTEMPT", "RAN", "WAITED"], rows, color=color).split("\n")
    lines = [paint("tasks:", "1"), "  " + table[0]]
    for i, row_line in enumerate(table[1:]):
        lines.append("  " + row_line)
        lines += [f"      {note}" for note in notes.get(i, [])]
    return lines


def _output_lines(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, dict):
        return ["outputs: " + json.dumps(value, ensure_ascii=False, default=str)]
    lines = ["outputs:"]
    for key, item in value.items():
        text = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False, default=str)
        lines.append(f"  {key}: {text}")
    return lines


def _budget_lines(ledger: list[dict[str, Any]], *, color: bool) -> list[str]:
    from agentctl.amounts import amount

    shown = [row for row in ledger if row["limit"] is not None or row["used"] or row["reserved"]]
    if not shown:
        return []

    def cell(row: dict[str, Any], column: str) -> str:
        return "-" if row[column] is None else amount(row["resource"], row[column])

    rows = [
        [row["resource"], cell(row, "limit"), cell(row, "reserved"), cell(row, "used")]
        for row in shown
    ]
    table = render(["RESOURCE", "LIMIT", "RESERVED", "USED"], rows, color=color)
    return ["budget:", *("  " + line for line in table.split("\n"))]


def _approval_lines(approvals: list[dict[str, Any]], paint: Paint) -> list[str]:
    if not approvals:
        return []
    lines = ["approvals:"]
    for item in approvals:
        status = paint(item["status"], "33" if item["status"] == "pending" else None)
        choices = f" {item['choices']}" if item.get("choices") else ""
        lines.append(
            f"  {item['approvalId']}  {status} {item['kind']} (task {item['taskId']}): "
            f"{item['prompt']}{choices}"
        )
    return lines


def _effect_lines(effects: list[dict[str, Any]], paint: Paint) -> list[str]:
    from agentctl import hints

    if not effects:
        return []
    lines = ["effects:"]
    for effect in effects:
        conclusions = [r["status"] for r in effect.get("reconciliations") or []]
        # Padded outside the paint: escape codes take no width on the screen.
        status = paint(effect["status"], STATE_COLORS.get(effect["status"]))
        status += " " * max(0, 9 - len(effect["status"]))
        tail = f"  reconciled: {', '.join(conclusions)}" if conclusions else ""
        span = (
            f"  trace {effect['traceId']} span {effect['spanId']}" if effect.get("traceId") else ""
        )
        lines.append(
            f"  {status} {effect['effectId'][:16]} {effect['operation']} "
            f"(task {effect['taskId']}, attempt {effect['attempt']}){tail}{span}"
        )
        if effect["status"] == "uncertain" and not conclusions:
            command = hints.reconcile(effect["effectId"])
            lines.append(paint(f"      uncertain: check the outside world, then {command}", "1;31"))
    return lines
