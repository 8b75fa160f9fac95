"""``builtin.long_term_memory.read|write|search|promote`` as task bodies (docs/actions.md,
docs/durable-execution.md).

Reads and searches are observation effects: their recorded result is what a resume or a
replay uses, so a replay never calls the embedder. Writes are external mutations; the
entry's expiry is computed from the run's creation time so the effect input — and with it
the effect id — is the same on every resume. Promotion copies a chosen value into working
memory as an internal-state effect, like ``builtin.memory.write``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, cast

from agentctl.engine.actions.context import TaskEnv, TaskResult
from agentctl.engine.effects.journal import EffectSpec
from agentctl.errors import AgentctlError
from agentctl.ids import FixedClock
from agentctl.signals import TaskFailure
from agentctl.spec.models_runtime import LongTermMemory as LongTermSettings

__all__ = ["LONG_TERM_BODIES"]


def _settings(env: TaskEnv) -> Mapping[str, Any]:
    return (env.spec.get("memory") or {}).get("longTerm") or {}


def _namespace(env: TaskEnv) -> str:
    value = env.input.get("namespace") if isinstance(env.input, Mapping) else None
    if value is None:
        value = _settings(env).get("namespace") or LongTermSettings.default_of("namespace")
    if not isinstance(value, str):
        raise TaskFailure(
            f"task {env.task.id}: input requires string `namespace`", code="input.invalid"
        )
    return value


def _key(env: TaskEnv) -> str:
    value = env.input.get("key") if isinstance(env.input, Mapping) else None
    if not isinstance(value, str) or not value:
        raise TaskFailure(f"task {env.task.id}: input requires string `key`", code="input.invalid")
    return value


def _memory(env: TaskEnv, *, at_creation: bool = False) -> Any:
    from agentctl.engine.actions.embedding import build_embedder
    from agentctl.memory import LongTermMemory

    embedder = build_embedder(
        _settings(env).get("embedding"), env.spec.get("providers") or {}, environ=env.environ
    )
    clock = FixedClock(env.run_created_at) if at_creation else env.gate.clock
    # The fenced view of the store: memory writes of a run are its owner's writes.
    return LongTermMemory(cast(Any, env.gate.store), clock, embedder)


async def _read(env: TaskEnv, action: Mapping[str, Any]) -> TaskResult:
    namespace, key = _namespace(env), _key(env)
    if env.check:
        return TaskResult(
            {"status": "requires_execution", "changed": False, "namespace": namespace, "key": key}
        )
    spec = EffectSpec.classified(
        "builtin.long_term_memory.read", {"namespace": namespace, "key": key}
    )

    async def dispatch(_effect_id: str) -> Any:
        return await asyncio.to_thread(_memory(env).read, namespace, key)

    return TaskResult(await env.gate.perform(env.attempt, spec, dispatch))


async def _write(env: TaskEnv, action: Mapping[str, Any]) -> TaskResult:
    from agentctl.memory import entry_from_write_arguments

    namespace, key = _namespace(env), _key(env)
    retention = env.input.get("retentionDays", _settings(env).get("retentionDays"))
    try:
        entry = entry_from_write_arguments(env.input)
        prepared = _memory(env, at_creation=True).prepare_write(
            namespace, key, entry, retention_days=retention
        )
    except AgentctlError as exc:
        raise TaskFailure(f"task {env.task.id}: {exc.message}", code=exc.code) from exc
    effect_input = prepared.effect_input()
    if env.check:
        return TaskResult(
            {
                "status": "requires_execution",
                "changed": False,
                "namespace": namespace,
                "key": key,
                "entry": effect_input["entry"],
                "expiresAt": effect_input["expiresAt"],
            }
        )
    spec = EffectSpec.classified("builtin.long_term_memory.write", effect_input)

    async def dispatch(effect_id: str) -> Any:
        provenance = {"runId": env.run_id, "taskId": env.task.id, "effectId": effect_id}
        result = await asyncio.to_thread(_memory(env).write, prepared, provenance=provenance)
        return result.to_json()

    return TaskResult(await env.gate.perform(env.attempt, spec, dispatch))


async def _search(env: TaskEnv, action: Mapping[str, Any]) -> TaskResult:
    from agentctl.memory import SearchQuery

    namespace = _namespace(env)
    arguments = env.input if isinstance(env.input, Mapping) else {}
    try:
        # Only what the task gave: the query's own defaults fill the rest.
        given = {key: arguments[key] for key in ("mode", "limit", "filters") if key in arguments}
        query = SearchQuery.build(namespace, arguments.get("query"), **given)
    except AgentctlError as exc:
        raise TaskFailure(f"task {env.task.id}: {exc.message}", code=exc.code) from exc
    if env.check:
        return TaskResult(
            {"status": "requires_execution", "changed": False, "query": query.to_json()}
        )
    spec = EffectSpec.classified("builtin.long_term_memory.search", query.to_json())

    async def dispatch(_effect_id: str) -> Any:
        result = await asyncio.to_thread(_memory(env).retrieve, query)
        return result.to_json()

    return TaskResult(await env.gate.perform(env.attempt, spec, dispatch))


async def _promote(env: TaskEnv, action: Mapping[str, Any]) -> TaskResult:
    key = _key(env)
    output = env.memory_write(key)
    value = output["after"]
    spec = EffectSpec.classified("builtin.long_term_memory.promote", dict(env.input))

    async def dispatch(_effect_id: str) -> Any:
        return output

    result = output if env.check else await env.gate.perform(env.attempt, spec, dispatch)
    return TaskResult(result, {key: value})


LONG_TERM_BODIES = {
    "builtin.long_term_memory.read": _read,
    "builtin.long_term_memory.write": _write,
    "builtin.long_term_memory.search": _search,
    "builtin.long_term_memory.promote": _promote,
}
