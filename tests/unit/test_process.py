"""Bounded process execution against real processes: exits, caps, timeouts, cancellation."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentctl.errors import PolicyDeniedError, TaskError
from agentctl.process import (
    ProcessResult,
    ProcessSpec,
    decode_lossy,
    resolve_executable,
    run_process,
)
from agentctl.redaction import redact

SH = shutil.which("sh") or "/bin/sh"
PYTHON = sys.executable


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (init may be slow to reap orphans)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def _spec(*argv: str, cwd: Path, timeout: float = 5.0, **kwargs: object) -> ProcessSpec:
    return ProcessSpec(argv=argv, cwd=cwd, env={}, timeout_seconds=timeout, **kwargs)  # type: ignore[arg-type]


def _run(spec: ProcessSpec, **kwargs: object) -> ProcessResult:
    return asyncio.run(run_process(spec, **kwargs))  # type: ignore[arg-type]


def test_exit_code_and_both_streams_are_captured(tmp_path: Path) -> None:
    result = _run(_spec(SH, "-c", "printf out; printf err >&2; exit 3", cwd=tmp_path))
    assert result.exit_code == 3
    assert result.signal is None
    assert result.stdout == b"out"
    assert result.stderr == b"err"
    assert not result.timed_out
    assert result.limit_exceeded is None
    assert 0 <= result.duration_seconds < 5


def test_argv_is_not_parsed_by_a_shell(tmp_path: Path) -> None:
    result = _run(_spec(PYTHON, "-c", "import sys; print(sys.argv[1:])", "$HOME; *", cwd=tmp_path))
    assert result.exit_code == 0
    assert result.stdout == b"['$HOME; *']\n"


def test_cwd_is_used(tmp_path: Path) -> None:
    result = _run(_spec(PYTHON, "-c", "import os; print(os.getcwd())", cwd=tmp_path))
    assert result.stdout.decode().strip() == str(tmp_path)


def test_killed_by_signal_has_no_exit_code(tmp_path: Path) -> None:
    result = _run(_spec(SH, "-c", "kill -KILL $$", cwd=tmp_path))
    assert result.exit_code is None
    assert result.signal == signal.SIGKILL
    assert not result.timed_out


def test_child_environment_is_exactly_the_given_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTCTL_LEAK_CHECK", "must-not-leak")
    env_exe = shutil.which("env") or "/usr/bin/env"
    spec = ProcessSpec(argv=(env_exe,), cwd=tmp_path, env={"ONLY": "1"}, timeout_seconds=5)
    assert _run(spec).stdout == b"ONLY=1\n"


def test_stdin_bytes_are_fed_and_default_stdin_is_empty(tmp_path: Path) -> None:
    cat = shutil.which("cat") or "/bin/cat"
    assert _run(_spec(cat, cwd=tmp_path, stdin=b"hello\x00world")).stdout == b"hello\x00world"
    assert _run(_spec(cat, cwd=tmp_path)).stdout == b""


def test_child_that_ignores_stdin_does_not_hang(tmp_path: Path) -> None:
    result = _run(_spec(SH, "-c", "exit 0", cwd=tmp_path, stdin=b"x" * (1 << 20)))
    assert result.exit_code == 0


def test_on_started_gets_the_pid_that_leads_a_new_session(tmp_path: Path) -> None:
    seen: list[int] = []
    code = "import os; print(os.getpid(), os.getpgid(0), os.getsid(0))"
    result = _run(_spec(PYTHON, "-c", code, cwd=tmp_path), on_started=seen.append)
    assert len(seen) == 1
    assert result.stdout.split() == [str(seen[0]).encode()] * 3


@pytest.mark.parametrize(
    ("script", "limits", "expected"),
    [
        ("sys.stdout.write('a' * 5000)", {"stdout_limit_bytes": 1000}, "stdout"),
        ("sys.stderr.write('e' * 5000)", {"stderr_limit_bytes": 1000}, "stderr"),
        (
            "sys.stdout.write('a' * 600); sys.stdout.flush(); sys.stderr.write('e' * 600)",
            {"combined_limit_bytes": 1000},
            "combined",
        ),
    ],
)
def test_each_output_cap_terminates_the_process(
    tmp_path: Path, script: str, limits: dict[str, int], expected: str
) -> None:
    code = f"import sys, time; {script}; sys.stdout.flush(); sys.stderr.flush(); time.sleep(60)"
    result = _run(_spec(PYTHON, "-c", code, cwd=tmp_path, **limits))
    assert result.limit_exceeded == expected
    assert result.signal == signal.SIGTERM
    assert result.exit_code is None
    assert not result.timed_out
    assert result.duration_seconds < 4
    if expected == "stdout":
        assert result.stdout == b"a" * 1000
    elif expected == "stderr":
        assert result.stderr == b"e" * 1000
    else:
        # Which pipe is read first is up to the scheduler; the total is what is capped.
        assert len(result.stdout) + len(result.stderr) == 1000
        assert result.stdout == b"a" * len(result.stdout)
        assert result.stderr == b"e" * len(result.stderr)


def test_output_exactly_at_the_cap_is_not_an_overflow(tmp_path: Path) -> None:
    code = "import sys; sys.stdout.write('a' * 1000)"
    result = _run(_spec(PYTHON, "-c", code, cwd=tmp_path, stdout_limit_bytes=1000))
    assert result.limit_exceeded is None
    assert result.exit_code == 0
    assert len(result.stdout) == 1000


def test_timeout_kills_the_whole_group_including_grandchildren(tmp_path: Path) -> None:
    result = _run(_spec(SH, "-c", "sleep 60 & echo $!; sleep 60", cwd=tmp_path, timeout=0.3))
    assert result.timed_out
    assert result.exit_code is None
    assert result.signal == signal.SIGTERM
    assert 0.3 <= result.duration_seconds < 3
    grandchild = int(result.stdout)
    assert not _alive(grandchild)


def test_sigterm_is_escalated_to_sigkill_after_the_grace(tmp_path: Path) -> None:
    spec = _spec(SH, "-c", "trap '' TERM; sleep 60 & echo $!; wait", cwd=tmp_path, timeout=0.3)
    result = _run(spec, kill_grace_seconds=0.2)
    assert result.timed_out
    assert result.signal == signal.SIGKILL
    assert 0.5 <= result.duration_seconds < 3
    assert not _alive(int(result.stdout))


def test_background_grandchild_is_removed_when_the_leader_exits(tmp_path: Path) -> None:
    # The grandchild inherits stdout; without the group kill the call would last 60 s.
    result = _run(_spec(SH, "-c", "sleep 60 & echo $!", cwd=tmp_path, timeout=10))
    assert result.exit_code == 0
    assert not result.timed_out
    assert result.duration_seconds < 3
    assert not _alive(int(result.stdout))


def test_cancellation_kills_the_group_reaps_it_and_reraises(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    script = f"sleep 60 & echo $! > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}; sleep 60"
    leaders: list[int] = []

    async def scenario() -> None:
        task = asyncio.create_task(
            run_process(
                _spec(SH, "-c", script, cwd=tmp_path, timeout=30), on_started=leaders.append
            )
        )
        deadline = time.monotonic() + 30
        # Started means on_started ran (a cancel during the spawn itself is covered by
        # test_cancellation_during_the_spawn_reaps_the_group).
        while not (pid_file.exists() and leaders):
            assert time.monotonic() < deadline, "child never wrote its grandchild pid"
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            # A bound, not a timing claim: a cancel that waited for the grandchild's
            # `sleep 60` would fail here instead of hanging the suite.
            await asyncio.wait_for(task, timeout=30)

    asyncio.run(scenario())
    assert leaders and not _alive(leaders[0])
    assert not os.path.exists(f"/proc/{leaders[0]}")  # reaped, not left a zombie
    assert not _alive(int(pid_file.read_text()))


def test_spawn_failures_are_task_errors_before_anything_started(tmp_path: Path) -> None:
    not_executable = tmp_path / "tool"
    not_executable.write_text("#!/bin/sh\n")
    started: list[int] = []
    for spec in (
        _spec(str(not_executable), cwd=tmp_path),
        _spec(str(tmp_path / "missing"), cwd=tmp_path),
        _spec(SH, "-c", "true", cwd=tmp_path / "no-such-dir"),
    ):
        with pytest.raises(TaskError) as caught:
            _run(spec, on_started=started.append)
        assert caught.value.code == "process.spawn_failed"
        assert caught.value.message.startswith("cannot start process `")
    assert started == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"argv": ()},
        {"argv": ("sh", "-c", "true")},
        {"timeout_seconds": 0},
        {"timeout_seconds": float("inf")},
        {"stdout_limit_bytes": 0},
        {"stderr_limit_bytes": 0},
        {"combined_limit_bytes": 0},
    ],
)
def test_invalid_specs_are_rejected(tmp_path: Path, kwargs: dict[str, object]) -> None:
    fields: dict[str, object] = {"argv": (SH,), "cwd": tmp_path, "env": {}, "timeout_seconds": 1}
    fields.update(kwargs)
    with pytest.raises(TaskError) as caught:
        ProcessSpec(**fields)  # type: ignore[arg-type]
    assert caught.value.code == "input.invalid"


def _make_executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\necho tool\n")
    path.chmod(0o755)
    return path


def test_resolve_executable_finds_allowlisted_names_on_the_search_path(tmp_path: Path) -> None:
    tool = _make_executable(tmp_path / "tool")
    assert resolve_executable("tool", ["tool"], search_path=str(tmp_path)) == str(tool)


def test_resolve_executable_defaults_to_agentctls_own_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = _make_executable(tmp_path / "tool")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert resolve_executable("tool", ["tool"]) == str(tool)


def test_resolve_executable_denies_names_outside_the_allowlist(tmp_path: Path) -> None:
    _make_executable(tmp_path / "tool")
    for command in ("tool", str(tmp_path / "tool")):
        with pytest.raises(PolicyDeniedError) as caught:
            resolve_executable(command, ["other"], search_path=str(tmp_path))
        assert caught.value.message == (
            "policy denied effect: process `tool` is not in policy.processAllowlist"
        )
        assert caught.value.hint == "add `tool` to spec.policy.processAllowlist"


def test_resolve_executable_uses_absolute_paths_as_is(tmp_path: Path) -> None:
    tool = _make_executable(tmp_path / "tool")
    assert resolve_executable(str(tool), ["tool"], search_path="") == str(tool)


@pytest.mark.parametrize(
    ("command", "code"),
    [
        ("absent", "process.not_found"),
        ("{tmp}/absent", "process.not_found"),
        ("{tmp}/plain", "process.not_executable"),
        ("bin/plain", "input.invalid"),
        ("", "input.invalid"),
    ],
)
def test_resolve_executable_failures(tmp_path: Path, command: str, code: str) -> None:
    (tmp_path / "plain").write_text("data")
    command = command.format(tmp=tmp_path)
    allow = [os.path.basename(command), ""]
    with pytest.raises(TaskError) as caught:
        resolve_executable(command, allow, search_path=str(tmp_path))
    assert caught.value.code == code


def test_decode_lossy_replaces_invalid_utf8() -> None:
    assert decode_lossy(b"ok \xff\xfe \xc3\xa9") == "ok \ufffd\ufffd é"


def test_redact_replaces_longest_secrets_first_in_one_pass() -> None:
    text = "token=abc123 short=abc RED"
    assert redact(text, ["abc", "abc123", "", "RED"]) == (
        "token=[REDACTED] short=[REDACTED] [REDACTED]"
    )
    assert redact("nothing here", []) == "nothing here"
    assert redact("a.b a-b", ["a.b"]) == "[REDACTED] a-b"


def _pids_with_marker(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and _alive(int(entry.name)):
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("yields", [0, 1, 2, 3])
def test_cancellation_during_the_spawn_reaps_the_group(tmp_path: Path, yields: int) -> None:
    # A cancel that lands while create_subprocess_exec is still under way used to leave a
    # half-made transport waiting for pipes that a background grandchild holds open, and
    # the group was never signalled (the grandchild lived on, the cancel hung).
    marker = f"{time.monotonic_ns() % 10_000_000}.{yields}"
    script = f"sleep 3{marker} & sleep 3{marker}"

    async def scenario() -> None:
        task = asyncio.create_task(run_process(_spec(SH, "-c", script, cwd=tmp_path, timeout=60)))
        for _ in range(yields):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=20)

    asyncio.run(scenario())
    assert _pids_with_marker(f"3{marker}") == []


def test_the_leaders_exit_wakes_the_call_without_polling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leader's exit is signalled by the spawn's protocol: a worker waiting on many
    short processes does not wake every few milliseconds to look (each wake-up cost CPU,
    and noticed the exit up to 20 ms late). Polling here would hit the patched sleep."""
    import agentctl.process as process_module

    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def counted_sleep(delay: float, *args: object) -> object:
        slept.append(delay)
        return await real_sleep(delay, *args)

    monkeypatch.setattr(process_module.asyncio, "sleep", counted_sleep)
    result = _run(_spec(SH, "-c", "sleep 0.2; echo done", cwd=tmp_path))
    assert result.exit_code == 0
    assert result.stdout == b"done\n"
    assert slept == []


