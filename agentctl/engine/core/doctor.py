"""``agentctl doctor FILE``: check a workflow's prerequisites without dispatching anything.

Each check names what it looked at, its status and, when it is not ``ok``, the fix:

- ``missing``: a prerequisite that is known to be absent (a command not on PATH or not on
  ``policy.processAllowlist``, a credential that does not resolve, a sandbox or container
  runtime that is not installed, a writable root that cannot be written);
- ``unverified``: one that could not be confirmed from here (an MCP or A2A endpoint that
  does not accept a connection on its declared address).

Nothing is started, called or written: commands are looked up, credentials resolved (their
values never leave this module), endpoints get a TCP connection that is closed at once.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agentctl.errors import AgentctlError

__all__ = ["diagnose"]

_CONNECT_SECONDS = 2.0


def diagnose(workflow_path: str, workspace: str | None = None) -> dict[str, Any]:
    """``{workflow, checks: [{check, target, status, detail, fix?}], ok}``."""
    from agentctl.engine.core.workflow_files import compile_workflow_file
    from agentctl.spec import load_workflow

    plan, _ = compile_workflow_file(workflow_path, workspace)
    loaded = load_workflow(workflow_path)
    assert loaded.document is not None  # it just compiled
    spec = loaded.document.model_dump(mode="json", by_alias=True)["spec"]
    base = Path(workspace) if workspace else Path(workflow_path).resolve().parent
    checks: list[dict[str, Any]] = []
    checks += _commands(spec)
    checks += _credentials(workflow_path)
    checks += _endpoints(spec)
    checks += _runtimes(spec)
    checks += _writable_roots(spec, base)
    return {
        "workflow": plan.workflow_name,
        "checks": checks,
        "ok": all(c["status"] == "ok" for c in checks),
    }


def _check(
    check: str, target: str, status: str, detail: str, fix: str | None = None
) -> dict[str, Any]:
    entry = {"check": check, "target": target, "status": status, "detail": detail}
    if fix is not None:
        entry["fix"] = fix
    return entry


def _commands(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    policy = spec.get("policy") or {}
    allowed = set(policy.get("processAllowlist") or ())
    wanted: dict[str, str] = {}
    for name, action in (spec.get("actions") or {}).items():
        if action.get("command"):
            wanted.setdefault(str(action["command"]), f"action `{name}`")
    for name, provider in (spec.get("providers") or {}).items():
        if provider.get("kind") == "command" and provider.get("command"):
            wanted.setdefault(str(provider["command"]), f"provider `{name}`")
    found: list[dict[str, Any]] = []
    for command, user in sorted(wanted.items()):
        target = f"{command} ({user})"
        if os.path.basename(command) not in allowed and command not in allowed:
            found.append(
                _check(
                    "command",
                    target,
                    "missing",
                    "not on spec.policy.processAllowlist",
                    f"add `{os.path.basename(command)}` to spec.policy.processAllowlist",
                )
            )
        elif shutil.which(command) is None:
            found.append(
                _check(
                    "command",
                    target,
                    "missing",
                    "not found on PATH",
                    f"install `{command}`, or name it by its absolute path",
                )
            )
        else:
            found.append(_check("command", target, "ok", f"found at {shutil.which(command)}"))
    return found


def _credentials(workflow_path: str) -> list[dict[str, Any]]:
    from agentctl.engine.core.preflight import check_credentials

    try:
        described = check_credentials(workflow_path)
    except AgentctlError as error:
        return [_check("credential", "providers", "missing", error.message, error.hint)]
    found = []
    for entry in described:
        credential = entry.get("credential")
        detail = (
            f"resolved from {credential.get('source')}"
            if isinstance(credential, dict)
            else "none needed"
        )
        found.append(_check("credential", f"provider `{entry['provider']}`", "ok", detail))
    return found


def _endpoints(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    targets: list[tuple[str, str]] = []
    for name, server in (spec.get("mcpServers") or {}).items():
        if server.get("url"):
            targets.append((f"MCP server `{name}`", str(server["url"])))
    for name, peer in (spec.get("a2aPeers") or {}).items():
        if peer.get("cardUrl"):
            targets.append((f"A2A peer `{name}`", str(peer["cardUrl"])))
    found = []
    for what, url in targets:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            with socket.create_connection((host, port), timeout=_CONNECT_SECONDS):
                pass
        except OSError as exc:
            found.append(
                _check(
                    "endpoint",
                    f"{what} at {url}",
                    "unverified",
                    f"no connection to {host}:{port}: {exc.strerror or exc}",
                    "start the server, or fix its address in the workflow",
                )
            )
        else:
            found.append(_check("endpoint", f"{what} at {url}", "ok", f"{host}:{port} accepts"))
    return found


def _runtimes(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    levels = {
        str(action.get("isolation"))
        for action in (spec.get("actions") or {}).values()
        if action.get("isolation") in ("sandbox", "container")
    }
    found = []
    if "sandbox" in levels:
        where = shutil.which("bwrap")
        found.append(
            _check("runtime", "sandbox (bubblewrap)", "ok", f"found at {where}")
            if where
            else _check(
                "runtime",
                "sandbox (bubblewrap)",
                "missing",
                "bwrap is not on PATH",
                "install bubblewrap (Debian: apt-get install bubblewrap)",
            )
        )
    if "container" in levels:
        where = shutil.which("docker") or shutil.which("podman")
        found.append(
            _check("runtime", "container (docker or podman)", "ok", f"found at {where}")
            if where
            else _check(
                "runtime",
                "container (docker or podman)",
                "missing",
                "neither docker nor podman is on PATH",
                "install Docker or Podman",
            )
        )
    return found


def _writable_roots(spec: Mapping[str, Any], base: Path) -> list[dict[str, Any]]:
    policy = spec.get("policy") or {}
    root = base / str(policy.get("workspaceRoot") or ".")
    found = []
    for entry in policy.get("writableRoots") or ():
        path = (root / str(entry)).resolve()
        probe = path
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent  # a root that does not exist yet is created by its writes
        if probe.is_dir() and os.access(probe, os.W_OK | os.X_OK):
            detail = "writable" if probe == path else f"will be created under {probe}"
            found.append(_check("writable root", str(path), "ok", detail))
        else:
            found.append(
                _check(
                    "writable root",
                    str(path),
                    "missing",
                    f"{probe} is not a writable directory",
                    f"create {path} and make it writable for this user",
                )
            )
    return found
