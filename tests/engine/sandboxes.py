"""Shared by the sandbox tests: whether bubblewrap can run here, and a workflow builder.

The sandbox tests need a working ``bwrap``. Without one they skip locally, and fail under
``CI=true`` or ``AGENTCTL_REQUIRE_SANDBOX=1``: CI installs bubblewrap and can never pass
without running them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap

import pytest

SYSTEM_PYTHON = "/usr/bin/python3"


def _required() -> bool:
    return (
        os.environ.get("CI", "").lower() == "true"
        or os.environ.get("AGENTCTL_REQUIRE_SANDBOX") == "1"
    )


def require_bwrap() -> None:
    """Skip (fail under CI) unless bubblewrap builds a sandbox and a system Python exists."""
    bwrap = shutil.which("bwrap")
    problem = None
    if bwrap is None:
        problem = "`bwrap` is not on PATH (Debian: apt-get install bubblewrap)"
    elif not os.path.exists(SYSTEM_PYTHON):
        problem = f"{SYSTEM_PYTHON} is missing"
    else:
        done = subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"],
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            problem = f"bwrap cannot build a sandbox here: {done.stderr.decode()[-300:]}"
    if problem is None:
        return
    if _required():
        pytest.fail(f"sandbox tests cannot run: {problem} (required under CI)")
    pytest.skip(f"sandbox tests skipped: {problem}")


def shell_workflow(
    args: list[str],
    *,
    command: str = "sh",
    sandbox: str = "{}",
    timeout: int = 30,
    allow: str = "[sh]",
) -> str:
    """A one-task workflow running ``command args`` in a sandbox, ``out`` writable."""
    quoted = ", ".join(json.dumps(a) for a in args)  # a JSON string is a YAML string
    return textwrap.dedent(f"""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {{name: boxed}}
        spec:
          policy:
            approval: never
            processAllowlist: {allow}
            writableRoots: [out]
          actions:
            boxed:
              kind: builtin.shell.exec
              command: "{command}"
              args: [{quoted}]
              timeoutSeconds: {timeout}
              isolation: sandbox
              sandbox: {sandbox}
          tasks:
            - {{id: step, uses: "action:boxed"}}
    """)
