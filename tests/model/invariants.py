"""The invariants the model test checks after every step.

1. No confirmed effect executed twice: per lineage (a run and the retry/replay/compensate
   runs derived from it) and ledger label, at most one ledger line. Every line is executed
   by a known agentctl process. Every confirmed process effect's marker is in the ledger.
2. No confirmed result lost: a task once seen ``succeeded`` keeps its state and output for as
   long as its run exists.
3. ``PRAGMA integrity_check`` is ``ok`` (the database opened read-only).
4. The audit chain of every run verifies (``inspect`` reports it after each step that
   changed the run; ``audit --verify`` runs for every run at the end of the schedule).
5. Every artifact a live run lists (refs and task manifests) is present with the right
   bytes, and ``artifacts verify --all`` passes whenever the artifact store changed.
6. Every observed state change of a run, task, effect or approval is allowed by
   ``transitions.ALLOWED``; a finished run has no live task and no pending approval; only a
   finished run disappears (gc); an effect has at most one ``compensated`` conclusion.

Runs are inspected only when their rows changed since the last step (a read-only
fingerprint decides), which keeps a step's checks to one or two commands.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

from tests.model.transitions import LIVE_TASK_STATES, TERMINAL_RUN_STATES, reachable
from tests.model.world import LABELS, World

__all__ = ["Checker"]


def effect_marker(effect: dict[str, Any]) -> str | None:
    """The ledger marker a process effect's result names (its stdout), if any."""
    result = effect.get("result")
    if effect.get("status") == "succeeded" and isinstance(result, dict):
        return str(result.get("stdout", "")).strip() or None
    return None


def applied_markers(effect: dict[str, Any]) -> list[str]:
    found = []
    for conclusion in effect.get("reconciliations") or []:
        result = conclusion.get("result")
        if conclusion.get("status") == "applied" and isinstance(result, dict):
            marker = str(result.get("stdout", "")).strip()
            if marker:
                found.append(marker)
    return found