def test_every_process_starts_with_popen_arguments_that_let_cpython_vfork(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CPython starts a child with vfork only when nothing runs between fork and exec (no
    ``preexec_fn``, no user or group change); a ``preexec_fn`` forces a full fork of the
    whole worker per step. The process group comes from ``start_new_session`` instead.
    Checked on what the real spawn passes to Popen, with and without stdin."""
    import subprocess

    import agentctl.process as process_module

    seen: list[dict[str, object]] = []
    real_popen = subprocess.Popen

    def recording(*args: object, **kwargs: object) -> object:
        seen.append(dict(kwargs))
        return real_popen(*args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(process_module.subprocess, "Popen", recording)
    assert _run(_spec(SH, "-c", "exit 0", cwd=tmp_path)).exit_code == 0
    assert _run(_spec(SH, "-c", "cat", cwd=tmp_path, stdin=b"x")).stdout == b"x"
    assert len(seen) == 2
    for kwargs in seen:
        assert kwargs["start_new_session"] is True
        assert kwargs["close_fds"] is True
        for forcing_fork in ("preexec_fn", "user", "group", "extra_groups", "process_group"):
            assert kwargs.get(forcing_fork) is None, forcing_fork


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd on this platform")
def test_a_running_child_is_watched_without_a_thread_of_its_own(tmp_path: Path) -> None:
    """The leader's exit is seen through a pidfd on the event loop: no thread per child
    (asyncio's default watcher on Python 3.11 started one for every process)."""
    import threading

    during: list[int] = []
    before = threading.active_count()

    def started(_pid: int) -> None:
        during.append(threading.active_count())

    result = _run(_spec(SH, "-c", "sleep 0.3", cwd=tmp_path), on_started=started)
    assert result.exit_code == 0
    assert during == [before]


def test_without_a_pidfd_a_thread_waits_for_the_leader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where there is no pidfd (not Linux, a kernel before 5.3, a seccomp filter that
    refuses it) a thread of the child's own waits for its exit: a normal exit, a timeout
    that kills the group and a cancellation all end as they do with a pidfd."""

    def refused(_pid: int, *_args: object) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", refused, raising=False)
    result = _run(_spec(SH, "-c", "echo out; echo err >&2; exit 3", cwd=tmp_path))
    assert (result.exit_code, result.stdout, result.stderr) == (3, b"out\n", b"err\n")
    slow = _run(_spec(SH, "-c", "sleep 30", cwd=tmp_path, timeout=0.3))
    assert slow.timed_out and slow.signal is not None

    async def cancelled() -> None:
        task = asyncio.create_task(run_process(_spec(SH, "-c", "sleep 30", cwd=tmp_path)))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=20)

    asyncio.run(cancelled())


def test_a_plain_child_is_run_on_the_callers_task_alone(tmp_path: Path) -> None:
    """A child with neither stdin nor a conversation (a process step) is started, watched
    and read by the loop's callbacks: no task is made for its spawn, its exit, its pipes'
    end or its output cap (four tasks and a shield per step, each a few loop turns)."""
    made: list[object] = []

    async def main() -> tuple[ProcessResult, list[object]]:
        loop = asyncio.get_running_loop()

        def counted(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> Any:
            made.append(coro)
            return asyncio.Task(coro, loop=loop, **kwargs)

        loop.set_task_factory(counted)
        done = await run_process(_spec(SH, "-c", "echo out; echo err >&2; exit 3", cwd=tmp_path))
        return done, list(made)

    result, during = asyncio.run(main())
    assert during == []
    assert (result.exit_code, result.stdout, result.stderr) == (3, b"out\n", b"err\n")
