"""Bounded host process execution: no shell, a process group per child, capped output, timeouts.

This is the one place agentctl starts host processes (``builtin.shell.exec`` today, agent
CLIs and process extensions later), so every rule lives here:

- The argv is executed directly; no shell is ever inserted, so arguments are never parsed.
- The child gets exactly ``ProcessSpec.env`` (the environment is cleared) and, unless stdin
  bytes are given, an empty stdin rather than agentctl's own terminal.
- ``start_new_session=True`` makes the child lead its own process group. Every way the call
  can end (normal exit, timeout, output cap, cancellation) finishes by terminating what is
  left of that group, so no background grandchild outlives the call. A descendant that
  calls ``setsid`` itself escapes the group: this is bounded execution, not a sandbox.
- Termination is SIGTERM to the group, then SIGKILL once a short grace has passed with a
  member still alive. Group members that are already zombies count as dead: they are
  waiting for a reaper (their parent, or init) and hold no resources we can reclaim.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agentctl.errors import TaskError
from agentctl.executables import check_allowed, resolve_executable

__all__ = [
    "DRAIN_SECONDS",
    "Conversation",
    "KILL_GRACE_SECONDS",
    "LimitName",
    "ProcessResult",
    "ProcessSpec",
    "check_allowed",
    "decode_lossy",
    "probe",
    "resolve_executable",
    "run_process",
]

LimitName = Literal["stdout", "stderr", "combined"]
StreamName = Literal["stdout", "stderr"]

KILL_GRACE_SECONDS = 1.0
"""How long the group has to exit after SIGTERM before it receives SIGKILL."""

DRAIN_SECONDS = 1.0
"""How long to keep reading pipes once the group is gone: a descendant that escaped the
group with ``setsid`` may hold them open forever, and the call must still return."""

Conversation = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
"""A dialogue with the child over its stdout (read) and stdin (write), for a child that asks
its parent to do things while it runs (a ``python.function`` step); stderr stays captured
under the caps."""

_KILL_WAIT_SECONDS = 5.0
_POLL_SECONDS = 0.02
_READ_CHUNK = 64 * 1024
_MESSAGE_LIMIT = 64 << 20


@dataclass(frozen=True, slots=True)
class ProcessSpec:
    """Everything needed to run one bounded process; built by the action executor."""

    argv: tuple[str, ...]
    cwd: Path
    env: Mapping[str, str]
    timeout_seconds: float
    stdout_limit_bytes: int = 1 << 20
    stderr_limit_bytes: int = 1 << 20
    combined_limit_bytes: int = 2 << 20
    stdin: bytes | None = None

    def __post_init__(self) -> None:
        if not self.argv or not os.path.isabs(self.argv[0]):
            raise TaskError(
                f"process argv must start with an absolute executable path, got {self.argv!r}",
                code="input.invalid",
                hint="resolve the command with resolve_executable() first",
            )
        if not math.isfinite(self.timeout_seconds) or self.timeout_seconds <= 0:
            raise TaskError(
                f"process timeout must be a positive number of seconds, "
                f"got {self.timeout_seconds!r}",
                code="input.invalid",
            )
        limits = {
            "stdout_limit_bytes": self.stdout_limit_bytes,
            "stderr_limit_bytes": self.stderr_limit_bytes,
            "combined_limit_bytes": self.combined_limit_bytes,
        }
        for field_name, value in limits.items():
            if value < 1:
                raise TaskError(
                    f"process {field_name} must be at least 1 byte, got {value}",
                    code="input.invalid",
                )


@dataclass(frozen=True, slots=True)
class ProcessResult:
    """What happened. Output is truncated to the caps; ``limit_exceeded`` says which cap."""

    exit_code: int | None
    signal: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    limit_exceeded: LimitName | None
    duration_seconds: float


def decode_lossy(data: bytes) -> str:
    """Decode process output as UTF-8, replacing invalid bytes (output is never trusted)."""
    return data.decode("utf-8", errors="replace")


async def run_process(
    spec: ProcessSpec,
    *,
    on_started: Callable[[int], None] | None = None,
    kill_grace_seconds: float = KILL_GRACE_SECONDS,
    converse: Conversation | None = None,
) -> ProcessResult:
    """Run ``spec`` to completion, timeout, output overflow or cancellation.

    ``on_started(pid)`` runs right after the spawn succeeded (the executor marks the effect
    ``started`` then); a spawn failure raises ``TaskError`` before it, so nothing started.
    Cancellation terminates and reaps the group, then re-raises ``CancelledError``.

    With ``converse``, stdout and stdin are the conversation's instead (``spec.stdin`` must
    be None): the call ends when the child exits, the timeout passes or the conversation
    raises — then the group is terminated and the conversation's error re-raised. A
    conversation still running at the end is cancelled and awaited, so what it was doing
    (an effect in flight) is recorded before this returns.
    """
    started_at = time.monotonic()
    capture = _OutputCapture(spec)
    child = await _spawn_or_reap(spec, capture, kill_grace_seconds, converse is not None)
    group = _ProcessGroup(child, kill_grace_seconds)
    talk: asyncio.Task[None] | None = None
    helpers: list[asyncio.Task[object]] = []
    if converse is not None:
        assert child.stdout is not None and child.stdin is not None
        talk = asyncio.create_task(_talk(converse, child.stdout, child.stdin))
    elif spec.stdin is not None:
        assert child.stdin is not None
        helpers.append(asyncio.create_task(_feed(child.stdin, spec.stdin)))
    # The leader's exit is observed on its own: the pipes can stay open much longer (a
    # background grandchild holds them), and their end is awaited apart (``drained``).
    # Futures the loop's callbacks settle, waited for as they are (no task each).
    exit_wait, drained_wait, overflow_wait = child.exited, child.drained, capture.overflow
    timed_out = False
    ends: set[asyncio.Future[Any]] = {exit_wait, overflow_wait}
    if talk is not None:
        ends.add(talk)
    try:
        if on_started is not None:
            on_started(child.pid)
        done, _ = await asyncio.wait(
            ends, timeout=spec.timeout_seconds, return_when=asyncio.FIRST_COMPLETED
        )
        timed_out = not done
        if talk is not None and not timed_out:
            left = spec.timeout_seconds - (time.monotonic() - started_at)
            if talk in done and talk.exception() is None:
                # The child said its last word: it has the rest of its time to exit.
                done, _ = await asyncio.wait(
                    {exit_wait, overflow_wait},
                    timeout=max(left, 0.001),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                timed_out = not done
            elif exit_wait in done:
                await asyncio.wait({talk}, timeout=DRAIN_SECONDS)  # what it wrote last
        # Whatever ended the wait, nothing of the group may outlive this call: after a
        # normal exit this removes background grandchildren that still hold the pipes.
        await group.terminate()
        await _stop_talk(talk)
        if not drained_wait.done():
            await asyncio.wait([drained_wait], timeout=DRAIN_SECONDS)
    except BaseException:
        await group.abort(pending=[drained_wait])
        await _stop_talk(talk)
        raise
    finally:
        for task in helpers:
            task.cancel()
        child.close()
    if talk is not None and not talk.cancelled() and talk.exception() is not None:
        raise talk.exception()  # type: ignore[misc]
    returncode = child.returncode
    return ProcessResult(
        exit_code=returncode if returncode is not None and returncode >= 0 else None,
        signal=-returncode if returncode is not None and returncode < 0 else None,
        stdout=bytes(capture.buffers["stdout"]),
        stderr=bytes(capture.buffers["stderr"]),
        timed_out=timed_out,
        limit_exceeded=capture.limit_exceeded,
        duration_seconds=time.monotonic() - started_at,
    )


async def _talk(
    converse: Conversation, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        await converse(reader, writer)
    finally:
        writer.close()


async def _stop_talk(talk: asyncio.Task[None] | None) -> None:
    """Cancel a conversation still under way and let it record what it was doing."""
    if talk is None or talk.done():
        return
    talk.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await talk


async def _spawn_or_reap(
    spec: ProcessSpec,
    capture: _OutputCapture,
    kill_grace_seconds: float,
    conversation: bool = False,
) -> _Child:
    """Spawn the process; a cancellation that arrives while the spawn is under way lets the
    spawn finish (shielded), then terminates the new process group before re-raising.

    Cancelling the spawn itself would leave pipes half connected, and a background
    grandchild could hold them for as long as it lives while its group was never
    signalled. A child with neither stdin nor a conversation is started without waiting
    for anything (no cancellation can arrive half way): no task and no shield for it.
    """
    if not conversation and spec.stdin is None:
        return _start(spec, capture, conversation)
    spawn = asyncio.ensure_future(_spawn(spec, capture, conversation))
    try:
        return await asyncio.shield(spawn)
    except asyncio.CancelledError:
        try:
            child = await spawn
        except Exception:  # noqa: BLE001 - the spawn failed: nothing to reap
            raise asyncio.CancelledError from None
        try:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
            await _ProcessGroup(child, kill_grace_seconds).terminate()
        finally:
            child.close()
        raise


def popen_arguments(spec: ProcessSpec, piped: bool) -> dict[str, Any]:
    """The ``subprocess.Popen`` arguments of every process started here.

    The child leads a new session (``start_new_session``: its own process group, which
    every ending terminates) and nothing runs in it between fork and exec: with no
    ``preexec_fn`` (nor user or group changes) CPython starts it with ``vfork``, which
    does not copy the parent's page tables; a ``preexec_fn`` would force a full ``fork``
    of this large process for every step. Other file descriptors are closed in the child.
    """
    return {
        "args": list(spec.argv),
        "cwd": spec.cwd,
        "env": dict(spec.env),
        "stdin": subprocess.PIPE if piped else subprocess.DEVNULL,
        "stdout": subprocess.PIPE,
        "stderr": subprocess.PIPE,
        "start_new_session": True,
        "close_fds": True,
        "bufsize": 0,
    }


def _start(spec: ProcessSpec, capture: _OutputCapture, conversation: bool) -> _Child:
    """Start the process, watch its exit and read its stderr (and stdout, unless a
    conversation reads it) into ``capture``."""
    loop = asyncio.get_running_loop()
    piped = spec.stdin is not None or conversation
    try:
        popen = subprocess.Popen(**popen_arguments(spec, piped))  # noqa: S603 - no shell
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise TaskError(
            f"cannot start process `{spec.argv[0]}` in `{spec.cwd}`: {reason}",
            code="process.spawn_failed",
            hint="check that the executable exists and is executable, and that cwd exists",
        ) from exc
    child = _Child(popen, loop)
    try:
        child.watch_exit()
        assert popen.stdout is not None and popen.stderr is not None
        child.pump(popen.stderr, "stderr", capture)
        if not conversation:
            child.pump(popen.stdout, "stdout", capture)
    except BaseException:
        _abandon(child)
        raise
    return child


def _abandon(child: _Child) -> None:
    """A child not handed over: the caller never sees it, so its group ends here."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)
    child.close()


