"""An agent task (docs/providers.md): a bounded loop of model requests and tool calls.

Every model request and every non-pure tool call is its own effect, numbered by ordinal in
the order it happens, so a resumed attempt replays the conversation from the journal —
confirmed model answers and tool results are reused, never re-requested.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError as PydanticValidationError

from agentctl.compiler.effects import (
    INSTRUCTIONS_READ,
    MCP_LIST_TOOLS,
    mcp_tool_effect,
    model_effect,
)
from agentctl.digest import canonical_json, compact_json
from agentctl.engine.actions import sessions, workspace_writers
from agentctl.engine.actions.context import TaskEnv, TaskResult
from agentctl.engine.effects import budget
from agentctl.engine.effects.journal import EffectSpec
from agentctl.errors import ProviderError, UsageError
from agentctl.json_schemas import compile_schema, first_error
from agentctl.providers.base import (
    Message,
    ModelRequest,
    ModelResponse,
    Provider,
    ProviderCallError,
    ToolCall,
    ToolSpec,
    Usage,
)
from agentctl.providers.registry import build_provider
from agentctl.sandbox import SandboxView
from agentctl.signals import OutcomeUnknown, TaskFailure, as_task_failure
from agentctl.spec.models_definitions import MCP_DEFAULT_TIMEOUT_SECONDS, Agent
from agentctl.store import sessions_repo
from agentctl.tools import files

__all__ = ["ProviderPool", "run_agent"]


class ProviderPool:
    """One provider instance per ``spec.providers`` entry for the whole process
    (docs/workflow-language.md)."""

    def __init__(self) -> None:
        self._providers: dict[str, Provider] = {}

    def get(
        self,
        name: str,
        definition: Mapping[str, Any],
        *,
        environ: Mapping[str, str] | None = None,
        process_allowlist: Sequence[str] = (),
        cwd: Path | None = None,
        sandbox_view: SandboxView | None = None,
    ) -> Provider:
        if name not in self._providers:
            self._providers[name] = build_provider(
                name,
                definition,
                environ=environ,
                process_allowlist=process_allowlist,
                cwd=cwd,
                sandbox_view=sandbox_view,
            )
        return self._providers[name]


def _validate(schema: Mapping[str, Any] | None, value: Any) -> str | None:
    """Why ``value`` does not fit ``schema``; a schema that cannot be applied fails the task."""
    if schema is None:
        return None
    try:
        mismatch = first_error(compile_schema(schema), value)
    except UsageError as error:
        raise as_task_failure(error) from error
    return None if mismatch is None else f"{mismatch.message} at {mismatch.where}"


def _usage_json(usage: Usage, cost: int | None) -> dict[str, Any]:
    out: dict[str, Any] = dict(usage.to_json())
    out["costMicrousd"] = cost  # null unless the model is priced (docs/budgets.md)
    return out


async def _instructions(env: TaskEnv, agent: Mapping[str, Any]) -> str:
    inline = agent.get("instructions")
    if isinstance(inline, str):
        return inline
    path_text = str(agent.get("instructionsFile") or "")
    target = env.workspace.resolve_read(path_text)
    spec = EffectSpec.classified(INSTRUCTIONS_READ, {"path": path_text})

    async def dispatch(_effect_id: str) -> Any:
        return {"content": files.read_text(target, 1 << 20)}

    result = await env.gate.perform(env.attempt, spec, dispatch)
    return str(result["content"])


@dataclass(frozen=True)
class McpTool:
    """A tool of a declared MCP server offered to an agent as ``mcp:<server>/<tool>``."""

    entry: str
    server: str
    remote: str
    model_name: str
    description: str
    input_schema: Mapping[str, Any]


def _mcp_server(env: TaskEnv, server: str) -> Mapping[str, Any]:
    from agentctl.engine.actions.protocol import prepare_mcp_server

    definition: Mapping[str, Any] | None = (env.spec.get("mcpServers") or {}).get(server)
    if definition is None:
        raise TaskFailure(f"unknown MCP server `{server}`", code="input.invalid")
    return prepare_mcp_server(env, server, definition)


async def _offer_mcp_tool(env: TaskEnv, entry: str) -> McpTool:
    """List the server's tools once per attempt (an observation effect, so a resume offers
    the model exactly what it was offered before) and pick the named one."""
    from agentctl.engine.actions.environment import allowed_environ
    from agentctl.tools.mcp import list_mcp_tools

    server, _, remote = entry[4:].partition("/")
    definition = _mcp_server(env, server)
    effect = EffectSpec.classified(MCP_LIST_TOOLS, {"server": server})

    async def dispatch(_effect_id: str) -> Any:
        return await list_mcp_tools(
            definition,
            environ=allowed_environ(env),
            timeout_seconds=float(definition.get("timeoutSeconds") or MCP_DEFAULT_TIMEOUT_SECONDS),
            process_allowlist=list(env.policy.get("processAllowlist") or []),
        )

    listed = await env.gate.perform(env.attempt, effect, dispatch)
    found = next((t for t in listed or [] if t.get("name") == remote), None)
    if found is None:
        raise TaskFailure(
            f"MCP server `{server}` offers no tool `{remote}`", code="mcp.unknown_tool"
        )
    model_name = re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}__{remote}")[:64]
    return McpTool(
        entry,
        server,
        remote,
        model_name,
        str(found.get("description") or ""),
        found.get("inputSchema") or {"type": "object"},
    )


async def _run_mcp_tool(env: TaskEnv, tool: McpTool, call: ToolCall) -> Any:
    """A model's call of an MCP tool: one network effect; the server's own schema checks the
    input (server-supplied schemas describe, they never grant authority)."""
    from agentctl.engine.actions.environment import allowed_environ
    from agentctl.tools.mcp import call_mcp_tool

    arguments = dict(call.input)
    problem = _validate(tool.input_schema, arguments)
    if problem:
        raise TaskFailure(
            f"tool `{tool.entry}` input violates its inputSchema: {problem}", code="tool.contract"
        )
    definition = _mcp_server(env, tool.server)
    spec = EffectSpec.classified(mcp_tool_effect(tool.entry), arguments)

    async def dispatch(_effect_id: str) -> Any:
        return await call_mcp_tool(
            definition,
            tool.remote,
            arguments,
            idempotency="unknown",
            environ=allowed_environ(env),
            timeout_seconds=float(definition.get("timeoutSeconds") or MCP_DEFAULT_TIMEOUT_SECONDS),
            process_allowlist=list(env.policy.get("processAllowlist") or []),
        )

    return await env.gate.perform(
        env.attempt,
        spec,
        dispatch,
        prompt=f"MCP tool {tool.entry} {compact_json(arguments)}",
        reservation={"toolCalls": 1},
        usage=lambda _result: {"toolCalls": 1},
        failed_usage={"toolCalls": 1},
        tool_call={"id": call.id, "tool": tool.entry, "arguments": arguments},
    )


async def _run_action_tool(env: TaskEnv, action_name: str, call: ToolCall) -> Any:
    """A model's call of a named action: the action runs with the call's arguments as its
    `with`, its effects journaled, gated and numbered within this agent attempt."""
    from agentctl.engine.actions.builtin import run_action

    nested = dataclasses.replace(env, input=dict(call.input))
    return (await run_action(nested, action_name)).output


async def _run_tool(env: TaskEnv, call: ToolCall) -> Any:
    tools = env.spec.get("tools") or {}
    tool = tools.get(call.name)
    if tool is None:
        raise TaskFailure(f"the model called unknown tool `{call.name}`", code="tool.unknown")
    problem = _validate(tool.get("inputSchema"), dict(call.input))
    if problem:
        raise TaskFailure(
            f"tool `{call.name}` input violates its inputSchema: {problem}", code="tool.contract"
        )
    kind = tool.get("kind")
    arguments = dict(call.input)

    async def dispatch(_effect_id: str) -> Any:
        if kind == "builtin.workspace.read":
            path_text = str(arguments.get("path"))
            content = files.read_text(env.workspace.resolve_read(path_text), 1 << 20)
            data = content.encode()
            return {
                "path": path_text,
                "content": content,
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        if kind == "builtin.workspace.write":
            path_text = str(arguments.get("path"))
            content = str(arguments.get("content"))
            # A writer window: a process scanning the workspace meanwhile must not take
            # the file for its own (see workspace_writers).
            with workspace_writers.writing(env.workspace.workspace_root, expected_seconds=60):
                files.write_atomic(env.workspace.resolve_write(path_text), content)
            data = content.encode()
            return {
                "path": path_text,
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        if kind == "builtin.echo":
            return arguments
        raise TaskFailure(f"tool kind `{kind}` cannot run in this build", code="tool.unsupported")

    if kind == "builtin.echo":
        # pure: not journaled, but keeps the ordinals of docs/durable-execution.md
        env.attempt.next_ordinal()
        output = await dispatch("")
    else:
        spec = EffectSpec(
            operation=f"tool.{call.name}",
            effect_input=arguments,
            effect_class=str(tool.get("effectClass")),
            idempotency=str(tool.get("idempotency")),
            risk=str(tool.get("risk")),
            policy_label=call.name,
        )
        output = await env.gate.perform(
            env.attempt,
            spec,
            dispatch,
            tool_approval=tool.get("approval"),
            prompt=f"tool {call.name} {compact_json(arguments)}",
            reservation={"toolCalls": 1},
            usage=lambda _result: {"toolCalls": 1},
            failed_usage={"toolCalls": 1},
            tool_call={"id": call.id, "tool": call.name, "arguments": arguments},
        )
    if kind == "builtin.workspace.write":
        # Ingested with the task's commit, also when a resume reused this call's result.
        path_text = str(arguments.get("path"))
        env.written.append((path_text, env.workspace.resolve_write(path_text)))
    problem = _validate(tool.get("outputSchema"), output)
    if problem:
        raise TaskFailure(
            f"tool `{call.name}` output violates its outputSchema: {problem}", code="tool.contract"
        )
    return output


async def _request(env: TaskEnv, provider: Provider, request: ModelRequest) -> ModelResponse:
    spec = EffectSpec.classified(model_effect(request.provider), request.to_json())

    async def dispatch(_effect_id: str) -> Any:
        try:
            response = await asyncio.wait_for(
                provider.complete(request), timeout=request.timeout_seconds
            )
        except TimeoutError as exc:
            raise OutcomeUnknown(
                f"provider `{request.provider}` did not answer within {request.timeout_seconds}s"
            ) from exc
        except ProviderCallError as exc:
            if exc.applied == "uncertain":
                raise OutcomeUnknown(exc.message) from exc
            raise TaskFailure(
                exc.message,
                code=exc.code,
                retryable=exc.retryable,
                details={
                    "status": exc.status,
                    "requestId": exc.request_id,
                    "retryAfterSeconds": exc.retry_after_seconds,
                },
            ) from exc
        return response.to_json()

    pricing = (env.spec.get("runtime") or {}).get("pricing")
    request_json = spec.effect_input
    worst = budget.model_worst_case(
        request_json, len(canonical_json(request_json).encode()), pricing
    )
    result = await env.gate.perform(
        env.attempt,
        spec,
        dispatch,
        model=True,
        prompt=f"call model provider {request.provider}",
        reservation=worst,
        usage=lambda answer: budget.model_usage(request_json, answer, pricing)[0],
        failed_usage={"providerRequests": 1, "turns": 1},
    )
    try:
        return ModelResponse.from_json(result)
    except ProviderError as exc:
        raise TaskFailure(exc.message, code=exc.code) from exc


def _save_session(
    env: TaskEnv,
    provider: str,
    request: ModelRequest,
    response: ModelResponse,
    turn: int,
    started: sessions.Continuation,
) -> None:
    """Continuation state per (run, task): what a later turn, a resume or a later run's
    task (``session``) continues from.

    Within a run the conversation is rebuilt from the journal (every model answer and tool
    result is a confirmed effect); the row records where it stands and the transcript so
    far (the request's messages and this answer), which a later run continues.
    """
    answer = Message(
        role="assistant",
        text=response.text,
        tool_calls=response.tool_calls,
        response_id=response.response_id,
        provider_items=response.provider_items,
    )
    state = {
        "provider": provider,
        "model": request.model,
        "attempt": env.attempt.attempt,
        "turn": turn + 1,
        "messages": len(request.messages) + 1,
        "lastResponseId": response.response_id,
        "finishReason": response.finish_reason,
        **started.state(),
        "transcript": [m.to_json() for m in (*request.messages, answer)],
    }
    with env.gate.store.write() as conn:
        sessions_repo.save(
            conn,
            env.run_id,
            env.task.id,
            provider,
            canonical_json(state),
            env.gate.clock.now(),
            name=sessions.session_name(env),
        )


def _agent_model(name: str, definition: Mapping[str, Any]) -> Agent:
    """The run's agent definition as the typed spec model, so its defaults (turns, tool
    calls, output tokens, timeout) come from the one place that declares them."""
    try:
        return Agent.model_validate(definition)
    except PydanticValidationError as exc:
        raise TaskFailure(
            f"agent `{name}` of this run does not fit the workflow language: {exc}",
            code="input.invalid",
        ) from exc


async def run_agent(env: TaskEnv, agent_name: str, pool: ProviderPool) -> TaskResult:
    spec = env.spec
    agent = (spec.get("agents") or {}).get(agent_name) or {}
    provider_name = str(agent.get("provider"))
    provider_def = (spec.get("providers") or {}).get(provider_name) or {}
    if env.check:
        return TaskResult(
            {"status": "requires_execution", "changed": False, "provider": provider_name}
        )
    try:
        provider = pool.get(
            provider_name,
            provider_def,
            environ=env.environ,
            process_allowlist=list(env.policy.get("processAllowlist") or []),
            cwd=env.workspace.workspace_root,
            sandbox_view=SandboxView(
                env.workspace.workspace_root,
                tuple(env.workspace.writable_roots),
                env.gate.store.path,
            ),
        )
    except ProviderError as exc:
        raise TaskFailure(exc.message, code=exc.code) from exc
    instructions = await _instructions(env, agent)
    prompt_value = env.input.get("prompt") if isinstance(env.input, Mapping) else None
    prompt = prompt_value if isinstance(prompt_value, str) else compact_json(env.input)
    specs: list[ToolSpec] = []
    mcp_tools: dict[str, McpTool] = {}
    action_tools: dict[str, str] = {}
    declared_tools: dict[str, str] = {}
    for name in agent.get("tools") or []:
        if str(name).startswith("action:"):
            action_name = str(name)[7:]
            action = (spec.get("actions") or {}).get(action_name) or {}
            model_name = re.sub(r"[^A-Za-z0-9_-]", "_", action_name)[:64]
            action_tools[model_name] = action_name
            specs.append(
                ToolSpec(
                    model_name,
                    str(action.get("description") or f"run the `{action_name}` action"),
                    action.get("inputSchema") or {"type": "object"},
                )
            )
            continue
        if str(name).startswith("mcp:"):
            offered = await _offer_mcp_tool(env, str(name))
            mcp_tools[offered.model_name] = offered
            specs.append(ToolSpec(offered.model_name, offered.description, offered.input_schema))
            continue
        definition = (spec.get("tools") or {})[name]
        # A pack tool is named `<pack>.<tool>`; providers accept only [A-Za-z0-9_-] names.
        offered_name = re.sub(r"[^A-Za-z0-9_-]", "_", str(name))[:64]
        if offered_name != name:
            declared_tools[offered_name] = str(name)
        specs.append(
            ToolSpec(
                offered_name,
                str(definition.get("description") or ""),
                definition.get("inputSchema") or {},
            )
        )
    tool_specs = tuple(specs)
    limits = _agent_model(agent_name, agent)
    max_turns = limits.max_turns
    max_tool_calls = limits.max_tool_calls
    structured = agent.get("structuredOutput")
    started = sessions.continuation(env, provider_name)
    messages: list[Message] = [*started.messages, Message(role="user", text=prompt)]
    pricing = (spec.get("runtime") or {}).get("pricing")
    total_cost: int | None = None
    usage = Usage()
    tool_calls = 0
    for turn in range(max_turns):
        request = ModelRequest(
            provider=provider_name,
            model=str(agent.get("model")),
            instructions=instructions,
            messages=tuple(messages),
            tools=tool_specs,
            max_output_tokens=limits.max_output_tokens,
            structured_output=structured,
            options=dict(agent.get("providerOptions") or {}),
            # A float, as journaled since the first format (the request's digest is in the
            # effect id).
            timeout_seconds=float(limits.timeout_seconds),
            reasoning=agent.get("reasoning"),
            stream=limits.stream,
        )
        response = await _request(env, provider, request)
        usage = usage + response.usage
        _save_session(env, provider_name, request, response, turn, started)
        _, cost = budget.model_usage(request.to_json(), response.to_json(), pricing)
        if cost is not None:
            total_cost = (total_cost or 0) + cost
        if response.finish_reason in ("max_tokens", "refusal"):
            raise TaskFailure(
                f"agent `{agent_name}` stopped: finish reason {response.finish_reason}",
                code="agent.finish_reason",
            )
        if response.tool_calls:
            messages.append(
                Message(
                    role="assistant",
                    text=response.text,
                    tool_calls=response.tool_calls,
                    # Continuation state: previous_response_id, reasoning/thinking items.
                    response_id=response.response_id,
                    provider_items=response.provider_items,
                )
            )
            for call in response.tool_calls:
                tool_calls += 1
                if tool_calls > max_tool_calls:
                    raise TaskFailure(
                        f"agent `{agent_name}` exceeded maxToolCalls ({max_tool_calls})",
                        code="agent.max_tool_calls",
                    )
                if call.name in action_tools:
                    result = await _run_action_tool(env, action_tools[call.name], call)
                elif call.name in mcp_tools:
                    result = await _run_mcp_tool(env, mcp_tools[call.name], call)
                else:
                    if call.name in declared_tools:
                        call = dataclasses.replace(call, name=declared_tools[call.name])
                    result = await _run_tool(env, call)
                messages.append(Message(role="tool", tool_call_id=call.id, tool_result=result))
            continue
        text = response.text or ""
        if structured is not None:
            try:
                parsed = json.loads(text)
            except ValueError as exc:
                raise TaskFailure(
                    f"agent `{agent_name}` answered text that is not JSON: {exc}",
                    code="agent.structured_output",
                ) from exc
            problem = _validate(structured, parsed)
            if problem:
                raise TaskFailure(
                    f"agent `{agent_name}` output violates structuredOutput: {problem}",
                    code="agent.structured_output",
                )
            return TaskResult(parsed)
        return TaskResult({"text": text, "usage": _usage_json(usage, total_cost)})
    raise TaskFailure(
        f"agent `{agent_name}` reached maxTurns ({max_turns}) without a final answer",
        code="agent.max_turns",
    )
