"""The cgroup that bounds a sandbox's memory and processes, and tells when it was breached.

One cgroup per sandboxed run, created below agentctl's own cgroup (so every limit above
agentctl still applies) and removed when the run has ended:

- cgroup v2 (the unified hierarchy): ``memory.max`` with ``memory.swap.max`` 0 and
  ``pids.max``, in a child of agentctl's cgroup when that cgroup delegates the controller
  (it is listed in its ``cgroup.subtree_control``) and is writable;
- cgroup v1: the ``memory`` and ``pids`` hierarchies, each writable below agentctl's own
  group (``memory.limit_in_bytes`` and ``memory.memsw.limit_in_bytes``, ``pids.max``).

Breaches are read back from the kernel's counters: ``oom_kill`` (memory.events in v2,
memory.oom_control in v1) and ``max`` in ``pids.events``. When no writable cgroup offers a
controller a limit needs, :meth:`Cgroup.require` refuses with ``isolation.unavailable``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from agentctl.errors import BlockedError

__all__ = ["CGROUP_ROOT", "Cgroup", "CgroupCounters"]

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True, slots=True)
class CgroupCounters:
    """What the kernel counted while the run lasted."""

    oom_kills: int
    pids_refused: int


def _own_groups() -> dict[str, str]:
    """Controller (``""`` for v2) -> agentctl's cgroup path, from /proc/self/cgroup."""
    found: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(",") if parts[1] else [""]:
            found[controller] = parts[2]
    return found


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def _v2_parent(controllers: tuple[str, ...]) -> Path | None:
    own = _own_groups().get("")
    if own is None or not (CGROUP_ROOT / "cgroup.controllers").exists():
        return None
    parent = CGROUP_ROOT / own.lstrip("/")
    try:
        delegated = (parent / "cgroup.subtree_control").read_text().split()
    except OSError:
        return None
    if all(c in delegated for c in controllers) and _writable_dir(parent):
        return parent
    return None


def _v1_parent(controller: str) -> Path | None:
    own = _own_groups().get(controller)
    if own is None:
        return None
    parent = CGROUP_ROOT / controller / own.lstrip("/")
    return parent if _writable_dir(parent) else None


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _field(path: Path, name: str) -> int:
    """The value of ``name`` in a ``key value`` per line file (0 when absent)."""
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


class Cgroup:
    """One run's cgroup(s): a v2 group, or a v1 group per controller."""

    def __init__(self, groups: dict[str, Path], unified: bool) -> None:
        self._groups = groups
        self._unified = unified

    @staticmethod
    def _controllers(memory: bool, processes: bool) -> tuple[str, ...]:
        return tuple(c for c, wanted in (("memory", memory), ("pids", processes)) if wanted)

    @classmethod
    def require(cls, memory: bool, processes: bool) -> None:
        """Refuse (``isolation.unavailable``) when no writable cgroup offers the controllers
        the limits need."""
        wanted = cls._controllers(memory, processes)
        if _v2_parent(wanted) is not None:
            return
        missing = [c for c in wanted if _v1_parent(c) is None]
        if missing:
            limits = {"memory": "memoryBytes", "pids": "processes"}
            raise BlockedError(
                "the sandbox's "
                + " and ".join(limits[c] for c in missing)
                + " limit needs a cgroup agentctl can create, and no writable cgroup offers "
                + ", ".join(f"`{c}`" for c in missing)
                + f" under {CGROUP_ROOT}",
                code="isolation.unavailable",
                hint="run agentctl with a delegated cgroup (e.g. `systemd-run --user --scope "
                "-p Delegate=yes agentctl …`), or drop the limit; see docs/isolation.md",
            )

    @classmethod
    def create(cls, name: str, memory_bytes: int | None, processes: int | None) -> Cgroup:
        """Make the run's cgroup with its limits; ``BlockedError`` when that cannot be done."""
        wanted = cls._controllers(memory_bytes is not None, processes is not None)
        cls.require(memory_bytes is not None, processes is not None)
        leaf = f"agentctl-{name}-{secrets.token_hex(4)}"
        parent = _v2_parent(wanted)
        made = cls({}, unified=parent is not None)
        try:
            if parent is not None:
                group = made._groups[""] = parent / leaf
                group.mkdir()
                if memory_bytes is not None:
                    _write(group / "memory.max", str(memory_bytes))
                    with contextlib.suppress(OSError):
                        _write(group / "memory.swap.max", "0")
                if processes is not None:
                    _write(group / "pids.max", str(processes))
                return made
            for controller in wanted:
                v1_parent = _v1_parent(controller)
                assert v1_parent is not None  # require() said so
                made._groups[controller] = v1_parent / leaf
                made._groups[controller].mkdir()
            if memory_bytes is not None:
                memory = made._groups["memory"]
                _write(memory / "memory.limit_in_bytes", str(memory_bytes))
                with contextlib.suppress(OSError):
                    _write(memory / "memory.memsw.limit_in_bytes", str(memory_bytes))
            if processes is not None:
                _write(made._groups["pids"] / "pids.max", str(processes))
            return made
        except OSError as exc:
            made.remove()
            raise BlockedError(
                f"could not create the sandbox's cgroup `{leaf}`: {exc.strerror or exc}",
                code="isolation.unavailable",
                hint="check that agentctl may create cgroups there; see docs/isolation.md",
            ) from exc

    def procs_files(self) -> list[str]:
        return [str(group / "cgroup.procs") for group in self._groups.values()]

    def counters(self) -> CgroupCounters:
        if self._unified:
            group = self._groups[""]
            return CgroupCounters(
                oom_kills=_field(group / "memory.events", "oom_kill"),
                pids_refused=_field(group / "pids.events", "max"),
            )
        memory = self._groups.get("memory")
        pids = self._groups.get("pids")
        return CgroupCounters(
            oom_kills=0 if memory is None else _field(memory / "memory.oom_control", "oom_kill"),
            pids_refused=0 if pids is None else _field(pids / "pids.events", "max"),
        )

    def remove(self) -> None:
        """Remove the (by now empty) groups; best effort, a leftover empty group is harmless."""
        for group in self._groups.values():
            with contextlib.suppress(OSError):
                group.rmdir()
