"""The scheduling half of :class:`agentctl.Runtime`: schedules, monitors and the daemon
that fires them (``agentctl schedule``, ``monitor`` and ``daemon``).
:class:`agentctl.Runtime` inherits these methods; this module is internal, use the facade.

Each method opens the store, calls the scheduling operation the command called and closes
it again, keeping that operation's transactions and schedule locks as they are; the
records it returns are the documents the matching command prints with ``--output json``
(``to_json()``). The daemon reports each step as a :class:`DaemonEvent`, which carries the
line a person reads beside the machine document.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast, overload

if TYPE_CHECKING:
    from agentctl.ids import Clock
    from agentctl.results import EventSink

__all__ = [
    "DaemonEvent",
    "DaemonSink",
    "DaemonStop",
    "DaemonTick",
    "ExitedRun",
    "MonitorObservation",
    "MonitorReport",
    "ScheduleFiring",
    "ScheduleRemoval",
    "ScheduleReport",
    "SchedulingOperations",
]

#: How often ``agentctl daemon`` looks for answered parked runs by default.
DEFAULT_POLL = "30s"

Record = TypeVar("Record", bound="_Document")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    return value.to_json() if isinstance(value, _Document) else value


class _Document:
    """A record whose document has one camelCase key per field, in field order (a tuple
    is written as a list, a nested record as its document): what the scheduling
    operations assemble, so ``to_json()`` prints it byte for byte."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        fields = dataclasses.fields(cast(Any, self))
        return {_camel(f.name): _plain(getattr(self, f.name)) for f in fields}

    @classmethod
    def from_json(cls: type[Record], data: Mapping[str, Any]) -> Record:
        """The record of a document the scheduling operations assembled."""
        nested = _NESTED.get(cls, {})
        values = {}
        for field in dataclasses.fields(cast(Any, cls)):
            value = data[_camel(field.name)]
            if field.name in nested:
                value = tuple(nested[field.name].from_json(item) for item in value)
            values[field.name] = value
        made: Record = cast(Any, cls)(**values)
        return made


@dataclass(frozen=True, slots=True)
class ScheduleFiring(_Document):
    """One slot a schedule or monitor fired (or skipped, or failed to start): when,
    why (``trigger``: cron, interval, monitor or manual), its ``state`` and its run."""

    schedule: str
    slot: str
    trigger: str
    state: str
    run_id: str | None
    missed_before: int
    reason: str | None
    recorded_at: str


@dataclass(frozen=True, slots=True)
class ScheduleReport(_Document):
    """A schedule as ``schedule show`` prints it: its workflow as given and as resolved,
    its rule (``cron`` in ``timezone``, or ``every_seconds``), its catch-up, overlap and
    jitter policies, where it stands (``cursor``, ``missed``, ``next_slot``, ``next_due``)
    and its recent ``firings``, newest first. ``problem`` says why no next slot could be
    computed (a time zone this machine no longer knows)."""

    name: str
    workflow: str
    workflow_file: str
    project_dir: str
    workspace: str | None
    cron: str | None
    every_seconds: int | None
    timezone: str
    inputs: dict[str, Any]
    catch_up: str
    max_catch_up: int
    overlap: str
    jitter_seconds: int
    grace_seconds: int
    paused: bool
    cursor: str
    missed: int
    next_slot: str | None
    next_due: str | None
    created_at: str
    firings: tuple[ScheduleFiring, ...]
    project_exists: bool
    problem: str | None


@dataclass(frozen=True, slots=True)
class MonitorObservation(_Document):
    """One observation of a monitor: its slot, what it meant (``baseline``,
    ``unchanged``, ``pending``, ``changed``), the value's digest and the value."""

    slot: str
    outcome: str | None
    digest: str
    value: Any


