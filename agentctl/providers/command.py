"""The ``command`` provider kind: an agent CLI as a model (``claude -p``, ``codex exec``,
``llm``, or any program that reads a prompt and prints a reply).

Entry shape (a plain mapping, camelCase keys as in the workflow file)::

    kind: command
    command: claude            # bare name looked up on PATH, or an absolute path
    args: ["-p"]               # "{prompt}" as a whole argument is replaced by the prompt
    promptVia: stdin           # stdin (default) | argv (appended unless "{prompt}" is used)
    timeoutSeconds: 600        # default: the agent's timeoutSeconds
    outputLimitBytes: 1048576  # stdout cap, default 1 MiB (stderr gets the same cap)
    env: {ANTHROPIC_API_KEY: {env: ANTHROPIC_API_KEY}}   # secret refs for the child
    isolation: sandbox         # process (default) | sandbox (docs/isolation.md)
    sandbox: {network: true, readPaths: [/opt/claude], limits: {memoryBytes: 2147483648}}

The program runs through ``agentctl.process`` exactly like ``builtin.shell.exec``:
no shell, its basename must be in ``policy.processAllowlist``, its own process group,
capped output, a timeout, and a cleared environment holding only ``PATH``, ``HOME``,
``LANG``, ``LC_ALL``, ``TMPDIR`` and ``USER`` (when set) plus the declared ``env``.

With ``isolation: sandbox`` the program runs under bubblewrap (:mod:`agentctl.sandbox`):
the workspace read-only, its writable roots writable, the run's database hidden, network
only when ``sandbox.network`` is true (an API-backed agent CLI needs it), the declared
limits. A sandbox that cannot start fails the call with ``isolation.unavailable`` before
anything ran; a breached limit is ``uncertain`` like a timeout, with the limit's code.

Outcomes: the exit-0 stdout (one trailing newline stripped) is the reply. A program that
cannot be found or started did nothing (``not_applied``). A timeout or a blown output cap
killed it midway (``uncertain``: an agent CLI may edit files). A non-zero exit ran to the
end and failed (``applied``, not retryable). Usage is estimated as ceil(bytes / 4) for
prompt and reply, as for budget reservations (docs/budgets.md); ``raw.usageEstimated`` says so.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentctl.errors import AgentctlError, ProviderError
from agentctl.process import (
    ProcessResult,
    ProcessSpec,
    decode_lossy,
    resolve_executable,
    run_process,
)
from agentctl.providers.base import ModelRequest, ModelResponse, ProviderCallError, Usage
from agentctl.providers.credentials import SecretDescription, resolve_secret
from agentctl.providers.wire import invalid_response
from agentctl.redaction import redact
from agentctl.sandbox import (
    BUBBLEWRAP_OVERHEAD_PROCESSES,
    SandboxSettings,
    SandboxView,
    breach,
    find_tools,
    sandbox_argv,
)
from agentctl.sandbox_cgroups import Cgroup
from agentctl.spec.capabilities import COMMAND_CAPABILITIES

__all__ = [
    "COMMAND_CAPABILITIES",
    "DEFAULT_OUTPUT_LIMIT_BYTES",
    "PASSTHROUGH_ENV",
    "PROMPT_PLACEHOLDER",
    "CommandProvider",
    "render_prompt",
]

DEFAULT_OUTPUT_LIMIT_BYTES = 1 << 20
PASSTHROUGH_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")
PROMPT_PLACEHOLDER = "{prompt}"
_MAX_OUTPUT_LIMIT = 16 << 20
_MAX_TIMEOUT_SECONDS = 86400
_STDERR_TAIL = 500


class CommandProvider:
    """One ``kind: command`` provider entry."""

    kind = "command"
    api = "process"
    capabilities = COMMAND_CAPABILITIES

    def __init__(
        self,
        name: str,
        definition: Mapping[str, Any],
        *,
        environ: Mapping[str, str],
        process_allowlist: Sequence[str],
        cwd: Path | None = None,
        sandbox_view: SandboxView | None = None,
    ) -> None:
        self.name = name
        self.command = _required_str(name, definition, "command")
        # A dumped spec model carries every key, unset ones as null: null means default.
        self.args = _args(name, definition.get("args") or [])
        self.prompt_via = definition.get("promptVia") or "stdin"
        if self.prompt_via not in ("stdin", "argv"):
            raise _bad_definition(name, "`promptVia` must be `stdin` or `argv`")
        self.timeout_seconds = _timeout(name, definition.get("timeoutSeconds"))
        self.output_limit_bytes = _output_limit(name, definition.get("outputLimitBytes"))
        self._allowlist = tuple(process_allowlist)
        self._cwd = cwd
        self.isolation = definition.get("isolation") or "process"
        if self.isolation not in ("process", "sandbox"):
            raise _bad_definition(name, "`isolation` must be `process` or `sandbox`")
        sandbox = definition.get("sandbox")
        self.sandbox = (
            SandboxSettings.from_json(sandbox if isinstance(sandbox, Mapping) else None)
            if self.isolation == "sandbox"
            else None
        )
        self._view = sandbox_view
        self._search_path = environ.get("PATH")
        self._env = {key: environ[key] for key in PASSTHROUGH_ENV if key in environ}
        self.env_sources: dict[str, SecretDescription] = {}
        self._secrets: list[str] = []
        env_refs = definition.get("env") or {}
        if not isinstance(env_refs, Mapping):
            raise _bad_definition(name, "`env` must map variable names to secret references")
        for variable, ref in env_refs.items():
            secret = resolve_secret(
                ref, environ=environ, purpose=f"env `{variable}`", provider=name
            )
            self._env[str(variable)] = secret.value
            self.env_sources[str(variable)] = secret.describe()
            self._secrets.append(secret.value)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.tools or request.structured_output is not None:
            raise ProviderCallError(
                f"provider `{self.name}` (kind command) cannot offer tools or enforce "
                "structured output",
                retryable=False,
                applied="not_applied",
                code="provider.invalid_request",
            )
        prompt = render_prompt(request)
        cgroup: Cgroup | None = None
        try:
            executable = resolve_executable(self.command, self._allowlist, self._search_path)
            cwd = self._cwd or Path.cwd()
            argv: tuple[str, ...] = (executable, *self._argv(prompt))
            if self.sandbox is not None:
                argv, cgroup = await self._sandboxed(argv, cwd)
            spec = ProcessSpec(
                argv=argv,
                cwd=cwd,
                env=self._env,
                timeout_seconds=self.timeout_seconds or request.timeout_seconds,
                stdout_limit_bytes=self.output_limit_bytes,
                stderr_limit_bytes=self.output_limit_bytes,
                combined_limit_bytes=2 * self.output_limit_bytes,
                stdin=prompt.encode() if self.prompt_via == "stdin" else None,
            )
            result = await run_process(spec)
        except AgentctlError as exc:
            raise ProviderCallError(
                f"provider `{self.name}`: {exc.message}",
                retryable=exc.code in ("process.not_found", "process.spawn_failed"),
                applied="not_applied",
                code=exc.code,
                hint=exc.hint,
            ) from exc
        finally:
            counters = None if cgroup is None else cgroup.counters()
            if cgroup is not None:
                cgroup.remove()
        if self.sandbox is not None and (result.exit_code != 0 or result.timed_out):
            found = breach(self.sandbox, counters, result.exit_code, result.signal)
            if found is not None:
                code, what = found
                raise ProviderCallError(
                    f"provider `{self.name}`: `{self.command}` {what}",
                    retryable=False,
                    applied="uncertain",
                    code=code,
                    hint="reconcile the model effect (the program may have changed files)",
                )
        return self._response(prompt, result)

    async def _sandboxed(
        self, argv: tuple[str, ...], cwd: Path
    ) -> tuple[tuple[str, ...], Cgroup | None]:
        """``argv`` wrapped in the provider's sandbox, and the cgroup of this call."""
        assert self.sandbox is not None
        limits = self.sandbox.limits
        tools = await asyncio.to_thread(find_tools, limits, os.environ)
        view = self._view or SandboxView(cwd)
        for root in view.writable_roots:
            root.mkdir(parents=True, exist_ok=True)
        cgroup = None
        if limits.needs_cgroup:
            processes = limits.processes
            cgroup = Cgroup.create(
                f"provider-{os.getpid()}",
                limits.memory_bytes,
                None if processes is None else processes + BUBBLEWRAP_OVERHEAD_PROCESSES,
            )
        wrapped = sandbox_argv(
            tools,
            self.sandbox,
            argv,
            cwd=cwd,
            read_root=view.read_root,
            writable_roots=list(view.writable_roots),
            hidden=view.hidden(),
            cgroup=cgroup,
        )
        return wrapped, cgroup

    def _argv(self, prompt: str) -> list[str]:
        if self.prompt_via == "stdin":
            return list(self.args)
        if PROMPT_PLACEHOLDER in self.args:
            return [prompt if arg == PROMPT_PLACEHOLDER else arg for arg in self.args]
        return [*self.args, prompt]

    def _response(self, prompt: str, result: ProcessResult) -> ModelResponse:
        if result.timed_out or result.limit_exceeded is not None:
            what = (
                f"did not finish within {self.timeout_seconds}s"
                if result.timed_out
                else f"exceeded its {result.limit_exceeded} output limit"
            )
            raise ProviderCallError(
                f"provider `{self.name}`: `{self.command}` {what} and was stopped",
                retryable=False,
                applied="uncertain",
                code="provider.timeout" if result.timed_out else "provider.output_limit",
                hint="reconcile the model effect (the program may have changed files)",
            )
        if result.exit_code != 0:
            status = (
                f"exit code {result.exit_code}"
                if result.exit_code is not None
                else f"signal {result.signal}"
            )
            stderr = redact(decode_lossy(result.stderr), self._secrets).strip()
            detail = f": {stderr[-_STDERR_TAIL:]}" if stderr else ""
            raise ProviderCallError(
                f"provider `{self.name}`: `{self.command}` failed with {status}{detail}",
                retryable=False,
                applied="applied",
                code="provider.command_failed",
            )
        try:
            text = result.stdout.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise invalid_response(self.name, "(stdout)", f"is not UTF-8: {exc}") from exc
        text = text.removesuffix("\n").removesuffix("\r")
        return ModelResponse(
            text=text,
            tool_calls=(),
            finish_reason="complete",
            usage=Usage(
                input_tokens=math.ceil(len(prompt.encode()) / 4),
                output_tokens=math.ceil(len(result.stdout) / 4),
            ),
            response_id=None,
            raw={
                "provider": "command",
                "command": self.command,
                "exitCode": result.exit_code,
                "durationSeconds": round(result.duration_seconds, 3),
                "usageEstimated": True,
            },
        )


