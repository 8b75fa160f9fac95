"""``isolation: sandbox``: a process under bubblewrap, with limits, or no run at all.

bubblewrap (``bwrap``, the tool Flatpak uses) builds the sandbox; agentctl never writes
namespace code of its own. :func:`sandbox_argv` wraps a resolved command line so that
:mod:`agentctl.process` still runs it (one launch path, its process group, output caps and
timeout) and the sandboxed command sees:

- a read-only system: ``/usr`` and the top-level links or directories into it (``/bin``,
  ``/lib`` …), ``/etc`` with its secrets hidden (``/etc/shadow``, ``/etc/ssh`` …), the
  command's own executable, and the action's ``readPaths``;
- the workspace root read-only, its writable roots writable, the database of the run
  hidden when it lies under one of them; nothing else of the host (no ``/root``, no home);
- a private ``/tmp``, ``/dev`` and ``/proc``; fresh user, PID, IPC, UTS, cgroup and
  network namespaces (the host network only with ``network: true``); ``--new-session``,
  ``--die-with-parent``, no capabilities, ``no_new_privs`` (bubblewrap always sets it).

Limits (docs/isolation.md): ``cpuSeconds`` and ``fileSizeBytes`` are rlimits set by
``prlimit``; ``memoryBytes`` and ``processes`` need a cgroup agentctl can create
(:mod:`agentctl.sandbox_cgroups`), because the matching rlimits either do not bind root
(``RLIMIT_NPROC``) or cannot be told from an ordinary failure (``RLIMIT_AS``). A limit that
cannot be enforced refuses the step with ``isolation.unavailable``; nothing falls back.
:func:`breach` names what ended a failed run: ``sandbox.memory_limit``,
``sandbox.process_limit``, ``sandbox.cpu_limit`` or ``sandbox.file_size_limit``.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agentctl.errors import BlockedError
from agentctl.process import probe
from agentctl.sandbox_cgroups import Cgroup, CgroupCounters

__all__ = [
    "BUBBLEWRAP_OVERHEAD_PROCESSES",
    "INSTALL_HINT",
    "SandboxLimits",
    "SandboxSettings",
    "SandboxTools",
    "SandboxView",
    "breach",
    "find_tools",
    "hidden_database_paths",
    "sandbox_argv",
]

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`, Fedora: `dnf install "
    "bubblewrap`) and allow user namespaces (`sysctl kernel.unprivileged_userns_clone=1`, "
    "or on Ubuntu 24.04+ `kernel.apparmor_restrict_unprivileged_userns=0`); see "
    "docs/isolation.md. The step never runs with weaker isolation than it declares"
)

#: bubblewrap's own processes in the sandbox's cgroup: its monitor and the namespace's init.
BUBBLEWRAP_OVERHEAD_PROCESSES = 2

PROBE_TIMEOUT_SECONDS = 10.0

# Top-level system entries: bound read-only when they are directories, recreated as the
# same symlink when they are links into /usr (merged-/usr systems).
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_SECRET_FILES = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-")
_ETC_SECRET_DIRS = ("/etc/ssh", "/etc/ssl/private", "/etc/sudoers.d")

# bwrap reports a command killed by a signal as exit 128 + the signal's number.
_SIGNALLED = 128

# bubblewraps that started a probe sandbox in this process: one probe per path and PATH.
_WORKING: dict[tuple[str, str], SandboxTools] = {}


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """The action's ``sandbox.limits``; ``None`` leaves that resource unbounded."""

    cpu_seconds: int | None = None
    memory_bytes: int | None = None
    processes: int | None = None
    file_size_bytes: int | None = None

    @classmethod
    def from_json(cls, value: Mapping[str, object] | None) -> SandboxLimits:
        data = value or {}

        def number(key: str) -> int | None:
            raw = data.get(key)
            return None if raw is None else int(str(raw))

        return cls(
            cpu_seconds=number("cpuSeconds"),
            memory_bytes=number("memoryBytes"),
            processes=number("processes"),
            file_size_bytes=number("fileSizeBytes"),
        )

    def to_json(self) -> dict[str, int | None]:
        return {
            "cpuSeconds": self.cpu_seconds,
            "memoryBytes": self.memory_bytes,
            "processes": self.processes,
            "fileSizeBytes": self.file_size_bytes,
        }

    @property
    def needs_cgroup(self) -> bool:
        return self.memory_bytes is not None or self.processes is not None

    @property
    def needs_prlimit(self) -> bool:
        return self.cpu_seconds is not None or self.file_size_bytes is not None


