"""A randomized schedule of operator moves over real agentctl processes on one database.

``run_schedule(seed, steps, known_defects)`` builds a fresh world, then for each step picks
one applicable move with ``random.Random(seed)``, runs it as real processes, and checks the
invariants (invariants.py). It returns the step list and every violation, so a failure
prints everything needed to reproduce it (the same seed replays the same choices).

A move whose name is in ``known_defects`` is never picked: that is how the test stays green
on a main that still has a known open defect (see KNOWN_DEFECT_MOVES in test_model.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import sqlite3
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.model.invariants import Checker, applied_markers, effect_marker
from tests.model.launcher import Launcher, Result
from tests.model.transitions import TERMINAL_RUN_STATES
from tests.model.world import LABELS, Background, World

__all__ = ["MOVES", "Outcome", "run_schedule", "schedule_for_seed"]

FAULT_POINTS = (
    "run.created",
    "effect.requested",
    "effect.started",
    "effect.dispatched",
    "effect.finished",
    "task.committed",
)
SKEW_PAST_LEASE = 3600.0  # seconds: far beyond the 60 s owner lease
OK_RUN_CODES = {0, 3, 4, 130}
FAIL_ENV = {"MODEL_FAIL": "fail-requested"}
PASS_ENV = {"MODEL_FAIL": "fail-not-requested"}


@dataclass
class Outcome:
    seed: int
    steps: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    seconds: float = 0.0
    commands: int = 0
    skipped_known: list[str] = field(default_factory=list)
    #: The moves taken, and the fault points at which a command was SIGKILLed.
    moves: list[str] = field(default_factory=list)
    crashed_at: list[str] = field(default_factory=list)


class Ctx:
    def __init__(
        self, world: World, checker: Checker, rng: random.Random, first_fault: str | None = None
    ) -> None:
        self.world, self.checker, self.rng = world, checker, rng
        self._first_fault = first_fault
        self.crashed_at: list[str] = []

    # -- what the last check saw ----------------------------------------------------------

    def runs(self, *states: str, workflow: str | None = None) -> list[str]:
        found = []
        for run_id in sorted(self.checker.live_runs()):
            data = self.checker.inspections[run_id]
            if states and data["run"]["state"] not in states:
                continue
            if workflow and self.world.workflow_of.get(run_id) != workflow:
                continue
            if self.bg_run() == run_id:
                continue
            found.append(run_id)
        return found

    def bg_run(self) -> str | None:
        bg = self.world.background
        return bg.run_id if bg is not None else None

    def effects(self, run_ids: list[str]) -> list[dict[str, Any]]:
        return [e for r in run_ids for e in self.checker.inspections[r]["effects"]]

    def pending_approvals(self) -> list[dict[str, Any]]:
        return [
            a
            for r in self.runs("paused", "running")
            for a in self.checker.inspections[r]["approvals"]
            if a["status"] == "pending"
        ]

    def unconcluded(self, run_ids: list[str]) -> list[dict[str, Any]]:
        return [
            e
            for e in self.effects(run_ids)
            if e["status"] in ("started", "uncertain") and not e["reconciliations"]
        ]

    def fault(self) -> str:
        """Where the next killed command dies: the schedule's first kill at its own fault
        point's first occurrence (so a run of len(FAULT_POINTS) schedules reaches every
        point), the others anywhere."""
        if self._first_fault is not None:
            point, self._first_fault = self._first_fault, None
            return f"{point}:1"
        return f"{self.rng.choice(FAULT_POINTS)}:{self.rng.randint(1, 3)}"

    # -- running commands -----------------------------------------------------------------

    def command(
        self,
        args: list[str],
        *,
        env: dict[str, str] | None = None,
        skew: float = 0,
        target: str | None = None,
    ) -> Result:
        """Run one command; ``target`` is the run it executes (resume), when known."""
        before = set(self.world.run_rows())
        proc = self.world.start(args, env={**PASS_ENV, **(env or {})}, skew=skew)
        if target is not None:
            self.world.pid_run[proc.pid] = target
        result = proc.wait()
        self.world.learn_runs(proc.pid, result, before)
        fault = (env or {}).get("AGENTCTL_FAULT")
        if fault and result.code == -signal.SIGKILL:
            self.crashed_at.append(fault.partition(":")[0])
        return result


def expect(result: Result, codes: set[int], what: str) -> list[str]:
    if result.code in codes:
        return []
    tail = (result.stderr or result.stdout)[-600:]
    return [f"{what}: exit {result.code} (expected one of {sorted(codes)}): {tail}"]


# -- moves: each returns (description, problems); None when it does not apply -------------

MoveResult = tuple[str, list[str]] | None


def roll(ctx: Ctx, killed: bool, workflow: str | None = None) -> MoveResult:
    drawn = ctx.rng.choice(["ledger.yaml", "ledger.yaml", "gated.yaml", "ext.yaml", "fn.yaml"])
    workflow = workflow or drawn
    env = dict(FAIL_ENV if ctx.rng.random() < 0.4 else PASS_ENV)
    if killed:
        env["AGENTCTL_FAULT"] = ctx.fault()
    tag = ctx.world.next_tag()
    result = ctx.command(["roll", workflow, "--input", f"tag={tag}"], env=env)
    desc = f"roll {workflow} tag={tag} {env}"
    return desc, expect(result, OK_RUN_CODES | ({-9} if killed else set()), desc)


def _hold_write_lock(world: World) -> Any:
    """A connection holding the store's write lock (SQLite's database lock, PostgreSQL's
    advisory lock) until its ``rollback``."""
    if world.url is not None:
        import psycopg

        from agentctl.store.locks import STORE_KEY as WRITE_LOCK_KEY

        conn = psycopg.connect(world.url)
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))
        return conn
    holder = sqlite3.connect(world.db, isolation_level=None, timeout=30)
    holder.execute("BEGIN IMMEDIATE")
    return _SqliteHolder(holder)


class _SqliteHolder:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def rollback(self) -> None:
        self.conn.execute("ROLLBACK")

    def close(self) -> None:
        self.conn.close()


def roll_under_held_lock(ctx: Ctx) -> MoveResult:
    """Another program holds the database's write lock past the busy timeout while a run
    executes: a dispatched effect must never become a failure (at worst the process exits 5
    and the run stays resumable)."""
    if not ctx.world.db_exists():
        return None
    hold = ctx.rng.choice([0.2, 0.5, 1.0])
    env = {
        **PASS_ENV,
        "AGENTCTL_SQLITE_BUSY_TIMEOUT_MS": "50",
        "AGENTCTL_STORE_RETRY_SECONDS": ctx.rng.choice(["0.3", "3"]),
    }
    tag = ctx.world.next_tag()
    holder = _hold_write_lock(ctx.world)
    try:
        before = set(ctx.world.run_rows())
        proc = ctx.world.start(["roll", "ledger.yaml", "--input", f"tag={tag}"], env=env)
        time.sleep(hold)  # the lock is held for this long while the roll tries to write
        holder.rollback()
    finally:
        holder.close()
    result = proc.wait()
    ctx.world.learn_runs(proc.pid, result, before)
    desc = f"roll ledger.yaml tag={tag} while another connection holds the lock {hold}s"
    return desc, expect(result, OK_RUN_CODES | {5}, desc)


def roll_background(ctx: Ctx) -> MoveResult:
    if ctx.world.background is not None:
        return None
    before = set(ctx.world.run_rows())
    proc = ctx.world.start(["roll", "slow.yaml", "--input", f"tag={ctx.world.next_tag()}"])
    marker = ctx.world.wait_ready(proc)
    new = ctx.world.learn_runs(proc.pid, None, before)
    if marker is None:
        result = proc.wait()
        return "roll slow.yaml in the background", expect(result, set(), "background roll")
    ctx.world.background = Background(proc, new[0] if new else None, marker)
    return f"roll slow.yaml in the background (run {new[0] if new else '?'}, held)", []


def release_background(ctx: Ctx) -> MoveResult:
    bg = ctx.world.background
    if bg is None:
        return None
    ctx.world.open_gate()
    result = bg.proc.wait()
    ctx.world.background = None
    return f"release the background run {bg.run_id}", expect(result, OK_RUN_CODES, "background")


def kill_background(ctx: Ctx) -> MoveResult:
    bg = ctx.world.background
    if bg is None:
        return None
    bg.proc.kill()
    ctx.world.open_gate()  # the orphaned step wrote its line before it blocked
    ctx.world.background = None
    return f"SIGKILL the background owner of {bg.run_id}", []


def resume(ctx: Ctx, killed: bool) -> MoveResult:
    candidates = ctx.runs("running", "paused")
    if not candidates:
        return None
    run_id = ctx.rng.choice(candidates)
    env = {"AGENTCTL_FAULT": ctx.fault()} if killed else {}
    result = ctx.command(["resume", run_id], env=env, target=run_id)
    desc = f"resume {run_id} {env}"
    return desc, expect(result, OK_RUN_CODES | ({-9} if killed else set()), desc)


def _taken_over(ctx: Ctx, run_id: str) -> bool:
    """Whether a claim took the run from a previous owner (the audit chain says so)."""
    conn = ctx.world.connect()
    try:
        (count,) = conn.execute(
            "SELECT COUNT(*) FROM audit_events WHERE run_id = ? AND kind = 'run.taken_over'",
            (run_id,),
        ).fetchone()
    finally:
        conn.close()
    return bool(count)


def resume_live_owner(ctx: Ctx, skew: float) -> MoveResult:
    run_id = ctx.bg_run()
    row = ctx.world.run_rows().get(run_id or "")
    if run_id is None or row is None or row["status"] != "running" or not row["owner_id"]:
        return None  # its owner no longer executes it (a cancel ended it): not this move
    result = ctx.command(["resume", run_id], skew=skew, target=run_id)
    desc = f"resume {run_id} while its owner is alive (clock +{skew:.0f}s)"
    doc = result.json() or {}
    code = (doc.get("error") or {}).get("code")
    if result.code == 3 and code == "run.owned":
        return desc, []
    if not _taken_over(ctx, run_id):
        # A cancel requested earlier ended the run meanwhile; the resume only reported the
        # stored outcome and took nothing over.
        return desc, []
    state = (doc.get("data") or {}).get("state")
    return desc, [
        f"{desc}: not refused as run.owned: exit {result.code}, code {code}, state {state} "
        "(a second process took the run over from its live owner)"
    ]


def cancel(ctx: Ctx, which: str) -> MoveResult:
    if which == "live":
        candidates = [ctx.bg_run()] if ctx.bg_run() else []
    else:
        parked = [
            r
            for r in ctx.runs("paused", "running")
            if any(a["status"] == "pending" for a in ctx.checker.inspections[r]["approvals"])
        ]
        candidates = (
            parked
            if which == "parked"
            else [r for r in ctx.runs("paused", "running") if r not in parked]
        )
    candidates = [c for c in candidates if c]
    if not candidates:
        return None
    run_id = ctx.rng.choice(candidates)
    result = ctx.command(["cancel", run_id, "--reason", "model test"])
    problems = expect(result, {0}, f"cancel {run_id}")
    bg = ctx.world.background
    if which == "live" and bg is not None and not problems:
        # The owner stops by itself once it sees the request (its held step is interrupted):
        # wait for that, so the checks after this step see the run as its owner ended it,
        # not a cancel still on its way (a later gc may then delete the ended run).
        try:
            stopped = bg.proc.wait(timeout=60)
        except TimeoutError:
            bg.proc.kill()
            stopped = None
            problems.append(f"the owner of {run_id} did not stop within 60 s of its cancel")
        ctx.world.open_gate()  # nothing may stay blocked on the gate
        ctx.world.background = None
        if stopped is not None:
            problems += expect(stopped, {130}, f"the owner of the cancelled run {run_id}")
    return f"cancel {run_id} ({which})", problems


def decide(ctx: Ctx, approve: bool) -> MoveResult:
    pending = ctx.pending_approvals()
    if not pending:
        return None
    approval = ctx.rng.choice(pending)
    verb = "approve" if approve else "reject"
    result = ctx.command(["approvals", verb, approval["approvalId"], "--reason", "model test"])
    desc = f"{verb} {approval['approvalId']}"
    return desc, expect(result, {0}, desc)


def truth(ctx: Ctx, effect: dict[str, Any]) -> tuple[bool, dict[str, Any] | None]:
    """Whether the effect really happened, from the outside world, and its result."""
    world = ctx.world
    run_id = effect["runId"]
    request = effect.get("request") or {}
    if effect["operation"] == "builtin.write":
        target = world.ws / str(request.get("path"))
        if target.is_file() and len(target.read_bytes()) == request.get("bytes"):
            content = target.read_text()
            return True, {
                "status": "changed",
                "changed": True,
                "before": None,
                "after": content,
                "diff": None,
                "path": request.get("path"),
                "predictability": "fully_predictable",
            }
        return False, None
    label = LABELS.get((world.workflow_of.get(run_id, ""), effect["taskId"]))
    if label is None:
        return False, None
    explained = set()
    for other in ctx.checker.inspections[run_id]["effects"]:
        if other["taskId"] == effect["taskId"]:
            explained.update(filter(None, [effect_marker(other), *applied_markers(other)]))
    unexplained = [
        line
        for line in world.ledger()
        if line.label == label
        and world.pid_run.get(line.pid) == run_id
        and line.marker not in explained
    ]
    if not unexplained:
        return False, None
    result = {"status": "changed", "changed": True, "exitCode": 0, "stderr": ""}
    result["stdout"] = unexplained[0].marker + "\n"
    return True, result


def reconcile(ctx: Ctx, which: str) -> MoveResult:
    if which == "live":
        bg = ctx.bg_run()
        row = ctx.world.run_rows().get(bg or "")
        # Live: its owner still executes it. Once a cancel ended the run, the owner has
        # concluded its effects (uncertain) and an operator may settle them.
        executing = row is not None and row["status"] == "running" and row["owner_id"]
        candidates = (
            ctx.unconcluded([bg]) if bg and executing and bg in ctx.checker.inspections else []
        )
    elif which == "contradicting":
        candidates = [
            e for e in ctx.effects(ctx.runs()) if e["status"] == "succeeded" and e["confirmed"]
        ]
    else:
        candidates = ctx.unconcluded(ctx.runs())
    if not candidates:
        return None
    effect = ctx.rng.choice(candidates)
    eid = effect["effectId"]
    args = ["reconcile", eid, "--reason", "model test"]
    if which == "contradicting":
        result = ctx.command([*args, "--status", "not-applied"])
        desc = f"reconcile confirmed effect {eid[:12]} ({effect['taskId']}) as not-applied"
        if result.code == 0:
            return desc, [f"{desc}: accepted, but the record says it succeeded"]
        return desc, expect(result, {2, 3, 5}, desc)
    applied, value = truth(ctx, effect)
    if applied:
        result_file = ctx.world.root / f"result-{eid[:12]}.json"
        result_file.write_text(json.dumps(value))
        args += ["--status", "applied", "--result-file", str(result_file)]
    else:
        args += ["--status", "not-applied"]
    result = ctx.command(args)
    status = "applied" if applied else "not-applied"
    desc = f"reconcile {eid[:12]} ({effect['runId']} {effect['taskId']}) {status}"
    if which == "live":
        after = ctx.world.run_rows().get(effect["runId"]) or {}
        ended = after.get("status") in TERMINAL_RUN_STATES and not after.get("owner_id")
        if result.code == 0 and not ended:  # a cancel may have ended the run meanwhile
            return desc, [f"{desc}: accepted while a live process executes the effect"]
        return desc, expect(result, {2, 3, 5}, desc)
    return desc, expect(result, {0}, desc)


def gc(ctx: Ctx) -> MoveResult:
    if not ctx.world.db_exists():
        return None
    result = ctx.command(["gc", "--older-than-days", "0"])
    return "gc --older-than-days 0", expect(result, {0}, "gc")


def orphaned_derived(ctx: Ctx) -> bool:
    """A live retry/replay run whose source run gc removed (the refs it may lack)."""
    world = ctx.world
    return any(
        world.mode_of.get(r) in ("retry", "replay", "repair")
        and world.source_of.get(r) in world.deleted
        for r in ctx.checker.live_runs()
    )


def artifacts_gc(ctx: Ctx, orphaned: bool) -> MoveResult:
    if not ctx.world.db_exists() or orphaned != orphaned_derived(ctx):
        return None
    result = ctx.command(["artifacts", "gc", "--older-than-days", "0"])
    return "artifacts gc --older-than-days 0", expect(result, {0}, "artifacts gc")


def retry_failed(ctx: Ctx, killed: bool) -> MoveResult:
    files = {
        "model-ledger": "ledger.yaml",
        "model-gated": "gated.yaml",
        "model-ext": "ext.yaml",
        "model-fn": "fn.yaml",
    }
    candidates = [r for r in ctx.runs("failed") if ctx.world.workflow_of.get(r) in files]
    if not candidates:
        return None
    run_id = ctx.rng.choice(candidates)
    file = files[ctx.world.workflow_of[run_id]]
    env = dict(FAIL_ENV if ctx.rng.random() < 0.25 else PASS_ENV)
    if killed:
        env["AGENTCTL_FAULT"] = ctx.fault()
    result = ctx.command(["retry", file, run_id, "--failed"], env=env)
    desc = f"retry {file} {run_id} --failed {env}"
    return desc, expect(result, OK_RUN_CODES | ({-9} if killed else set()), desc)


def replay(ctx: Ctx) -> MoveResult:
    candidates = ctx.runs(*TERMINAL_RUN_STATES)
    if not candidates:
        return None
    run_id = ctx.rng.choice(candidates)
    result = ctx.command(["replay", run_id])
    return f"replay {run_id}", expect(result, {0, 3, 4}, f"replay {run_id}")


def compensate(ctx: Ctx, concurrent: bool) -> MoveResult:
    candidates = ctx.runs(*TERMINAL_RUN_STATES, workflow="model-ledger")
    if not candidates:
        return None
    run_id = ctx.rng.choice(candidates)
    if not concurrent:
        result = ctx.command(["compensate", run_id])
        return f"compensate {run_id}", expect(result, {0, 3, 4}, f"compensate {run_id}")
    before = set(ctx.world.run_rows())
    procs = [ctx.world.start(["compensate", run_id], env=PASS_ENV) for _ in range(2)]
    problems = []
    for proc in procs:
        result = proc.wait()
        ctx.world.learn_runs(proc.pid, result, before)
        problems += expect(result, {0, 3, 4}, f"concurrent compensate {run_id}")
    return f"compensate {run_id} twice at once", problems


def workers(ctx: Ctx) -> MoveResult:
    """Several runs at once on several workers (PostgreSQL only): two or three runs
    released with ``roll --detach`` and executed by two ``agentctl worker`` processes (a
    run's tasks and other runs' on the same workers, under per-run locks), which also
    adopt parked runs whose approval was answered; each released run is waited for with
    ``runs wait``, then the workers drain on SIGTERM and exit 0."""
    world = ctx.world
    if world.url is None:
        return None
    env = dict(FAIL_ENV if ctx.rng.random() < 0.3 else PASS_ENV)
    problems: list[str] = []
    released: list[str] = []
    for _ in range(ctx.rng.choice([2, 3])):
        workflow = ctx.rng.choice(["ledger.yaml", "ledger.yaml", "gated.yaml"])
        result = ctx.command(
            ["roll", workflow, "--detach", "--input", f"tag={world.next_tag()}"], env=env
        )
        problems += expect(result, {0}, f"roll {workflow} --detach")
        data = result.data()
        if isinstance(data, dict) and isinstance(data.get("runId"), str):
            released.append(data["runId"])
    procs = [
        world.start(["worker", "--concurrency", "2", "--name", f"model-{n}"], env=env)
        for n in range(2)
    ]
    world.worker_pids.update(proc.pid for proc in procs)
    try:
        for run_id in released:
            waited = world.run(["runs", "wait", run_id])
            problems += expect(waited, {0, 3, 4}, f"runs wait {run_id}")
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                problems += expect(proc.wait(timeout=60), {0}, "worker drained on SIGTERM")
            except TimeoutError:
                proc.kill()
                problems.append("a worker did not drain within 60 s of SIGTERM")
    return f"{len(released)} runs on two workers {env} ({', '.join(released)})", problems


MOVES: dict[str, tuple[int, Callable[[Ctx], MoveResult]]] = {
    "roll": (3, lambda c: roll(c, killed=False)),
    "roll-killed": (3, lambda c: roll(c, killed=True)),
    "roll-under-held-lock": (2, roll_under_held_lock),
    "roll-background": (2, roll_background),
    "release-background": (2, release_background),
    "kill-background": (1, kill_background),
    "resume": (4, lambda c: resume(c, killed=False)),
    "resume-killed": (2, lambda c: resume(c, killed=True)),
    "resume-live-owner": (1, lambda c: resume_live_owner(c, skew=0)),
    "takeover-after-lease": (2, lambda c: resume_live_owner(c, skew=SKEW_PAST_LEASE)),
    "cancel": (1, lambda c: cancel(c, "idle")),
    "cancel-parked-run": (1, lambda c: cancel(c, "parked")),
    "cancel-live-run": (1, lambda c: cancel(c, "live")),
    "approve": (4, lambda c: decide(c, approve=True)),
    "reject": (2, lambda c: decide(c, approve=False)),
    "reconcile": (5, lambda c: reconcile(c, "truthful")),
    "reconcile-contradicting": (1, lambda c: reconcile(c, "contradicting")),
    "reconcile-live-effect": (1, lambda c: reconcile(c, "live")),
    "gc": (3, gc),
    "artifacts-gc": (2, lambda c: artifacts_gc(c, orphaned=False)),
    "artifacts-gc-orphaned-derived": (3, lambda c: artifacts_gc(c, orphaned=True)),
    "retry-failed": (4, lambda c: retry_failed(c, killed=False)),
    "retry-failed-killed": (2, lambda c: retry_failed(c, killed=True)),
    "replay": (1, replay),
    "compensate": (2, lambda c: compensate(c, concurrent=False)),
    "compensate-concurrent": (2, lambda c: compensate(c, concurrent=True)),
    "workers": (3, workers),
}


#: The moves from the least likely to be drawn to the most: schedule ``seed`` makes
#: ``FOCUS[seed % len(FOCUS)]`` its focus, taken at the first step where it applies (the
#: other steps are drawn at random). So the first len(FOCUS) seeds try every move, the rare
#: ones first, whatever the weights; on their own, 40 random schedules missed some.
FOCUS = sorted(MOVES, key=lambda name: MOVES[name][0])


#: For a focus that needs a world it cannot yet apply to, the move that makes one (a
#: parked run to decide or cancel, a live background owner to act around), taken in place
#: of a random draw.
_PARKED = ("roll", lambda c: roll(c, killed=False, workflow="gated.yaml"))
_LIVE = ("roll-background", roll_background)
ENABLERS: dict[str, tuple[str, Callable[[Ctx], MoveResult]]] = {
    "approve": _PARKED,
    "reject": _PARKED,
    "cancel-parked-run": _PARKED,
    "cancel-live-run": _LIVE,
    "kill-background": _LIVE,
    "release-background": _LIVE,
    "resume-live-owner": _LIVE,
    "takeover-after-lease": _LIVE,
    "reconcile-live-effect": _LIVE,
}


def run_schedule(
    seed: int,
    steps: int,
    known_defects: frozenset[str] = frozenset(),
    launcher: Launcher | None = None,
    keep: Path | None = None,
    url: str | None = None,
) -> Outcome:
    """Run one schedule; ``keep`` leaves its world there for a post-mortem; ``url`` runs
    it on that (fresh, migrated) PostgreSQL database instead of a SQLite file."""
    started = time.monotonic()
    rng = random.Random(seed)
    outcome = Outcome(seed)
    root = Path(tempfile.mkdtemp(prefix=f"model-{seed}-", dir=keep))
    logs = root / "logs"
    logs.mkdir()
    launcher = launcher or Launcher(logs)
    launcher.logs = logs
    first_command = launcher._n
    world = World(root, launcher, url, seed=seed)
    checker = Checker(world)
    ctx = Ctx(world, checker, rng, first_fault=FAULT_POINTS[seed % len(FAULT_POINTS)])
    # Workers need PostgreSQL: on SQLite the schedules stay what they were.
    names = [n for n in MOVES if world.url is not None or n != "workers"]
    weights = [MOVES[n][0] for n in names]
    focus: str | None = FOCUS[seed % len(FOCUS)]
    if focus not in names or focus in known_defects:
        focus = None
    failed = False
    try:
        for index in range(steps):
            done: MoveResult = None
            if focus is not None:
                name = focus
                done = MOVES[name][1](ctx)
                if done is not None:
                    focus = None
                elif focus in ENABLERS:
                    name, enable = ENABLERS[focus]
                    done = enable(ctx)
            for _ in range(0 if done is not None else 50):
                name = rng.choices(names, weights)[0]
                if name in known_defects:
                    continue
                done = MOVES[name][1](ctx)
                if done is not None:
                    break
            if done is None:
                continue
            desc, problems = done
            outcome.steps.append(f"{index + 1}. [{name}] {desc}")
            outcome.moves.append(name)
            problems += checker.check()
            if problems:
                outcome.violations += [f"after step {index + 1} [{name}]: {p}" for p in problems]
                failed = True
                break
        if url is not None and seed % 3 == 0 and not failed:
            # Every third PostgreSQL schedule ends with several runs on several workers
            # when its random steps had none, so the suite always covers them.
            if not any("[workers]" in step for step in outcome.steps):
                desc, problems = workers(ctx) or ("", [])
                outcome.steps.append(f"end. [workers] {desc}")
                outcome.moves.append("workers")
                problems += checker.check()
                outcome.violations += problems
                failed = bool(problems)
        if world.background is not None and not failed:
            desc, problems = release_background(ctx) or ("", [])
            outcome.steps.append(f"end. [release-background] {desc}")
            outcome.violations += problems
        if not failed:
            outcome.violations += [f"at the end: {p}" for p in checker.check(final=True)]
    finally:
        if world.background is not None:
            world.background.proc.kill()
            world.open_gate()
        outcome.commands = launcher._n - first_command
        outcome.crashed_at = ctx.crashed_at
        outcome.seconds = time.monotonic() - started
        if keep is None and not outcome.violations:
            shutil.rmtree(root, ignore_errors=True)
        elif outcome.violations:
            outcome.steps.append(f"(world kept in {root})")
    return outcome


_LAUNCHER: Launcher | None = None


def schedule_for_seed(
    seed: int,
    known_defects: frozenset[str],
    keep: Path | None = None,
    urls: dict[int, str] | None = None,
) -> Outcome:
    """One schedule of 3-6 steps (a process-pool job; the worker keeps one launcher);
    ``urls`` gives each seed its PostgreSQL database."""
    global _LAUNCHER
    if _LAUNCHER is None:
        _LAUNCHER = Launcher(Path(tempfile.gettempdir()))
    url = None if urls is None else urls[seed]
    return run_schedule(seed, 3 + seed % 4, known_defects, _LAUNCHER, keep, url)