@dataclass(frozen=True, slots=True)
class MonitorReport(_Document):
    """A monitor as ``monitor show`` prints it: what it observes (``kind``, ``target``)
    and how often, the value it last confirmed (``current``), a change still waiting for
    its debounce (``pending_change``), its recent ``observations`` and ``firings``."""

    name: str
    workflow: str
    workflow_file: str
    kind: str | None
    target: Any
    debounce_seconds: int
    every_seconds: int | None
    inputs: dict[str, Any]
    overlap: str
    paused: bool
    cursor: str
    current: Any
    pending_change: Any
    observations: tuple[MonitorObservation, ...]
    firings: tuple[ScheduleFiring, ...]
    created_at: str


@dataclass(frozen=True, slots=True)
class ScheduleRemoval(_Document):
    """What ``schedule remove`` / ``monitor remove`` did (the runs it started stay)."""

    name: str
    removed: bool


@dataclass(frozen=True, slots=True)
class ExitedRun(_Document):
    """A run the daemon started whose child process has exited: its exit code, its log
    beside the database and the state (or error code) the log ends with."""

    run_id: str
    exit_code: int
    log: str
    state: str | None


@dataclass(frozen=True, slots=True)
class DaemonTick(_Document):
    """What one ``daemon --once`` did: the slots it ``fired``, ``skipped`` (each with its
    reason) and could not start (``failed``), the runs it ``started`` and ``resumed``, and
    how those ``runs`` exited (it waits for them). Each slot is its event's document."""

    fired: tuple[dict[str, Any], ...]
    skipped: tuple[dict[str, Any], ...]
    failed: tuple[dict[str, Any], ...]
    started: tuple[str, ...]
    resumed: tuple[str, ...]
    runs: tuple[ExitedRun, ...]

    @property
    def summary(self) -> str:
        counts = (self.fired, self.skipped, self.failed, self.resumed)
        return "fired {}, skipped {}, failed {}, resumed {}".format(*map(len, counts))


@dataclass(frozen=True, slots=True)
class DaemonStop(_Document):
    """What a daemon left when it stopped: the runs its children still execute (they go
    on without it)."""

    runs_still_running: tuple[str, ...]

    @property
    def summary(self) -> str:
        running = self.runs_still_running
        return "daemon stopped" + (f"; runs still running: {', '.join(running)}" if running else "")


@dataclass(frozen=True, slots=True)
class DaemonEvent:
    """One step of the daemon: ``kind`` (``SlotFired``, ``SlotSkipped``, ``SlotsMissed``,
    ``SlotFailed``, ``Observed``, ``RunStarted``, ``RunResumed``, ``RunExited``,
    ``ScheduleError``, ``DaemonRetry``, ``DaemonStarted``), its document ``data`` and
    ``summary``, the line a person reads."""

    kind: str
    data: dict[str, Any]
    summary: str

    def to_json(self) -> dict[str, Any]:
        return self.data


# The records inside a record's document, by field.
_NESTED: dict[type[_Document], dict[str, type[_Document]]] = {
    ScheduleReport: {"firings": ScheduleFiring},
    MonitorReport: {"observations": MonitorObservation, "firings": ScheduleFiring},
}

DaemonSink = Callable[[DaemonEvent], None]  # hears each step of SchedulingOperations.daemon


