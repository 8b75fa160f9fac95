"""Provider sessions across runs: an agent task continues an earlier conversation.

An agent task may declare ``session: {from: {run: RUN|latest, task: ID}}`` (continue the
session that task of that run, or of the newest run that has one, left) or
``session: {name: NAME}`` (continue the newest session saved under that name, and save its
own under it). Each turn's session row keeps the conversation's transcript — every message
the provider saw and its answer, with provider continuation such as the response id — so
the continuing task starts from that transcript plus its own prompt, and a provider that
continues by response id (OpenAI Responses with ``store: true``) is sent it.

``latest`` and a name mean the newest run created *before* this one, so a resumed run
continues the same session however many runs started since. A task re-executed by
``repair`` starts fresh: the repair's point is to run it again under
changed definitions, and a transcript recorded under the old ones would carry them along.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agentctl.engine.actions.context import TaskEnv
from agentctl.errors import NotFoundError
from agentctl.providers.base import Message
from agentctl.signals import TaskFailure
from agentctl.store import sessions_repo
from agentctl.store.records import get_run

__all__ = ["Continuation", "continuation", "session_json", "show_session", "list_sessions"]


class Continuation:
    """Where a task's conversation starts: the restored transcript and its origin."""

    def __init__(
        self, messages: list[Message], source: dict[str, str] | None, note: str | None = None
    ) -> None:
        self.messages = messages
        self.source = source
        self.note = note

    def state(self) -> dict[str, Any]:
        """What the task's own session row records about where it started."""
        out: dict[str, Any] = {"continuedFrom": self.source}
        if self.note is not None:
            out["startedFresh"] = self.note
        return out


def session_name(env: TaskEnv) -> str | None:
    declared = env.task.session or {}
    name = declared.get("name")
    return str(name) if name is not None else None


def continuation(env: TaskEnv, provider: str) -> Continuation:
    """The transcript the task continues (empty for a task without ``session``)."""
    declared: Mapping[str, Any] | None = env.task.session
    if not declared:
        return Continuation([], None)
    with env.gate.store.read() as conn:
        if get_run(conn, env.run_id)["mode"] == "repair":
            return Continuation([], None, "a task re-executed by repair starts a new session")
        source = declared.get("from")
        if source is not None:
            run, task = str(source["run"]), str(source["task"])
            if run == "latest":
                row = sessions_repo.latest_for_task(conn, task, before_run=env.run_id)
                wanted = f"task `{task}` of the newest earlier run"
            else:
                row = sessions_repo.find(conn, run, task)
                wanted = f"run {run} task `{task}`"
            if row is None:
                raise TaskFailure(
                    f"task {env.task.id} continues the provider session of {wanted}, but no "
                    "session is recorded there; run that task first or fix `session.from` "
                    "(`agentctl sessions list` shows what is recorded)",
                    code="session.not_found",
                    permanent=True,
                )
        else:
            name = str(declared["name"])
            row = sessions_repo.latest_named(conn, name, before_run=env.run_id)
            if row is None:
                return Continuation([], None, f"no earlier session named `{name}`")
    if row.provider != provider:
        raise TaskFailure(
            f"task {env.task.id} cannot continue the session of run {row.run_id} task "
            f"`{row.task_id}`: it was held with provider `{row.provider}`, this agent uses "
            f"`{provider}`; a transcript with provider continuation does not move between "
            "providers",
            code="session.provider_mismatch",
            permanent=True,
        )
    state = json.loads(row.state_json)
    transcript = state.get("transcript")
    if not isinstance(transcript, list):
        raise TaskFailure(
            f"the session of run {row.run_id} task `{row.task_id}` was recorded without its "
            "transcript (by an older agentctl) and cannot be continued; run that task again",
            code="session.not_found",
            permanent=True,
        )
    messages = [Message.from_json(item) for item in transcript]
    return Continuation(messages, {"runId": row.run_id, "taskId": row.task_id})


def session_json(row: sessions_repo.SessionRow, *, transcript: bool) -> dict[str, Any]:
    state = json.loads(row.state_json)
    messages = state.pop("transcript", None)
    out: dict[str, Any] = {
        "runId": row.run_id,
        "taskId": row.task_id,
        "name": row.name,
        "provider": row.provider,
        "updatedAt": row.updated_at.isoformat(),
        "state": state,
    }
    if transcript:
        out["transcript"] = messages
    return out


def list_sessions(store: Any, *, run_id: str | None, name: str | None) -> list[dict[str, Any]]:
    """Recorded sessions, newest first (without their transcripts)."""
    with store.read() as conn:
        if run_id is not None:
            get_run(conn, run_id)
        rows = sessions_repo.listed(conn, run_id=run_id, name=name)
    return [session_json(row, transcript=False) for row in rows]


def show_session(store: Any, run_id: str, task_id: str) -> dict[str, Any]:
    """One session with its transcript."""
    with store.read() as conn:
        get_run(conn, run_id)
        row = sessions_repo.find(conn, run_id, task_id)
    if row is None:
        raise NotFoundError(
            f"run {run_id} has no provider session for task `{task_id}`",
            code="session.not_found",
            run_id=run_id,
            hint=f"list them with `agentctl sessions list --run {run_id}`",
        )
    return session_json(row, transcript=True)
