"""Real `agentctl` processes for tests, without paying the interpreter's start-up each time.

``run_agentctl(argv, cwd=..., env=...)`` behaves like ``subprocess.run([python, "-m",
"agentctl", *argv], capture_output=True, text=True, ...)``: the command is its own OS
process (its own pid, environment, working directory and file descriptors; signals reach
it; its exit code and both streams come back as a ``CompletedProcess``). What it skips is
the part every command repeats: starting Python and importing agentctl and its libraries
(0.4-1.2 s of CPU a command, most of the suite's time).

How: one fork server per test process, started on first use. It is a clean Python process
(no pytest, no threads) that imports the CLI once (tests/model/launcher.py ``preimport``)
and then, per command, forks a child that takes the caller's stdin/stdout/stderr (passed
over a Unix socket), environment and directory, runs the console script's entry point
(``agentctl.cli.main.run``) and ends the way an interpreter does: non-daemon threads
joined, ``atexit`` handlers run, streams flushed, the exit code returned.

Use it where a test checks what a command does, not how the interpreter starts (the
start-up tests, the wheel test and anything timing start-up keep ``python -m agentctl``).
``AGENTCTL_TEST_LAUNCH=exec`` runs every command through ``python -m agentctl`` instead.
"""

from __future__ import annotations

import atexit
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["ForkedProcess", "agentctl_command", "run_agentctl", "start_agentctl"]

REPO = Path(__file__).resolve().parents[1]
LAUNCH_ENV = "AGENTCTL_TEST_LAUNCH"


# --- the client (in the test process) ---------------------------------------------------


class _Server:
    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="agentctl-forkserver-")
        self.path = os.path.join(self.dir, "s")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTCTL_", "OTEL_"))}
        # stdin stays open as long as this process lives: the server ends when it closes.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.forkserver", self.path],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        if ready != b"ready\n":
            raise RuntimeError(f"the agentctl fork server did not start: {ready!r}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for name in (self.path,):
            try:
                os.unlink(name)
            except OSError:
                pass
        try:
            os.rmdir(self.dir)
        except OSError:
            pass


_server: _Server | None = None
_server_lock = threading.Lock()


def _the_server() -> _Server:
    global _server
    with _server_lock:
        if _server is None or _server.proc.poll() is not None:
            _server = _Server()
            atexit.register(_server.close)
        return _server


class ForkedProcess:
    """A started command: ``pid``, ``poll()``, ``wait(timeout)``, ``send_signal``,
    ``terminate``, ``kill`` and ``returncode``, as on ``subprocess.Popen``."""

    def __init__(
        self, argv: list[str], conn: socket.socket, pipes: dict[str, int] | None = None
    ) -> None:
        self.args = argv
        self._conn = conn
        self._buffer = b""
        self.returncode: int | None = None
        self.pid = int(self._message(None)["pid"])
        #: Text streams for the outputs started with ``subprocess.PIPE``, else None.
        self.stdout: io.TextIOWrapper | None = None
        self.stderr: io.TextIOWrapper | None = None
        for name, fd in (pipes or {}).items():
            setattr(self, name, open(fd, encoding="utf-8", errors="replace"))  # noqa: SIM115
        self._read: dict[str, list[str]] = {}
        self._readers: list[threading.Thread] = []

    def communicate(self, timeout: float | None = None) -> tuple[str | None, str | None]:
        """Both piped outputs to their end and the exit, as ``Popen.communicate``."""
        if not self._readers:
            for name in ("stdout", "stderr"):
                stream = getattr(self, name)
                if stream is not None:
                    chunks = self._read.setdefault(name, [])
                    reader = threading.Thread(
                        target=lambda s=stream, c=chunks: c.append(s.read()), daemon=True
                    )
                    reader.start()
                    self._readers.append(reader)
        deadline = None if timeout is None else time.monotonic() + timeout
        for reader in self._readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        for name in ("stdout", "stderr"):
            stream = getattr(self, name)
            if stream is not None:
                stream.close()
        out, err = self._read.get("stdout"), self._read.get("stderr")
        return (
            "".join(out) if out is not None else None,
            "".join(err) if err is not None else None,
        )

    def _message(self, timeout: float | None) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self._conn.settimeout(left)
            else:
                self._conn.settimeout(None)
            try:
                chunk = self._conn.recv(4096)
            except TimeoutError:
                raise TimeoutError from None
            if not chunk:
                raise RuntimeError(f"the agentctl fork server lost {self.args}")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        return message

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                self.returncode = int(self._message(timeout)["code"])
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
            self._conn.close()
        return self.returncode

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                return self.wait(0.001)
            except subprocess.TimeoutExpired:
                return None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _exec_argv(argv: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "agentctl", *argv]


def start_agentctl(
    argv: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    stdin: int | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
    start_new_session: bool = False,
) -> ForkedProcess | subprocess.Popen[str]:
    """Start ``agentctl *argv``; ``stdin``/``stdout``/``stderr`` are file descriptors,
    ``subprocess.DEVNULL`` or (outputs) ``subprocess.PIPE``, read as text from the
    returned process's ``stdout``/``stderr`` (default: /dev/null for stdin, this process's
    for the others)."""
    args = [os.fspath(a) for a in argv]
    if os.environ.get(LAUNCH_ENV, "fork") == "exec":
        return subprocess.Popen(
            _exec_argv(args),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            text=True,
            start_new_session=start_new_session,
        )
    server = _the_server()
    request = {
        "argv": args,
        "cwd": os.path.abspath(cwd if cwd is not None else os.getcwd()),
        "env": dict(env if env is not None else os.environ),
        "session": start_new_session,
    }
    null = os.open(os.devnull, os.O_RDWR)
    ours: dict[str, int] = {}  # the read ends of the pipes asked for
    theirs: list[int] = [null]  # closed here once the server has them
    fds = [null if stdin is None or stdin == subprocess.DEVNULL else stdin]
    for name, given, default in (
        ("stdout", stdout, 1),  # what a subprocess would inherit
        ("stderr", stderr, 2),
    ):
        if given == subprocess.PIPE:
            read, write = os.pipe()
            ours[name] = read
            theirs.append(write)
            fds.append(write)
        elif given == subprocess.DEVNULL:
            fds.append(null)
        else:
            fds.append(default if given is None else given)
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(server.path)
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], fds)
    finally:
        for fd in theirs:
            os.close(fd)
    return ForkedProcess(args, conn, ours)


