"""The one secret resolver: every shape, and what keeps each from resolving."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from agentctl.errors import PolicyDeniedError
from agentctl.policy.secrets import SecretUnresolved, resolve_secret, secret_sources


def _script(directory: Path, body: str) -> Path:
    script = directory / "secret-helper"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def _process(script: Path, **options: object) -> dict[str, object]:
    return {"process": {"command": str(script), **options}}


def test_env_file_and_process_resolve_with_one_newline_stripped(tmp_path: Path) -> None:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "k").write_text("from-file\r\n")
    script = _script(tmp_path, "printf 'from-process\\n'; test -z \"$HOME\"")
    policy = {"secretFileRoots": ["keys"], "secretProcessAllowlist": ["secret-helper"]}
    with secret_sources(tmp_path, policy):
        env = resolve_secret({"env": "K"}, environ={"K": "from-env\n"}, what="x")
        file = resolve_secret({"file": "k"}, environ={}, what="x")
        process = resolve_secret(_process(script), environ={}, what="x")
    assert (env.value, file.value, process.value) == ("from-env", "from-file", "from-process")
    assert (env.source, file.source) == ("env:K", "file:k")
    assert "from-process" not in repr(process)


@pytest.mark.parametrize(
    ("body", "options", "message"),
    [
        ("exit 7", {}, "exited with code 7"),
        ("printf ''", {}, "printed nothing"),
        ("head -c 100 /dev/zero | tr '\\0' a", {"outputLimitBytes": 10}, "more than 10 bytes"),
        ("exec sleep 30", {"timeoutSeconds": 1}, "timed out after 1s"),
    ],
)
def test_process_failures_are_unresolved(
    tmp_path: Path, body: str, options: dict[str, object], message: str
) -> None:
    script = _script(tmp_path, body)
    with secret_sources(tmp_path, {"secretProcessAllowlist": ["secret-helper"]}):
        with pytest.raises(SecretUnresolved) as caught:
            resolve_secret(_process(script, **options), environ={}, what="header `A`")
    assert message in caught.value.message and "header `A`" in caught.value.message


def test_policy_refuses_unlisted_executables_and_files_outside_roots(tmp_path: Path) -> None:
    script = _script(tmp_path, "echo x")
    with secret_sources(tmp_path, {"secretFileRoots": ["keys"]}):
        with pytest.raises(PolicyDeniedError) as process:
            resolve_secret(_process(script), environ={}, what="x")
        with pytest.raises(PolicyDeniedError) as file:
            resolve_secret({"file": "../etc/passwd"}, environ={}, what="x")
    assert process.value.code == "policy.secret_process"
    assert file.value.code == "policy.secret_file"
    with pytest.raises(SecretUnresolved) as unset:
        resolve_secret({"env": "MISSING"}, environ={"MISSING": "\n"}, what="x")
    assert unset.value.code == "secret.unresolved"
