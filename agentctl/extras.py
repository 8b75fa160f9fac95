"""Optional extras: which feature needs which installable extra, and the error when missing.

A plain ``pip install agentctl`` runs workflows over SQLite with every built-in action,
the model providers and the dashboard. Features with heavy dependencies of their own are
extras (docs/installing.md):

- ``vector``: long-term memory (every entry is embedded; search by text, vector or both)
  needs numpy;
- ``mcp``: MCP servers (``mcp.call`` actions and ``mcp:SERVER/TOOL`` agent tools) need the
  MCP SDK;
- ``otel`` and ``postgres`` keep their own checks (:mod:`agentctl.observability.telemetry`,
  :mod:`agentctl.store.postgres`); ``all`` installs every extra.

The compiler asks :func:`installed` so ``agentctl check`` and ``roll`` refuse a workflow
whose extra is missing before a run exists; the code that imports the package calls
:func:`require` so a path the compiler did not see (the ``memory`` commands, a resume on
another host) fails with the same named error instead of an ``ImportError``.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from agentctl.errors import UsageError

__all__ = ["EXTRAS", "Extra", "installed", "missing_extra_error", "require"]


@dataclass(frozen=True)
class Extra:
    name: str
    modules: tuple[str, ...]  # top-level modules that must be importable
    packages: str  # what pip installs, for the message
    feature: str  # what needs it, for the message

    @property
    def pip_command(self) -> str:
        return f"pip install 'agentctl[{self.name}]'"


EXTRAS: dict[str, Extra] = {
    "vector": Extra("vector", ("numpy",), "numpy", "long-term memory"),
    "mcp": Extra("mcp", ("mcp",), "the MCP SDK", "MCP servers"),
}


def installed(name: str) -> bool:
    """Whether extra ``name``'s packages can be imported (nothing is imported here)."""
    return all(importlib.util.find_spec(module) is not None for module in EXTRAS[name].modules)


def missing_extra_error(name: str, what: str | None = None) -> UsageError:
    extra = EXTRAS[name]
    return UsageError(
        f"{what or extra.feature} needs the optional extra `{name}` ({extra.packages}), "
        "which is not installed",
        code="extra.missing",
        hint=f"install it with `{extra.pip_command}` (or `agentctl[all]` for every extra)",
    )


def require(name: str, what: str | None = None) -> None:
    """Raise the named error (exit 2) unless extra ``name`` is installed."""
    if not installed(name):
        raise missing_extra_error(name, what)
