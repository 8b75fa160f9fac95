"""The ``command`` provider: an agent CLI run as a bounded process (real subprocesses)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from agentctl.errors import ProviderError
from agentctl.providers.base import Message, ProviderCallError
from agentctl.providers.command import CommandProvider, render_prompt
from agentctl.providers.registry import build_provider
from tests.fixtures.llm_servers.model_requests import WEATHER, call, model_request

PYTHON = sys.executable
ALLOW = (os.path.basename(PYTHON),)


def _provider(
    tmp_path: Path, environ: dict[str, str] | None = None, **definition: Any
) -> CommandProvider:
    provider = build_provider(
        "cli",
        {"kind": "command", "command": PYTHON, **definition},
        environ=environ
        if environ is not None
        else {"PATH": "/usr/bin:/bin", "SECRET_OUTSIDE": "x"},
        process_allowlist=ALLOW,
        cwd=tmp_path,
    )
    assert isinstance(provider, CommandProvider)
    return provider


def _failure(provider: CommandProvider, **request: Any) -> ProviderCallError:
    with pytest.raises(ProviderCallError) as caught:
        call(provider, model_request("cli", **request))
    return caught.value


def test_prompt_on_stdin_reply_on_stdout(tmp_path: Path) -> None:
    script = "import sys; print('REPLY:' + sys.stdin.read().upper())"
    provider = _provider(tmp_path, args=["-c", script])
    response = call(provider, model_request("cli", instructions="be brief"))
    assert response.text == "REPLY:BE BRIEF\n\nHELLO"
    assert response.finish_reason == "complete"
    assert response.tool_calls == ()
    # ceil(len("be brief\n\nhello") / 4) and ceil(len(stdout) / 4)
    assert (response.usage.input_tokens, response.usage.output_tokens) == (4, 6)
    assert response.raw["usageEstimated"] is True
    assert response.raw["exitCode"] == 0


def test_prompt_in_argv_appended_or_placeholder(tmp_path: Path) -> None:
    appended = _provider(tmp_path, args=["-c", "import sys; print(sys.argv[1:])"], promptVia="argv")
    assert call(appended, model_request("cli", instructions="")).text == "['hello']"
    placeholder = _provider(
        tmp_path,
        args=["-c", "import sys; print(sys.argv[1:])", "{prompt}", "--flag"],
        promptVia="argv",
    )
    assert call(placeholder, model_request("cli", instructions="")).text == "['hello', '--flag']"


def test_child_environment_is_cleared_except_passthrough_and_declared(tmp_path: Path) -> None:
    script = "import os, json; print(json.dumps(sorted(os.environ)))"
    provider = _provider(
        tmp_path,
        {"PATH": "/usr/bin:/bin", "HOME": "/h", "SECRET_OUTSIDE": "x", "API": "k"},
        args=["-c", script],
        env={"AGENT_KEY": {"env": "API"}},
    )
    keys = json.loads(call(provider, model_request("cli")).text or "")
    assert "SECRET_OUTSIDE" not in keys
    assert {"AGENT_KEY", "HOME", "PATH"} <= set(keys)


def test_non_zero_exit_is_applied_and_redacts_secrets(tmp_path: Path) -> None:
    script = "import os, sys; sys.stderr.write('bad token ' + os.environ['AGENT_KEY']); sys.exit(3)"
    provider = _provider(
        tmp_path,
        {"PATH": "/usr/bin", "API": "hunter2"},
        args=["-c", script],
        env={"AGENT_KEY": {"env": "API"}},
    )
    error = _failure(provider)
    assert (error.code, error.applied, error.retryable) == (
        "provider.command_failed",
        "applied",
        False,
    )
    assert "exit code 3" in error.message
    assert "bad token [REDACTED]" in error.message
    assert "hunter2" not in error.message


def test_timeout_kills_and_is_uncertain(tmp_path: Path) -> None:
    provider = _provider(tmp_path, args=["-c", "import time; time.sleep(10)"], timeoutSeconds=0.3)
    error = _failure(provider)
    assert (error.code, error.applied) == ("provider.timeout", "uncertain")


def test_output_limit_is_uncertain(tmp_path: Path) -> None:
    provider = _provider(tmp_path, args=["-c", "print('x' * 5000)"], outputLimitBytes=100)
    error = _failure(provider)
    assert (error.code, error.applied) == ("provider.output_limit", "uncertain")


def test_not_allowed_or_missing_program_did_nothing(tmp_path: Path) -> None:
    denied = build_provider(
        "cli",
        {"kind": "command", "command": PYTHON},
        environ={},
        process_allowlist=(),
        cwd=tmp_path,
    )
    assert isinstance(denied, CommandProvider)
    error = _failure(denied)
    assert (error.code, error.applied, error.retryable) == (
        "policy.process_not_allowed",
        "not_applied",
        False,
    )
    missing = build_provider(
        "cli",
        {"kind": "command", "command": "no-such-agent-cli"},
        environ={"PATH": str(tmp_path)},
        process_allowlist=("no-such-agent-cli",),
        cwd=tmp_path,
    )
    assert isinstance(missing, CommandProvider)
    error = _failure(missing)
    assert (error.code, error.applied, error.retryable) == (
        "process.not_found",
        "not_applied",
        True,
    )


def test_non_utf8_stdout_is_invalid(tmp_path: Path) -> None:
    provider = _provider(
        tmp_path, args=["-c", "import sys; sys.stdout.buffer.write(b'\\xff\\xfe')"]
    )
    error = _failure(provider)
    assert error.code == "provider.invalid_response"
    assert "`(stdout)` is not UTF-8" in error.message


def test_tools_and_structured_output_are_refused(tmp_path: Path) -> None:
    provider = _provider(tmp_path, args=["-c", "print(1)"])
    assert _failure(provider, tools=(WEATHER,)).code == "provider.invalid_request"
    assert (
        _failure(provider, structured_output={"type": "object"}).code == "provider.invalid_request"
    )


@pytest.mark.parametrize(
    ("definition", "detail"),
    [
        ({}, "`command` must be a non-empty string"),
        ({"command": "llm", "promptVia": "file"}, "`promptVia` must be `stdin` or `argv`"),
        ({"command": "llm", "args": "-p"}, "`args` must be a list of strings"),
        ({"command": "llm", "timeoutSeconds": 0}, "`timeoutSeconds` must be in"),
        ({"command": "llm", "outputLimitBytes": 0}, "`outputLimitBytes` must be in"),
    ],
)
def test_invalid_definitions(definition: dict[str, Any], detail: str) -> None:
    with pytest.raises(ProviderError) as caught:
        build_provider("cli", {"kind": "command", **definition}, environ={})
    assert caught.value.code == "provider.invalid_definition"
    assert detail in caught.value.message


def test_render_prompt_for_a_multi_turn_conversation() -> None:
    request = model_request(
        "cli",
        instructions="sys",
        messages=(Message("user", "a"), Message("assistant", "b"), Message("user", "c")),
    )
    assert render_prompt(request) == "sys\n\nUser: a\n\nAssistant: b\n\nUser: c"


def test_entry_dumped_from_the_spec_model_builds(tmp_path: Path) -> None:
    from agentctl.spec.models_definitions import Provider

    entry = Provider.model_validate(
        {"kind": "command", "command": PYTHON, "args": ["-c", "print('dumped')"]}
    ).model_dump(mode="json", by_alias=True)
    assert entry["promptVia"] is None and entry["env"] is None  # every key, nulls included
    provider = build_provider("cli", entry, environ={}, process_allowlist=ALLOW, cwd=tmp_path)
    assert isinstance(provider, CommandProvider)
    assert provider.prompt_via == "stdin"
    assert call(provider, model_request("cli")).text == "dumped"
