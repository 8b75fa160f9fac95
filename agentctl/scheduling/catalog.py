"""What the store knows about registered workflows: the last run of each name."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from agentctl.store import runs_repo
from agentctl.store.timestamps import to_iso

if TYPE_CHECKING:
    from agentctl.store.engine import Store

__all__ = ["last_runs"]


def last_runs(store: Store, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{workflow name: {runId, state, createdAt}}`` of the newest run of each name."""
    out: dict[str, dict[str, Any]] = {}
    with store.read() as conn:
        for name in dict.fromkeys(names):
            rows = runs_repo.list_runs(conn, status=None, workflow=name, limit=1)
            if rows:
                out[name] = {
                    "runId": rows[0].id,
                    "state": rows[0].status,
                    "createdAt": to_iso(rows[0].created_at),
                }
    return out
