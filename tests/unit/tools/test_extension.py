"""extension.process against a real extension process (tests/fixtures/protocol_servers)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from agentctl.signals import OutcomeUnknown, TaskFailure
from agentctl.tools.extension import run_extension

FIXTURE = Path(__file__).parents[2] / "fixtures" / "protocol_servers" / "extension.py"
INPUT_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "maximum": 1000}},
    "required": ["n"],
    "additionalProperties": False,
}
OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {"doubled": {"type": "integer"}},
    "required": ["doubled"],
}


def _action(mode: str, **overrides: Any) -> dict[str, Any]:
    action: dict[str, Any] = {
        "kind": "extension.process",
        "command": "python3",
        "args": [str(FIXTURE), mode],
        "idempotency": "idempotent",
        "protocolVersion": "agentctl.dev/process-extension/v1",
        "inputSchema": INPUT_SCHEMA,
        "outputSchema": OUTPUT_SCHEMA,
        "capabilities": ["math"],
    }
    action.update(overrides)
    return action


def _run(action: dict[str, Any], value: Any, tmp_path: Path, **kwargs: Any) -> Any:
    options: dict[str, Any] = {
        "effect_id": "e" * 64,
        "executable": sys.executable,
        "cwd": tmp_path,
        "env": {},
        "timeout_seconds": 10,
    }
    options.update(kwargs)
    return asyncio.run(run_extension(action, value, **options))


def test_handshake_then_invoke_returns_the_validated_output(tmp_path: Path) -> None:
    announced: list[str] = []
    out = _run(_action("ok"), {"n": 21}, tmp_path, on_handshake=announced.append)
    assert out == {"doubled": 42}
    assert announced == ["doubler"]


def test_input_is_validated_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(TaskFailure) as caught:
        _run(_action("ok"), {"n": "21"}, tmp_path, executable="/nonexistent/never-run")
    assert caught.value.code == "extension.input_invalid"
    assert caught.value.details == {"path": "n"}


def test_handshake_schema_mismatch_fails_without_invoking(tmp_path: Path) -> None:
    with pytest.raises(TaskFailure) as caught:
        _run(_action("mismatch"), {"n": 1}, tmp_path)
    assert caught.value.code == "extension.handshake_mismatch"
    assert caught.value.details == {"fields": ["outputSchema"], "announcedName": "doubler"}


def test_handshake_compares_json_types(tmp_path: Path) -> None:
    # Python's == calls 1000 and 1000.0 equal; the extension announced the integer.
    float_schema = {**INPUT_SCHEMA, "properties": {"n": {"type": "integer", "maximum": 1000.0}}}
    with pytest.raises(TaskFailure) as typed:
        _run(_action("ok", inputSchema=float_schema), {"n": 1}, tmp_path)
    assert typed.value.details == {"fields": ["inputSchema"], "announcedName": "doubler"}
    with pytest.raises(TaskFailure) as caught:
        _run(_action("ok", capabilities=["math", "more"]), {"n": 1}, tmp_path)
    assert caught.value.details == {"fields": ["capabilities"], "announcedName": "doubler"}


def test_output_schema_violation_fails_the_task(tmp_path: Path) -> None:
    with pytest.raises(TaskFailure) as caught:
        _run(_action("badout"), {"n": 2}, tmp_path)
    assert caught.value.code == "extension.output_invalid"
    assert caught.value.details == {"path": "doubled"}


def test_invoke_timeout_is_an_uncertain_outcome(tmp_path: Path) -> None:
    with pytest.raises(OutcomeUnknown) as caught:
        _run(_action("slow"), {"n": 2}, tmp_path, timeout_seconds=1.5)
    assert "timed out after 1.5s" in caught.value.message


def test_failed_invoke_redacts_env_secrets_from_stderr(tmp_path: Path) -> None:
    with pytest.raises(TaskFailure) as caught:
        _run(_action("crash"), {"n": 2}, tmp_path, env={"TOKEN": "hunter2-secret"})
    assert caught.value.code == "extension.failed"
    assert "exit code 2" in caught.value.message
    stderr = caught.value.details["stderr"]
    assert "failing with token [REDACTED]" in stderr
    assert "hunter2" not in stderr


def test_answer_for_another_effect_is_a_protocol_error(tmp_path: Path) -> None:
    with pytest.raises(TaskFailure) as caught:
        _run(_action("wrongid"), {"n": 2}, tmp_path)
    assert caught.value.code == "extension.protocol_error"
    assert "effect `other`" in caught.value.message