def run_agentctl(
    argv: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """``agentctl *argv`` to its end, as ``subprocess.run(..., capture_output=True,
    text=True, check=False)`` would run it (stdin: ``input``, else /dev/null)."""
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.TemporaryFile() as inp,
    ):
        if input is not None:
            inp.write(input.encode())
            inp.seek(0)
        proc = start_agentctl(
            argv,
            cwd=cwd,
            env=env,
            stdin=inp.fileno() if input is not None else None,
            stdout=out.fileno(),
            stderr=err.fileno(),
        )
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(
            proc.args,
            code,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
        )


# A client small enough to start in milliseconds (no site-packages, stdlib only): it hands
# the fork server its argv, directory, environment and standard streams, and exits with
# the command's code (128 + N for a command killed by signal N, as a shell reports it).
_CLIENT = """\
import json, os, socket, sys
conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
conn.connect(sys.argv[1])
request = {"argv": sys.argv[2:], "cwd": os.getcwd(), "env": dict(os.environ), "session": False}
socket.send_fds(conn, [json.dumps(request).encode() + b"\\n"], [0, 1, 2])
received = b""
while received.count(b"\\n") < 2:
    chunk = conn.recv(4096)
    if not chunk:
        sys.exit("agentctl fork server: lost the command")
    received += chunk
code = json.loads(received.split(b"\\n")[1])["code"]
sys.exit(code if code >= 0 else 128 - code)
"""


def agentctl_command(directory: Path) -> Path:
    """An executable in ``directory`` that runs ``agentctl ARGS`` as a command forked from
    this process's server, for a script that calls ``$AGENTCTL`` many times
    (scripts/demo.sh): the same streams, directory, environment and exit code, without an
    interpreter's start-up and imports per call. ``AGENTCTL_TEST_LAUNCH=exec`` gives the
    environment's own ``agentctl`` instead."""
    if os.environ.get(LAUNCH_ENV, "fork") == "exec":
        return Path(sys.executable).with_name("agentctl")
    client = directory / "agentctl-client.py"
    client.write_text(_CLIENT)
    command = directory / "agentctl"
    command.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" -I -S "{client}" "{_the_server().path}" "$@"\n'
    )
    command.chmod(0o755)
    return command


# --- the server (``python -m tests.forkserver PATH``) -----------------------------------


def _child(request: dict[str, Any], fds: list[int]) -> None:
    """Become ``agentctl *argv`` and end like an interpreter would; never returns."""
    code = 1
    try:
        if request["session"]:
            os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [str(REPO / "agentctl" / "__main__.py"), *request["argv"]]
        from agentctl.cli.main import run

        try:
            run()
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        # What the interpreter does at exit: wait for non-daemon threads, run atexit.
        threading._shutdown()  # type: ignore[attr-defined]
        import atexit as exits

        exits._run_exitfuncs()
    except BaseException as exc:  # noqa: BLE001 - report it, as an uncaught error would
        import traceback

        traceback.print_exception(exc)
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _monitor(conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    """Fork the command, tell the client its pid, then its exit code; never returns."""
    code = 1
    try:
        pid = os.fork()
        if pid == 0:
            conn.close()
            _child(request, fds)
        for fd in fds:
            os.close(fd)
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        _, status = os.waitpid(pid, 0)
        conn.sendall(json.dumps({"code": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
        code = 0
    finally:
        os._exit(code)


def _reap() -> None:
    """Collect the monitors that ended (each reported its command's status itself)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _serve(path: str) -> None:
    import selectors

    from tests.model.launcher import preimport

    preimport()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(sys.stdin, selectors.EVENT_READ)
    while True:
        for key, _ in selector.select():
            _reap()
            if key.fileobj is sys.stdin:
                return  # the test process is gone
            conn, _ = listener.accept()
            message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
            while not message.endswith(b"\n"):
                more = conn.recv(1 << 20)
                if not more:
                    break
                message += more
            request = json.loads(message)
            sys.stdout.flush()
            sys.stderr.flush()
            if os.fork() == 0:
                listener.close()
                _monitor(conn, request, fds)
            conn.close()
            for fd in fds:
                os.close(fd)


if __name__ == "__main__":
    _serve(sys.argv[1])