@dataclass(frozen=True, slots=True)
class SandboxSettings:
    """The action's ``sandbox`` block, normalised (the spec model gives the defaults)."""

    network: bool = False
    read_paths: tuple[str, ...] = ()
    limits: SandboxLimits = SandboxLimits()

    @classmethod
    def from_json(cls, value: Mapping[str, object] | None) -> SandboxSettings:
        data = value or {}
        paths = data.get("readPaths") or []
        limits = data.get("limits")
        return cls(
            network=bool(data.get("network")),
            read_paths=tuple(str(p) for p in paths) if isinstance(paths, list) else (),
            limits=SandboxLimits.from_json(limits if isinstance(limits, Mapping) else None),
        )

    def to_json(self) -> dict[str, object]:
        return {
            "network": self.network,
            "readPaths": list(self.read_paths),
            "limits": self.limits.to_json(),
        }

    def describe(self) -> str:
        """One line for ``plan`` and approval prompts: network first, then the limits."""
        parts = ["host network" if self.network else "no network"]
        limits = self.limits
        if limits.cpu_seconds is not None:
            parts.append(f"cpu {limits.cpu_seconds}s")
        if limits.memory_bytes is not None:
            parts.append(f"memory {_size(limits.memory_bytes)}")
        if limits.processes is not None:
            parts.append(f"processes {limits.processes}")
        if limits.file_size_bytes is not None:
            parts.append(f"file size {_size(limits.file_size_bytes)}")
        return "sandbox: " + ", ".join(parts)


@dataclass(frozen=True, slots=True)
class SandboxTools:
    """The executables a sandbox run needs on this host."""

    bwrap: str
    prlimit: str | None
    shell: str


@dataclass(frozen=True, slots=True)
class SandboxView:
    """What of the host a sandbox shows besides the system: the workspace (read-only), its
    writable roots, and the run's database to hide when it lies under them."""

    read_root: Path
    writable_roots: tuple[Path, ...] = ()
    database: str = ""

    def hidden(self) -> list[tuple[str, Path]]:
        return hidden_database_paths(self.database, [self.read_root, *self.writable_roots])