async def _spawn(spec: ProcessSpec, capture: _OutputCapture, conversation: bool) -> _Child:
    """:func:`_start`, then connect the pipes an event loop's transport reads or writes."""
    child = _start(spec, capture, conversation)
    popen, loop = child.popen, child.loop
    try:
        assert popen.stdout is not None
        if conversation:
            # A conversation's messages are lines of JSON; its limit is the longest one.
            child.stdout = asyncio.StreamReader(limit=_MESSAGE_LIMIT, loop=loop)
            reading = child.stdout
            reader, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reading, loop=loop), popen.stdout
            )
            child.transports.append(reader)
        if popen.stdin is not None:
            protocol = asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop)
            writer, _ = await loop.connect_write_pipe(lambda: protocol, popen.stdin)
            child.transports.append(writer)
            child.stdin = asyncio.StreamWriter(writer, protocol, None, loop)
    except BaseException:
        _abandon(child)
        raise
    return child


class _Child:
    """A process started by :func:`_spawn`, leading its own process group.

    Its exit is seen through a pidfd on the event loop (Linux): no thread per child, unlike
    asyncio's default child watcher on Python 3.11, and no second event loop needed. Where
    there is no pidfd, a thread of its own waits for it. Its stderr (and stdout, unless a
    conversation reads it) is read by the loop straight into the capture as it becomes
    readable; ``drained`` is set once those pipes reached their end.
    """

    def __init__(self, popen: subprocess.Popen[bytes], loop: asyncio.AbstractEventLoop) -> None:
        self.popen = popen
        self.loop = loop
        self.pid = popen.pid
        self.returncode: int | None = None
        #: Settled when the leader has exited and been reaped, and when the pipes read
        #: here reached their end. Waited for with ``asyncio.wait`` (never awaited as
        #: they are: a cancelled waiter must not cancel them).
        self.exited: asyncio.Future[None] = loop.create_future()
        self.drained: asyncio.Future[None] = loop.create_future()
        self.stdin: asyncio.StreamWriter | None = None
        self.stdout: asyncio.StreamReader | None = None
        self.transports: list[asyncio.BaseTransport] = []
        self._pipes: dict[int, tuple[Any, StreamName, _OutputCapture]] = {}
        self._pidfd: int | None = None

    def watch_exit(self) -> None:
        try:
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # no pidfd here (an old kernel, not Linux)
            threading.Thread(
                target=self._wait_in_thread, name=f"agentctl-wait-{self.pid}", daemon=True
            ).start()
            return
        self._pidfd = pidfd
        self.loop.add_reader(pidfd, self._reap)

    def _reap(self) -> None:
        """The pidfd is readable: the leader has exited; reap it (this does not block)."""
        self._stop_watching()
        self.popen.wait()
        self._exited()

    def _wait_in_thread(self) -> None:
        self.popen.wait()
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is waiting
            self.loop.call_soon_threadsafe(self._exited)

    def _exited(self) -> None:
        self.returncode = self.popen.returncode
        _settle(self.exited)

    def _stop_watching(self) -> None:
        if self._pidfd is not None:
            self.loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def pump(self, pipe: Any, stream: StreamName, capture: _OutputCapture) -> None:
        """Read ``pipe`` into ``capture`` whenever it is readable, until its end. Reading
        goes on past an overflow, so the child never blocks on a full pipe while it is
        being terminated; the capture simply stops keeping bytes."""
        fd = pipe.fileno()
        os.set_blocking(fd, False)
        self._pipes[fd] = (pipe, stream, capture)
        self.loop.add_reader(fd, self._readable, fd)

    def _readable(self, fd: int) -> None:
        pipe, stream, capture = self._pipes[fd]
        try:
            chunk = os.read(fd, _READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if chunk:
            capture.add(stream, chunk)
            return
        self._close_pipe(fd)
        if not self._pipes:
            _settle(self.drained)

    def _close_pipe(self, fd: int) -> None:
        pipe, _, _ = self._pipes.pop(fd)
        self.loop.remove_reader(fd)
        pipe.close()

    def close(self) -> None:
        """Stop reading and close every pipe; stop watching for the exit when the leader
        was never reaped (then it is this process's zombie until it exits)."""
        for fd in list(self._pipes):
            self._close_pipe(fd)
        for transport in self.transports:
            transport.close()
        if self.returncode is None and self._pidfd is not None:
            self._stop_watching()
            threading.Thread(
                target=self.popen.wait, name=f"agentctl-reap-{self.pid}", daemon=True
            ).start()


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _OutputCapture:
    """Keeps at most each cap of bytes; the first overflow is recorded and signalled."""

    def __init__(self, spec: ProcessSpec) -> None:
        self._caps: dict[StreamName, int] = {
            "stdout": spec.stdout_limit_bytes,
            "stderr": spec.stderr_limit_bytes,
        }
        self._combined_cap = spec.combined_limit_bytes
        self.buffers: dict[StreamName, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self.limit_exceeded: LimitName | None = None
        self.overflow: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def add(self, stream: StreamName, chunk: bytes) -> None:
        buffer = self.buffers[stream]
        stream_room = self._caps[stream] - len(buffer)
        combined_room = (
            self._combined_cap - len(self.buffers["stdout"]) - len(self.buffers["stderr"])
        )
        keep = max(0, min(len(chunk), stream_room, combined_room))
        buffer += chunk[:keep]
        if keep < len(chunk) and self.limit_exceeded is None:
            self.limit_exceeded = stream if stream_room <= combined_room else "combined"
            _settle(self.overflow)


async def _feed(writer: asyncio.StreamWriter, data: bytes) -> None:
    try:
        writer.write(data)
        await writer.drain()
    except (BrokenPipeError, ConnectionResetError):
        # The child exited or closed stdin without reading everything: that is its call.
        pass
    finally:
        writer.close()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            await writer.wait_closed()


class _ProcessGroup:
    """The child's process group (its id is the child's pid, thanks to the new session)."""

    def __init__(self, child: _Child, grace_seconds: float) -> None:
        self._child = child
        self._pgid = child.pid
        self._grace_seconds = grace_seconds

    async def terminate(self) -> None:
        """SIGTERM, a grace period, SIGKILL for survivors, then reap the leader."""
        if _group_has_live_members(self._pgid):
            self._send(signal.SIGTERM)
            deadline = time.monotonic() + self._grace_seconds
            while _group_has_live_members(self._pgid) and time.monotonic() < deadline:
                await asyncio.sleep(_POLL_SECONDS)
            if _group_has_live_members(self._pgid):
                self._send(signal.SIGKILL)
                deadline = time.monotonic() + _KILL_WAIT_SECONDS
                while _group_has_live_members(self._pgid) and time.monotonic() < deadline:
                    await asyncio.sleep(_POLL_SECONDS)
        exited = self._child.exited
        if not exited.done():
            await asyncio.wait([exited])

    async def abort(self, pending: Sequence[asyncio.Future[Any]]) -> None:
        """Terminate after cancellation or an error; a second cancellation escalates.

        The pipes are drained briefly too, so the transport closes instead of being left
        for the garbage collector.
        """
        try:
            await self.terminate()
            await asyncio.wait(pending, timeout=DRAIN_SECONDS)
        except BaseException:
            self._send(signal.SIGKILL)
            raise

    def _send(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._pgid, sig)


def _group_has_live_members(pgid: int) -> bool:
    """True while a non-zombie process is in group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    # killpg(0) also succeeds for zombies, which may wait for a reaper for a long time when
    # init does not reap (as in some containers); only /proc tells them apart.
    with os.scandir(proc) as entries:
        for entry in entries:
            if entry.name.isdigit() and _member_is_live(entry.path, pgid):
                return True
    return False


def _member_is_live(proc_entry: str, pgid: int) -> bool:
    try:
        with open(os.path.join(proc_entry, "stat"), "rb") as handle:
            stat = handle.read()
    except OSError:
        return False
    # The command name in parentheses may contain spaces; fields resume after the last ")".
    fields = stat[stat.rfind(b")") + 2 :].split()
    return len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X")


def probe(argv: Sequence[str], env: Mapping[str, str], what: str, timeout: float) -> str | None:
    """Run a short check (``docker info``, a trial sandbox): None when it exits 0, else
    what went wrong, naming ``what`` and the last line it printed on stderr. The one probe
    of an isolation runtime (docs/isolation.md)."""
    try:
        done = subprocess.run(
            list(argv),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"{what} did not answer within {timeout:g}s"
    except OSError as exc:
        return f"{what} could not start: {exc.strerror or exc}"
    if done.returncode == 0:
        return None
    tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
    return f"{what} exited {done.returncode}: {tail[0][:300]}"
