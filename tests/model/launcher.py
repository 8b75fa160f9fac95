"""Starting real `agentctl` processes for the model test, cheaply.

Two ways, chosen by ``AGENTCTL_MODEL_LAUNCH``:

- ``fork`` (the default): the harness process imports the CLI once, then every command is
  a ``fork()`` of it that runs the CLI's ``main(argv)`` and exits with its code. Each
  command is still its own OS process — its own pid (ownership checks see it), its own
  SQLite connections, its own environment (``AGENTCTL_FAULT``), SIGKILL-able — but skips
  the interpreter start and the imports, which is most of a command's cost (see the README
  of this folder for the figures).
- ``exec``: ``python -m agentctl …`` for every command (the console script's code path),
  about seven times slower; use it for a soak that must not rely on fork.

A clock skew (seconds) makes the process see the wall clock that far ahead: that is how the
test stands for "the lease ran out while the owner was still working" without waiting for
the lease.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Launcher", "Proc", "Result"]

SKEWED = Path(__file__).with_name("skewed.py")


@dataclass
class Result:
    argv: list[str]
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        text = self.stdout if self.stdout.strip() else self.stderr
        try:
            return json.loads(text)
        except ValueError:
            return None

    def data(self) -> Any:
        doc = self.json()
        return doc.get("data") if isinstance(doc, dict) else None


class Proc:
    def __init__(
        self, argv: list[str], pid: int, out: Path, err: Path, popen: subprocess.Popen[bytes] | None
    ) -> None:
        self.argv = argv
        self.pid = pid
        self._out, self._err = out, err
        self._popen = popen
        self.result: Result | None = None

    def wait(self, timeout: float | None = None) -> Result:
        """The process's result once it exits; ``TimeoutError`` when ``timeout`` seconds
        pass first (the process is left running)."""
        if self.result is None:
            if self._popen is not None:
                try:
                    code = self._popen.wait(timeout)
                except subprocess.TimeoutExpired:
                    raise TimeoutError(f"{self.argv} still running after {timeout}s") from None
            else:
                code = self._wait_forked(timeout)
            self.result = Result(
                self.argv,
                code,
                self._out.read_text(errors="replace"),
                self._err.read_text(errors="replace"),
            )
        return self.result

    def _wait_forked(self, timeout: float | None) -> int:
        if timeout is None:
            _, status = os.waitpid(self.pid, 0)
            return os.waitstatus_to_exitcode(status)
        deadline = time.monotonic() + timeout
        while True:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                return os.waitstatus_to_exitcode(status)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.argv} still running after {timeout}s")
            time.sleep(0.01)

    def kill(self) -> Result:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return self.wait()

    def exited(self) -> bool:
        """Non-blocking: whether the process has ended (reaps it if so)."""
        if self.result is not None:
            return True
        if self._popen is not None:
            return self._popen.poll() is not None
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0:
            return False
        # Reaped here: remember the outcome now, waitpid cannot be asked twice.
        self.result = Result(
            self.argv,
            os.waitstatus_to_exitcode(status),
            self._out.read_text(errors="replace"),
            self._err.read_text(errors="replace"),
        )
        return True


def preimport() -> None:
    """Import everything a command needs, once, before any fork."""
    import typer.main

    import agentctl.artifacts.gc  # noqa: F401
    import agentctl.engine.operations  # noqa: F401
    import agentctl.engine.recovery.compensation  # noqa: F401
    import agentctl.engine.recovery.planner  # noqa: F401
    import agentctl.engine.run.executor  # noqa: F401
    import agentctl.store.engine  # noqa: F401
    import agentctl.store.migrate  # noqa: F401
    from agentctl.cli import main  # noqa: F401
    from agentctl.cli.app import app

    # Building typer's click command tree is ~70 ms of every command (80% of an `inspect`):
    # build it once here, so every forked command starts with it built.
    if not getattr(typer.main.get_command, "_model_cached", False):
        built = typer.main.get_command(app)
        original = typer.main.get_command

        def cached(typer_instance: typer.Typer) -> Any:
            return built if typer_instance is app else original(typer_instance)

        cached._model_cached = True  # type: ignore[attr-defined]
        typer.main.get_command = cached
        _warm_up()


#: What the warm-up runs: a write, then a process step that parks for approval (high_risk),
#: and a python.function step with a ctx write, so the commands after it have a paused run,
#: an approval, effects, an artifact and an audit chain to work on.
_WARM_WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: warm-up}
spec:
  policy: {approval: high_risk, processAllowlist: [sh], writableRoots: [out]}
  actions:
    save: {kind: builtin.write}
    mark: {kind: builtin.shell.exec, command: sh, args: ["-c", "echo marked"]}
    step: {kind: python.function, function: "warm_steps:step"}
  tasks:
    - {id: save, uses: action:save, with: {path: out/warm.txt, content: warm}}
    - {id: mark, uses: action:mark, needs: [save]}
    - {id: step, uses: action:step, needs: [mark]}
"""
_WARM_STEPS = """\
def step(ctx, inputs):
    ctx.write("out/said.txt", "said")
    return {"said": True}
"""