class Checker:
    def __init__(self, world: World) -> None:
        self.world = world
        self.fingerprints: dict[str, str] = {}
        self.inspections: dict[str, dict[str, Any]] = {}
        self.states: dict[tuple[str, ...], str] = {}
        self.outputs: dict[tuple[str, str], Any] = {}
        #: (run, task) whose effect is confirmed, or reconciled applied, or that succeeded.
        self.confirmed: set[tuple[str, str]] = set()
        self.artifact_state = ""
        #: ledger marker -> the run whose effect reports it (a worker executes many runs
        #: in one process, so its lines are attributed by marker, not by pid).
        self.marker_run: dict[str, str] = {}

    # -- the views other parts use --------------------------------------------------------

    def inspection(self, run_id: str) -> dict[str, Any] | None:
        return self.inspections.get(run_id)

    def live_runs(self) -> list[str]:
        return [r for r in self.inspections if r not in self.world.deleted]

    # -- one check ------------------------------------------------------------------------

    def check(self, final: bool = False) -> list[str]:
        problems: list[str] = []
        world = self.world
        if not world.db_exists():
            return problems
        verdict = world.integrity()
        if verdict != "ok":
            problems.append(f"PRAGMA integrity_check: {verdict}")
        rows = world.run_rows()
        for run_id in list(self.inspections):
            if run_id not in rows and run_id not in world.deleted:
                last = self.states.get(("run", run_id))
                world.deleted.add(run_id)
                if last not in TERMINAL_RUN_STATES:
                    problems.append(f"run {run_id} disappeared while {last}")
        world.learn_runs(None, None, set(world.workflow_of))
        for run_id in rows:
            fingerprint = world.fingerprint(run_id)
            if final:
                audit = world.run(["audit", run_id, "--verify"])
                if audit.code != 0:
                    problems.append(f"audit --verify {run_id} exited {audit.code}")
            if self.fingerprints.get(run_id) == fingerprint:
                continue
            result = world.run(["inspect", run_id])
            if result.code != 0:
                problems.append(f"inspect {run_id} exited {result.code}: {result.stderr[-400:]}")
                continue
            self.fingerprints[run_id] = fingerprint
            self.inspections[run_id] = result.data()
            problems += self._check_run(run_id, self.inspections[run_id])
        problems += self._check_ledger()
        problems += self._check_artifacts(final)
        return problems

    def _moved(self, key: tuple[str, ...], kind: str, new: str, what: str) -> list[str]:
        old = self.states.get(key)
        self.states[key] = new
        if old is None or old == new or reachable(kind, old, new):
            return []
        return [f"{what}: {kind} state moved {old} -> {new}, not allowed"]

    def _check_run(self, run_id: str, data: dict[str, Any]) -> list[str]:
        problems = []
        state = data["run"]["state"]
        problems += self._moved(("run", run_id), "run", state, f"run {run_id}")
        if not data["audit"]["verified"]:
            problems.append(f"run {run_id}: audit chain broken at {data['audit']['brokenAt']}")
        for task in data["tasks"]:
            where = f"run {run_id} task {task['taskId']}"
            problems += self._moved(("task", run_id, task["taskId"]), "task", task["state"], where)
            key = (run_id, task["taskId"])
            if task["state"] == "succeeded":
                self.confirmed.add(key)
            if task["state"] == "succeeded" and key not in self.outputs:
                self.outputs[key] = task["output"]
            elif key in self.outputs:
                if task["state"] != "succeeded" or task["output"] != self.outputs[key]:
                    problems.append(
                        f"{where}: confirmed result lost (now {task['state']}, output "
                        f"{str(task['output'])[:120]})"
                    )
            if state in TERMINAL_RUN_STATES and task["state"] in LIVE_TASK_STATES:
                problems.append(f"{where} is {task['state']} in a {state} run")
        for effect in data["effects"]:
            eid = effect["effectId"]
            where = f"run {run_id} effect {eid[:12]} ({effect['taskId']})"
            problems += self._moved(("effect", eid), "effect", effect["status"], where)
            if self.states.get(("confirmed", eid)) == "1" and not effect["confirmed"]:
                problems.append(f"{where}: lost its confirmation")
            self.states[("confirmed", eid)] = "1" if effect["confirmed"] else "0"
            if (effect["status"] == "succeeded" and effect["confirmed"]) or applied_markers(effect):
                self.confirmed.add((run_id, effect["taskId"]))
            compensated = [
                r for r in effect.get("reconciliations") or [] if r["status"] == "compensated"
            ]
            if len(compensated) > 1:
                problems.append(f"{where}: {len(compensated)} `compensated` conclusions")
        for approval in data["approvals"]:
            where = f"run {run_id} {approval['kind']} {approval['approvalId']}"
            problems += self._moved(
                ("approval", approval["approvalId"]), "approval", approval["status"], where
            )
            if state in TERMINAL_RUN_STATES and approval["status"] == "pending":
                problems.append(f"{where} is still pending in a {state} run")
        return problems

    def _check_ledger(self) -> list[str]:
        world = self.world
        problems = []
        lines = world.ledger()
        per_identity: Counter[tuple[str, str]] = Counter()
        task_of = {label: task for (_, task), label in LABELS.items()}
        for run_id, inspected in self.inspections.items():
            for effect in inspected["effects"]:
                for marker in [effect_marker(effect), *applied_markers(effect)]:
                    if marker is not None:
                        self.marker_run.setdefault(marker, run_id)
        for line in lines:
            if line.pid in world.worker_pids:
                run_id = self.marker_run.get(line.marker)
            else:
                run_id = world.pid_run.get(line.pid)
            if run_id is None:
                problems.append(f"ledger line {line} was written by no known agentctl process")
                continue
            per_identity[(run_id, line.label)] += 1
            if line.label.startswith("undo."):
                # One inverse per source effect, however many compensation runs there are.
                source = world.source_of.get(run_id) or run_id
                per_identity[(f"compensations of {source}", line.label)] += 1
                continue
            ancestor = world.source_of.get(run_id)
            while ancestor is not None:
                if (ancestor, task_of[line.label]) in self.confirmed:
                    problems.append(
                        f"run {run_id} executed {line.label} again although its source run "
                        f"{ancestor} had it confirmed (line {line.marker})"
                    )
                ancestor = world.source_of.get(ancestor)
        for (where, label), count in sorted(per_identity.items()):
            if count > 1:
                problems.append(f"effect executed {count} times: {label} in {where}")
        markers = {line.marker for line in lines}
        for run_id in self.live_runs():
            for effect in self.inspections[run_id]["effects"]:
                label = LABELS.get((world.workflow_of.get(run_id, ""), effect["taskId"]))
                marker = effect_marker(effect) if label else None
                if marker is not None and marker not in markers:
                    problems.append(
                        f"run {run_id} effect {effect['effectId'][:12]} reports marker "
                        f"{marker} that is not in the ledger"
                    )
        return problems

    def _check_artifacts(self, final: bool) -> list[str]:
        world = self.world
        problems = []
        listed: set[str] = set()
        for run_id in self.live_runs():
            for ref in self.inspections[run_id].get("artifacts") or []:
                listed.add(ref["digest"])
            for task_id, digest in world.manifests(run_id):
                listed.add(digest)
                problem = world.blob_ok(digest)
                if problem:
                    problems.append(
                        f"run {run_id} task {task_id} lists artifact {digest[:19]} but the "
                        f"blob is {problem}"
                    )
        for digest in sorted(listed):
            problem = world.blob_ok(digest)
            if problem:
                problems.append(f"artifact {digest[:19]} referenced by a live run is {problem}")
        blobs = world.db.parent / "artifacts" / "blobs"
        names = sorted(str(p) for p in blobs.rglob("*")) if blobs.is_dir() else []
        state = hashlib.sha256("\n".join([*names, *sorted(listed)]).encode()).hexdigest()
        if names and (state != self.artifact_state or final):
            result = world.run(["artifacts", "verify", "--all"])
            if result.code != 0:
                problems.append(f"artifacts verify --all exited {result.code}: {result.stderr}")
        self.artifact_state = state
        return problems