def _size(value: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= scale and value % scale == 0:
            return f"{value // scale} {unit}"
    return f"{value} bytes"


def _unavailable(message: str) -> BlockedError:
    return BlockedError(message, code="isolation.unavailable", hint=INSTALL_HINT)


def _probe(bwrap: str) -> str | None:
    """None when bubblewrap can build a sandbox like ours here; else what went wrong."""
    argv = [bwrap, *_system_mounts(), "--unshare-all", "--die-with-parent", "--", "/bin/true"]
    return probe(argv, {}, f"`{bwrap}` (a trial sandbox)", PROBE_TIMEOUT_SECONDS)


def find_tools(limits: SandboxLimits, environ: Mapping[str, str]) -> SandboxTools:
    """bubblewrap that works here (and ``prlimit`` when rlimits are asked for), or
    ``BlockedError`` (``isolation.unavailable``) naming what was looked at."""
    search = environ.get("PATH", os.defpath)
    bwrap = shutil.which("bwrap", path=search)
    if bwrap is None:
        raise _unavailable(f"sandbox isolation needs bubblewrap: `bwrap` is not on PATH `{search}`")
    prlimit = shutil.which("prlimit", path=search)
    shell = shutil.which("sh", path=search) or "/bin/sh"
    if limits.needs_prlimit and prlimit is None:
        raise _unavailable(
            f"the sandbox's cpuSeconds / fileSizeBytes limits need `prlimit` (util-linux), "
            f"which is not on PATH `{search}`"
        )
    key = (bwrap, search)
    known = _WORKING.get(key)
    if known is None:
        problem = _probe(bwrap)
        if problem is not None:
            raise _unavailable(f"sandbox isolation is unavailable: {problem}")
        known = _WORKING[key] = SandboxTools(bwrap, prlimit, shell)
    if limits.needs_cgroup:
        Cgroup.require(limits.memory_bytes is not None, limits.processes is not None)
    return known


def _system_mounts() -> list[str]:
    argv: list[str] = []
    for entry in _SYSTEM:
        if os.path.islink(entry):
            argv += ["--symlink", os.readlink(entry), entry]
        elif os.path.isdir(entry):
            argv += ["--ro-bind", entry, entry]
    return argv


def _covered(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def hidden_database_paths(database: str, roots: Sequence[Path]) -> list[tuple[str, Path]]:
    """What to cover so the run's database is not visible under ``roots``: ``("dir", d)``
    for a private directory inside a root (a tmpfs over it), ``("file", f)`` for each
    database file when its directory is itself a root or holds one (``/dev/null`` over it).
    A PostgreSQL URL or an in-memory store has nothing to hide."""
    if "://" in database or database in ("", ":memory:") or database.startswith("file:"):
        return []
    path = Path(database).resolve()
    directory = path.parent
    if not _covered(directory, roots):
        return []
    if not any(root == directory or root.is_relative_to(directory) for root in roots):
        return [("dir", directory)]
    names = [path.name, *(f"{path.name}{suffix}" for suffix in ("-wal", "-shm", "-journal"))]
    return [("file", directory / name) for name in names if (directory / name).exists()]


def sandbox_argv(
    tools: SandboxTools,
    settings: SandboxSettings,
    argv: Sequence[str],
    *,
    cwd: Path,
    read_root: Path,
    writable_roots: Sequence[Path],
    hidden: Sequence[tuple[str, Path]] = (),
    cgroup: Cgroup | None = None,
) -> tuple[str, ...]:
    """The full command line of one sandboxed run of ``argv`` (an absolute executable and
    its arguments); see the module docstring for what it mounts."""
    executable = os.path.realpath(argv[0])
    wrapped: list[str] = [tools.bwrap, *_system_mounts()]
    wrapped += ["--ro-bind", "/etc", "/etc"]
    for secret in _ETC_SECRET_FILES:
        if os.path.exists(secret):
            wrapped += ["--ro-bind", "/dev/null", secret]
    for secret in _ETC_SECRET_DIRS:
        if os.path.isdir(secret):
            wrapped += ["--tmpfs", secret]
    wrapped += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    bound: list[Path] = [Path(p) for p in _SYSTEM] + [Path("/etc")]
    for extra in settings.read_paths:
        wrapped += ["--ro-bind-try", extra, extra]
        bound.append(Path(extra))
    wrapped += ["--ro-bind", str(read_root), str(read_root)]
    bound.append(read_root)
    for root in writable_roots:
        wrapped += ["--bind", str(root), str(root)]
        bound.append(root)
    for kind, path in hidden:
        if kind == "dir":
            wrapped += ["--tmpfs", str(path)]
        else:
            wrapped += ["--ro-bind", "/dev/null", str(path)]
    if not _covered(Path(executable), bound):
        wrapped += ["--ro-bind", executable, executable]
    wrapped += ["--chdir", str(cwd), "--unshare-all"]
    if settings.network:
        wrapped.append("--share-net")
    wrapped += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--"]
    wrapped += [executable, *argv[1:]]
    limits = settings.limits
    if limits.needs_prlimit:
        assert tools.prlimit is not None
        rlimits: list[str] = []
        if limits.cpu_seconds is not None:
            # The soft limit sends SIGXCPU (the breach agentctl names); the hard one a second
            # later kills a program that ignores it.
            rlimits.append(f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}")
        if limits.file_size_bytes is not None:
            rlimits.append(f"--fsize={limits.file_size_bytes}")
        wrapped = [tools.prlimit, *rlimits, "--", *wrapped]
    if cgroup is not None:
        # The wrapper joins the cgroup before it execs, so every process the command
        # starts is counted from its first fork.
        joins = " && ".join(f'echo $$ > "{procs}"' for procs in cgroup.procs_files())
        wrapped = [tools.shell, "-c", f'{joins} && exec "$@"', "agentctl-sandbox", *wrapped]
    return tuple(wrapped)


def breach(
    settings: SandboxSettings,
    counters: CgroupCounters | None,
    exit_code: int | None,
    signal_number: int | None,
) -> tuple[str, str] | None:
    """``(code, message)`` naming the limit that ended a failed run, or None.

    Call it only for a run that failed: a program that met a limit and recovered has not
    breached anything worth a task error.
    """
    limits = settings.limits
    killed = signal_number
    if exit_code is not None and exit_code > _SIGNALLED:
        killed = exit_code - _SIGNALLED
    if counters is not None and counters.oom_kills and limits.memory_bytes is not None:
        return (
            "sandbox.memory_limit",
            f"used more than its memory limit of {_size(limits.memory_bytes)} and was killed",
        )
    if counters is not None and counters.pids_refused and limits.processes is not None:
        return (
            "sandbox.process_limit",
            f"tried to run more than {limits.processes} processes and was refused",
        )
    if killed == signal.SIGXCPU and limits.cpu_seconds is not None:
        return (
            "sandbox.cpu_limit",
            f"used more than its {limits.cpu_seconds} CPU seconds and was killed",
        )
    if killed == signal.SIGXFSZ and limits.file_size_bytes is not None:
        return (
            "sandbox.file_size_limit",
            f"wrote a file larger than its limit of {_size(limits.file_size_bytes)} and was "
            "stopped",
        )
    return None