def _warm_up() -> None:
    """Run the common commands once in this process, on a scratch SQLite database, before
    any fork.

    Importing is not all a command's first run pays: pydantic builds the spec models'
    validators on first use, SQLAlchemy compiles statements and sets up its dialect and
    events, alembic reads its migration scripts, typing and inspect fill caches. A forked
    command inherits whatever the harness did once, so doing it here (with its heap then
    frozen, so the children's garbage collections leave those pages shared) cuts a forked
    ``roll`` from about 0.30 to 0.11 s of CPU and an ``inspect`` from 0.17 to 0.04 s.

    Only caches are left behind: the database, home and output go to a temporary
    directory and /dev/null, the environment and working directory are restored, and the
    per-process switches a command sets are put back as a fresh interpreter has them. The
    outcome of each command is ignored (a broken command fails the tests that run it, not
    the start of every forked command)."""
    import gc
    import shutil
    import tempfile

    from agentctl import hints
    from agentctl.cli import main as cli_main
    from agentctl.cli import output
    from agentctl.engine.run import collector

    root = Path(tempfile.mkdtemp(prefix="agentctl-warm-up-"))
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_streams = sys.stdout, sys.stderr
    sys.stdout.flush()
    sys.stderr.flush()
    saved_fds = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - closed below
        for name in [n for n in os.environ if n.startswith(("AGENTCTL_", "OTEL_"))]:
            del os.environ[name]
        os.environ["HOME"] = os.environ["AGENTCTL_HOME"] = str(root)
        (root / "warm.yaml").write_text(_WARM_WORKFLOW)
        (root / "warm_steps.py").write_text(_WARM_STEPS)
        os.chdir(root)
        db = str(root / "state" / "runtime.db")

        def command(*argv: str, store: bool = True) -> Any:
            try:
                cli_main.main(["--output", "json", *argv, *(["--db", db] if store else [])])
            except BaseException:  # noqa: BLE001 - a warm-up only loads code
                pass

        def first(kind: str, key: str) -> str:
            import sqlite3

            conn = sqlite3.connect(db)
            try:
                row = conn.execute(f"SELECT {key} FROM {kind} ORDER BY rowid").fetchone()
            except sqlite3.Error:
                row = None
            finally:
                conn.close()
            return str(row[0]) if row else "none"

        command("check", "warm.yaml", store=False)
        command("roll", "warm.yaml")
        run_id, approval = first("runs", "id"), first("approvals", "id")
        for argv in (
            ["runs", "list"],
            ["approvals", "list", run_id],
            ["inspect", run_id],
            ["approvals", "approve", approval, "--reason", "warm-up"],
            ["resume", run_id],
            ["inspect", run_id],
            ["audit", run_id, "--verify"],
            ["artifacts", "verify", "--all"],
            ["replay", run_id],
            ["gc", "--older-than-days", "0"],
            ["artifacts", "gc", "--older-than-days", "0"],
        ):
            command(*argv)
    finally:
        sys.stdout.close()
        sys.stdout, sys.stderr = saved_streams
        os.dup2(saved_fds[0], 1)
        os.dup2(saved_fds[1], 2)
        for fd in (*saved_fds, null):
            os.close(fd)
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        output.set_current(output.Output())
        hints.use_database(None)
        shutil.rmtree(root, ignore_errors=True)
    # The first run froze the heap (collector.settle_long_lived, once per process); a
    # forked command is a fresh process to the code, so it freezes its own again.
    gc.freeze()
    collector._settled = False


class Launcher:
    def __init__(self, logs: Path, mode: str | None = None, env: dict[str, str] | None = None):
        self.mode = mode or os.environ.get("AGENTCTL_MODEL_LAUNCH", "fork")
        if self.mode not in ("fork", "exec"):
            raise ValueError(f"AGENTCTL_MODEL_LAUNCH must be fork or exec, got {self.mode!r}")
        self.logs = logs
        self.env = dict(env or {})
        self._n = 0
        if self.mode == "fork":
            preimport()

    def start(
        self, argv: list[str], cwd: Path, env: dict[str, str] | None = None, skew: float = 0
    ) -> Proc:
        self._n += 1
        out = self.logs / f"{self._n:04d}.out"
        err = self.logs / f"{self._n:04d}.err"
        full_env = {k: v for k, v in os.environ.items() if k != "AGENTCTL_FAULT"}
        full_env.update(self.env)
        full_env.update(env or {})
        argv = ["--output", "json", *argv]
        if self.mode == "exec":
            prefix = [sys.executable, str(SKEWED), str(skew)] if skew else [sys.executable]
            with out.open("wb") as o, err.open("wb") as e:
                popen = subprocess.Popen(
                    [*prefix, "-m", "agentctl", *argv] if not skew else [*prefix, *argv],
                    cwd=cwd,
                    env=full_env,
                    stdout=o,
                    stderr=e,
                    stdin=subprocess.DEVNULL,
                )
            return Proc(argv, popen.pid, out, err, popen)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: become the command, never return into the harness
            code = 1
            try:
                fd_out = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                fd_err = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                fd_in = os.open(os.devnull, os.O_RDONLY)
                os.dup2(fd_in, 0)
                os.dup2(fd_out, 1)
                os.dup2(fd_err, 2)
                os.chdir(cwd)
                os.environ.clear()
                os.environ.update(full_env)
                if skew:
                    from tests.model.skewed import skew_clock

                    skew_clock(skew)
                from agentctl.cli import main as cli_main

                code = cli_main.main(argv)
            except BaseException as exc:  # noqa: BLE001 - report, then leave the child
                try:
                    os.write(2, f"model launcher: {type(exc).__name__}: {exc}\n".encode())
                except OSError:
                    pass
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        return Proc(argv, pid, out, err, None)

    def run(
        self, argv: list[str], cwd: Path, env: dict[str, str] | None = None, skew: float = 0
    ) -> Result:
        return self.start(argv, cwd, env, skew).wait()