def render_prompt(request: ModelRequest) -> str:
    """Instructions, a blank line, then the conversation (just the prompt on turn one)."""
    texts = [m for m in request.messages if m.text]
    if len(texts) == 1:
        body = texts[0].text or ""
    else:
        body = "\n\n".join(f"{m.role.capitalize()}: {m.text}" for m in texts)
    return f"{request.instructions}\n\n{body}" if request.instructions else body


def _required_str(name: str, definition: Mapping[str, Any], key: str) -> str:
    value = definition.get(key)
    if not isinstance(value, str) or not value:
        raise _bad_definition(name, f"`{key}` must be a non-empty string")
    return value


def _args(name: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(arg, str) for arg in value):
        raise _bad_definition(name, "`args` must be a list of strings")
    if any("\0" in arg for arg in value):
        raise _bad_definition(name, "`args` must not contain NUL characters")
    return tuple(value)


def _timeout(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value <= _MAX_TIMEOUT_SECONDS
    ):
        raise _bad_definition(name, f"`timeoutSeconds` must be in (0, {_MAX_TIMEOUT_SECONDS}]")
    return float(value)


def _output_limit(name: str, value: Any) -> int:
    if value is None:
        return DEFAULT_OUTPUT_LIMIT_BYTES
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_OUTPUT_LIMIT:
        raise _bad_definition(name, f"`outputLimitBytes` must be in 1..{_MAX_OUTPUT_LIMIT}")
    return value


def _bad_definition(name: str, detail: str) -> ProviderError:
    return ProviderError(
        f"provider `{name}` (kind command): {detail}", code="provider.invalid_definition"
    )
