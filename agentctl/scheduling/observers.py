"""What a monitor observes: a set of files, an HTTP endpoint, a command.

Each observer returns a small JSON value; the monitor compares its digest with the last
confirmed one. Values are kept small on purpose (they become run inputs): file contents
and command output are represented by digests, never copied.

- files: the paths matching the globs under the project directory and a digest of their
  contents (``digest``), so adding, removing or editing a file changes the value;
- http: the response status (``status``, and ``ok`` against ``--expect-status``), or the
  transport error (``error``) when nothing answered;
- command: its exit code and a digest of its standard output, run with the bounded
  process rules of ``builtin.shell.exec`` (no shell, cleared environment, own process
  group, timeout, capped output) and allowed only when the command's name is in the
  monitored workflow's ``spec.policy.processAllowlist``.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

from agentctl.digest import canonical_json
from agentctl.errors import UsageError

__all__ = ["MAX_LISTED", "digest_of", "observe"]

#: At most this many paths are listed in a files observation (all count in the digest).
MAX_LISTED = 200
_HTTP_TIMEOUT = 10.0
_COMMAND_TIMEOUT = 60.0


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


def _command(argv: list[str], project: Path, allowlist: list[str]) -> dict[str, Any]:
    from agentctl.process import ProcessSpec, resolve_executable, run_process

    executable = resolve_executable(argv[0], allowlist)
    spec = ProcessSpec(
        argv=(executable, *argv[1:]),
        cwd=project,
        env={},
        timeout_seconds=_COMMAND_TIMEOUT,
    )
    result = asyncio.run(run_process(spec))
    return {
        "exitCode": result.exit_code,
        "timedOut": result.timed_out,
        "outputDigest": "sha256:" + hashlib.sha256(result.stdout).hexdigest(),
    }


def observe(monitor: dict[str, Any], project: Path, allowlist: list[str]) -> dict[str, Any]:
    """Observe once; the value (its digest decides whether it changed)."""
    kind = monitor.get("kind")
    target = monitor.get("target") or {}
    if kind == "files":
        return _files(list(target["patterns"]), project)
    if kind == "http":
        return _http(str(target["url"]), target.get("expectStatus"))
    if kind == "command":
        return _command(list(target["argv"]), project, allowlist)
    raise UsageError(f"monitor kind {kind!r} is not one of files, http, command")
