"""The human view of ``agentctl effects inspect``: what the effect was, how it ended, and
for a process its command, exit code and the tail of its stderr (no ``-v`` needed)."""

from __future__ import annotations

import shlex
from typing import Any

from agentctl import hints
from agentctl.cli.table import time_text

__all__ = ["render_effect"]

TAIL_LINES = 10


def _tail(text: str) -> list[str]:
    lines = text.rstrip("\n").splitlines()
    return lines[-TAIL_LINES:]


def render_effect(data: dict[str, Any]) -> str:
    confirmed = " (confirmed)" if data.get("confirmed") else ""
    lines = [
        data["effectId"],
        f"  status     {data['status']}{confirmed}",
        f"  operation  {data['operation']}  (task {data['taskId']}, attempt {data['attempt']})",
        f"  class      {data.get('effectClass')}, risk {data.get('risk')}, "
        f"idempotency {data.get('idempotency')}",
    ]
    request = data.get("request") or {}
    if isinstance(request, dict) and request.get("command"):
        argv = [str(request["command"]), *map(str, request.get("args") or [])]
        lines.append(f"  command    {shlex.join(argv)}")
    for label, key in (
        ("requested", "requestedAt"),
        ("started", "startedAt"),
        ("finished", "finishedAt"),
    ):
        if data.get(key):
            lines.append(f"  {label:<10} {time_text(data[key])}")
    error = data.get("error") or {}
    result = data.get("result") if isinstance(data.get("result"), dict) else {}
    details = error.get("details") if isinstance(error.get("details"), dict) else {}
    process = {**(result or {}), **(details or {})}
    if process.get("exitCode") is not None:
        lines.append(f"  exit code  {process['exitCode']}")
    if error.get("message"):
        lines.append(f"  error      {error['message']}")
    stderr = process.get("stderr")
    if isinstance(stderr, str) and stderr.strip():
        shown = _tail(stderr)
        lines.append(f"  stderr (last {len(shown)} line{'s' if len(shown) != 1 else ''}):")
        lines += [f"    {line}" for line in shown]
    for item in data.get("reconciliations") or []:
        lines.append(
            f"  reconciled {item['status']} by {item['actor']} at {time_text(item['createdAt'])}: "
            f"{item['reason']}"
        )
    remote = data.get("remoteTask") if isinstance(data.get("remoteTask"), dict) else None
    if remote:
        lines.append(f"  remote     A2A task {remote.get('taskId')} at peer {remote.get('peer')}")
    if data["status"] in ("started", "uncertain") and not data.get("reconciliations"):
        if remote and data["status"] == "uncertain":
            lines.append(
                "  uncertain: follow the remote task with agentctl effects continue-remote "
                f"{data['effectId']} --reason TEXT, or " + hints.reconcile(data["effectId"])
            )
        elif data["status"] == "uncertain":
            lines.append(
                "  uncertain: check the outside world, then " + hints.reconcile(data["effectId"])
            )
    return "\n".join(lines)