class SchedulingOperations:
    """``agentctl schedule``, ``monitor`` and ``daemon``; the state they use (``db``,
    ``clock``, ``on_event``, ``handle_signals``) is the facade's."""

    db: str
    handle_signals: bool
    on_event: EventSink | None

    if TYPE_CHECKING:  # Runtime defines it

        @property
        def clock(self) -> Clock: ...

    # -- schedules -----------------------------------------------------------------------

    def add_schedule(
        self,
        name: str,
        workflow: str,
        *,
        cron: str | None = None,
        every: str | int | None = None,
        timezone: str = "UTC",
        input_pairs: Sequence[str] = (),
        catch_up: str = "latest",
        max_catch_up: int = 10,
        overlap: str = "skip",
        jitter: str | int = "0s",
        grace: str | int = "60s",
        start: str | None = None,
        workspace: str | None = None,
    ) -> ScheduleReport:
        """Record a schedule of ``workflow`` (a registered name or a file), fired by
        :meth:`daemon` on a ``cron`` expression in ``timezone`` or ``every`` interval
        (exactly one). The workflow and ``input_pairs`` are compiled now (a broken one
        raises :class:`~agentctl.errors.ValidationError`) and again at every slot.
        Durations are seconds or texts such as ``90s``, ``10m``, ``1h30m``; ``start`` is
        an ISO time the first slots come after (default: now)."""
        from agentctl.engine.run.creation import prepare_run
        from agentctl.errors import UsageError
        from agentctl.scheduling.registry import resolve_workflow
        from agentctl.scheduling.schedules import add_schedule, new_schedule
        from agentctl.scheduling.slots import parse_duration
        from agentctl.store.engine import open_store

        if (cron is None) == (every is None):
            raise UsageError("give exactly one of --cron and --every")
        pairs = list(input_pairs)
        resolved = resolve_workflow(workflow)
        # Refuse a workflow that would fail at its first slot: compile it and its inputs now.
        prepared = prepare_run(resolved, input_pairs=pairs, workspace=workspace)
        now = self.clock.now()
        new = new_schedule(
            name=name,
            workflow=workflow,
            workflow_file=prepared.workflow_file,
            workspace=workspace,
            inputs=_recorded_inputs(pairs, prepared.inputs),
            start=start,
            now=now,
            cron=cron,
            interval_seconds=parse_duration(str(every), "--every") if every is not None else None,
            timezone=timezone,
            catch_up=catch_up,
            max_catch_up=max_catch_up,
            overlap=overlap,
            jitter_seconds=parse_duration(str(jitter), "--jitter"),
            grace_seconds=parse_duration(str(grace), "--grace"),
        )
        with open_store(self.db) as store:
            return ScheduleReport.from_json(add_schedule(store, new, now=now))

    def schedules(self) -> list[ScheduleReport]:
        """Every schedule (not the monitors), each with its last firing."""
        from agentctl.scheduling.schedules import list_schedules
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            found = list_schedules(store, now=self.clock.now())
        return [ScheduleReport.from_json(item) for item in found]

    def schedule(self, name: str, *, firings: int = 20) -> ScheduleReport:
        """One schedule with its ``firings`` most recent firings."""
        from agentctl.scheduling.schedules import get_schedule
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            found = get_schedule(store, name, now=self.clock.now(), firings=firings)
        return ScheduleReport.from_json(found)

    def set_schedule_paused(self, name: str, paused: bool) -> ScheduleReport:
        """Pause a schedule (runs it started go on), or resume it from its next slot: the
        slots passed while paused are counted as missed, not fired."""
        from agentctl.scheduling.schedules import get_schedule, set_paused
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            set_paused(store, name, paused, now=self.clock.now(), monitor=False)
            return ScheduleReport.from_json(get_schedule(store, name, now=self.clock.now()))

    def remove_schedule(self, name: str) -> ScheduleRemoval:
        """Remove a schedule and its firing records (the runs it started stay)."""
        return self._remove(name, monitor=False)

    def trigger_schedule(self, name: str) -> str:
        """Fire schedule ``name`` now as a manual firing (its overlap policy not applied):
        the run is created and linked to the firing but not executed; its id. Execute it
        with :meth:`~agentctl.Runtime.resume`."""
        from agentctl.engine.scheduled_runs import RunLauncher
        from agentctl.scheduling.daemon import fire_now
        from agentctl.store.engine import open_store

        clock = self.clock
        with open_store(self.db, create=False) as store:
            return fire_now(store, name, clock.now(), RunLauncher(store, clock))

    # -- monitors ------------------------------------------------------------------------

    def add_monitor(
        self,
        name: str,
        workflow: str,
        *,
        watch_files: Sequence[str] = (),
        http: str | None = None,
        expect_status: int | None = None,
        command: str | None = None,
        every: str | int = "30s",
        debounce: str | int = "0s",
        input_pairs: Sequence[str] = (),
        overlap: str = "skip",
        start: str | None = None,
        workspace: str | None = None,
    ) -> MonitorReport:
        """Record a monitor that observes exactly one of ``watch_files`` (globs under the
        current directory), ``http`` (a URL, healthy at ``expect_status``) or ``command``
        (split like a shell, run under the workflow's ``builtin.shell.exec`` rules) every
        ``every``, and starts a run of ``workflow`` with the inputs ``previous``,
        ``current`` and ``observedAt`` when the value changes and stays changed for
        ``debounce``. ``overlap`` is ``skip`` or ``allow``."""
        from agentctl.engine.run.creation import prepare_run
        from agentctl.errors import UsageError
        from agentctl.scheduling.monitors import MonitorTarget, add_monitor, monitor_target
        from agentctl.scheduling.registry import resolve_workflow
        from agentctl.scheduling.schedules import new_schedule
        from agentctl.scheduling.slots import parse_duration
        from agentctl.store.engine import open_store

        kind, target = monitor_target(list(watch_files), http, expect_status, command)
        if overlap not in ("skip", "allow"):
            raise UsageError(f"--overlap {overlap!r} is not one of skip, allow")
        pairs = list(input_pairs)
        prepared = prepare_run(resolve_workflow(workflow), input_pairs=pairs, workspace=workspace)
        if kind == "command":
            from agentctl.engine.monitor_commands import check_command

            check_command(prepared.workflow, target["argv"])
        monitor = MonitorTarget(kind, target, parse_duration(str(debounce), "--debounce"))
        now = self.clock.now()
        base = new_schedule(
            name=name,
            workflow=workflow,
            workflow_file=prepared.workflow_file,
            workspace=workspace,
            inputs=_recorded_inputs(pairs, prepared.inputs),
            start=start,
            now=now,
            cron=None,
            interval_seconds=parse_duration(str(every), "--every"),
            timezone="UTC",
            catch_up="latest",
            max_catch_up=1,
            overlap=overlap,
            jitter_seconds=0,
            grace_seconds=0,
        )
        with open_store(self.db) as store:
            return MonitorReport.from_json(add_monitor(store, base, monitor, now=now))

    def monitors(self) -> list[MonitorReport]:
        """Every monitor, each with its last observation and firing."""
        from agentctl.scheduling.monitors import list_monitors
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            found = list_monitors(store, now=self.clock.now())
        return [MonitorReport.from_json(item) for item in found]

    def monitor(self, name: str, *, observations: int = 10) -> MonitorReport:
        """One monitor with its ``observations`` most recent observations and firings."""
        from agentctl.scheduling.monitors import get_monitor
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            found = get_monitor(store, name, now=self.clock.now(), observations=observations)
        return MonitorReport.from_json(found)

    def set_monitor_paused(self, name: str, paused: bool) -> MonitorReport:
        """Stop observing (runs it started go on), or observe again from the next
        interval."""
        from agentctl.scheduling.monitors import get_monitor
        from agentctl.scheduling.schedules import set_paused
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            set_paused(store, name, paused, now=self.clock.now(), monitor=True)
            return MonitorReport.from_json(get_monitor(store, name, now=self.clock.now()))

    def remove_monitor(self, name: str) -> ScheduleRemoval:
        """Remove a monitor and its observations (the runs it started stay)."""
        return self._remove(name, monitor=True)

    # -- the daemon ----------------------------------------------------------------------

    @overload
    def daemon(
        self,
        *,
        once: Literal[True],
        now: str | None = None,
        poll: str | int = DEFAULT_POLL,
        events: DaemonSink | None = None,
        stop: threading.Event | None = None,
    ) -> DaemonTick: ...

    @overload
    def daemon(
        self,
        *,
        once: Literal[False] = False,
        now: None = None,
        poll: str | int = DEFAULT_POLL,
        events: DaemonSink | None = None,
        stop: threading.Event | None = None,
    ) -> DaemonStop: ...

    @overload
    def daemon(
        self,
        *,
        once: bool,
        now: str | None = None,
        poll: str | int = DEFAULT_POLL,
        events: DaemonSink | None = None,
        stop: threading.Event | None = None,
    ) -> DaemonTick | DaemonStop: ...

    def daemon(
        self,
        *,
        once: bool = False,
        now: str | None = None,
        poll: str | int = DEFAULT_POLL,
        events: DaemonSink | None = None,
        stop: threading.Event | None = None,
    ) -> DaemonTick | DaemonStop:
        """Fire due schedule slots, observe monitors and resume parked runs whose
        approvals were answered; runs execute in child processes (``logs/RUN.log`` beside
        the database). With ``once``: do what is due (at ``now``, an ISO time, when
        given), wait for the runs it started and return a :class:`DaemonTick`. Without:
        loop, waking at the next due slot or every ``poll``, until ``stop`` is set (with
        ``handle_signals`` also on SIGTERM or SIGINT), and return a :class:`DaemonStop`.
        Each step goes to ``events`` (else to ``on_event`` as ``(kind, data)``)."""
        import signal

        from agentctl.engine.core.faults import Faults
        from agentctl.engine.scheduled_runs import RunLauncher
        from agentctl.errors import UsageError
        from agentctl.scheduling.daemon import run_loop, tick
        from agentctl.scheduling.slots import parse_duration, parse_instant
        from agentctl.store.engine import open_store

        if now is not None and not once:
            raise UsageError("--now needs --once", hint="agentctl daemon --once --now TIME")
        poll_seconds = max(1, parse_duration(str(poll), "--poll"))
        fixed = parse_instant(now, "--now") if now is not None else None
        clock = self.clock
        faults = Faults()
        sink = events
        legacy = self.on_event

        def report(kind: str, data: dict[str, Any], human: str) -> None:
            if sink is not None:
                sink(DaemonEvent(kind, data, human))
            elif legacy is not None:
                legacy(kind, data)

        with open_store(self.db) as store:
            launcher = RunLauncher(store, clock)

            def reap(wait: bool = False) -> list[ExitedRun]:
                finished = launcher.reap(wait=wait)
                exited = []
                for item in finished:
                    document = RunLauncher.last_outcome(item["log"]) or {}
                    state = (document.get("data") or {}).get("state") or (
                        (document.get("error") or {}).get("code")
                    )
                    item["state"] = state
                    report(
                        "RunExited", item, f"{item['runId']} exited {item['exitCode']} ({state})"
                    )
                    exited.append(ExitedRun(item["runId"], item["exitCode"], item["log"], state))
                return exited

            def reap_finished() -> None:
                reap()

            if once:
                ticked = tick(
                    store, fixed or clock.now(), launcher, events=report, fault=faults.hit
                )
                runs = reap(wait=True)
                return DaemonTick(
                    fired=tuple(ticked.fired),
                    skipped=tuple(ticked.skipped),
                    failed=tuple(ticked.failed),
                    started=tuple(ticked.started),
                    resumed=tuple(ticked.resumed),
                    runs=tuple(runs),
                )
            stopping = stop if stop is not None else threading.Event()
            handled = (signal.SIGTERM, signal.SIGINT) if self.handle_signals else ()
            previous = {sig: signal.signal(sig, lambda *_: stopping.set()) for sig in handled}
            report(
                "DaemonStarted", {"db": store.path, "pollSeconds": poll_seconds}, "daemon started"
            )
            try:
                run_loop(
                    store,
                    clock.now,
                    launcher,
                    stopping,
                    poll_seconds=poll_seconds,
                    events=report,
                    fault=faults.hit,
                    reap=reap_finished,
                )
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
            return DaemonStop(tuple(sorted(launcher.children)))

    # -- internals -----------------------------------------------------------------------

    def _remove(self, name: str, *, monitor: bool) -> ScheduleRemoval:
        from agentctl.scheduling.schedules import remove_schedule
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            data = remove_schedule(store, name, monitor=monitor)
        return ScheduleRemoval(data["name"], data["removed"])


def _recorded_inputs(pairs: list[str], prepared_inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Each ``--input`` pair as the run will read it: from the inputs prepare_run merged,
    so a string spec.inputSchema declares keeps its text."""
    from agentctl.engine.run.creation import parse_input_pairs

    return {key: prepared_inputs[key] for key in parse_input_pairs(pairs)}
