"""What a monitor observes: a set of files, an HTTP endpoint, a command.

Each observer returns a small JSON value; the monitor compares its digest with the last
confirmed one. Values are kept small on purpose (they become run inputs): file contents
and command output are represented by digests, never copied.

- files: the paths matching the globs under the project directory and a digest of their
  contents (``digest``), so adding, removing or editing a file changes the value;
- http: the response status (``status``, and ``ok`` against ``--expect-status``), or the
  transport error (``error``) when nothing answered;
- command: its exit code and a digest of its standard output. A command runs under the
  monitored workflow's ``builtin.shell.exec`` rules (allow-list, and a container when the
  workflow's shell actions use one), which the engine owns: the daemon observes it through
  its launcher (``agentctl.engine.monitor_commands``), not here.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from agentctl.digest import canonical_json
from agentctl.errors import UsageError

__all__ = ["MAX_LISTED", "digest_of", "observe"]

#: At most this many paths are listed in a files observation (all count in the digest).
MAX_LISTED = 200
_HTTP_TIMEOUT = 10.0


def digest_of(value: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(value).encode()).hexdigest()


def _file_digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 16), b""):
            sha.update(chunk)
    return sha.hexdigest()


def _files(patterns: list[str], project: Path) -> dict[str, Any]:
    found: dict[str, str] = {}
    for pattern in patterns:
        for path in project.glob(pattern):
            if path.is_file():
                relative = path.relative_to(project).as_posix()
                try:
                    found[relative] = _file_digest(path)
                except OSError as exc:  # removed or unreadable while we looked
                    found[relative] = f"unreadable: {exc.strerror}"
    names = sorted(found)
    return {
        "count": len(names),
        "files": names[:MAX_LISTED],
        "digest": digest_of([[name, found[name]] for name in names]),
    }


def _http(url: str, expect_status: int | None) -> dict[str, Any]:
    import httpx

    try:
        response = httpx.get(url, timeout=_HTTP_TIMEOUT, follow_redirects=False)
    except httpx.HTTPError as exc:
        return {"error": type(exc).__name__, "ok": False if expect_status else None}
    value: dict[str, Any] = {"status": response.status_code}
    if expect_status is not None:
        value["ok"] = response.status_code == expect_status
    return value


def observe(monitor: dict[str, Any], project: Path) -> dict[str, Any]:
    """Observe files or an HTTP endpoint once; the value (its digest decides whether it
    changed). A command is observed through the daemon's launcher (see the module
    docstring)."""
    kind = monitor.get("kind")
    target = monitor.get("target") or {}
    if kind == "files":
        return _files(list(target["patterns"]), project)
    if kind == "http":
        return _http(str(target["url"]), target.get("expectStatus"))
    raise UsageError(f"monitor kind {kind!r} is not one of files, http")
