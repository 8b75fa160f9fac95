"""``a2a.delegate``: hand one message to an A2A peer over the JSON-RPC binding (docs/actions.md,
docs/protocols.md).

Flow: fetch the Agent Card, pick its JSON-RPC interface at the configured protocol version
(same scheme, host and port as the card), send ONE ``SendMessage``, and when the peer answers
with a task, poll ``GetTask`` within ``maxPolls``/``pollIntervalMs`` until the task stops.

Protocol 1.0 (the default) uses the method names ``SendMessage``/``GetTask``/``CancelTask``,
``supportedInterfaces`` on the card, ``ROLE_USER`` and ``TASK_STATE_*`` states; a peer
configured with ``protocolVersion: "0.3"`` gets the older ``message/send``/``tasks/get``/
``tasks/cancel`` names and the card's top-level ``url``. States are compared normalized, so
``TASK_STATE_INPUT_REQUIRED``, ``input-required`` and ``input_required`` are one state.

The ``messageId`` is the idempotency key a peer may use to drop duplicates, but the client
never relies on that: a ``SendMessage`` whose answer was lost (timeout, connection dropped,
gateway 5xx, unreadable body) raises ``OutcomeUnknown`` and is NEVER resent
(docs/durable-execution.md). Failures
before the request left (card unreachable, connection refused) are retryable task failures.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit

from agentctl import tracecontext
from agentctl.signals import OutcomeUnknown, TaskFailure
from agentctl.tools.mcp_transport import MAX_RESPONSE_BYTES, resolve_headers

if TYPE_CHECKING:
    import httpx

__all__ = [
    "FAILED_STATES",
    "RETURNING_STATES",
    "a2a_delegate",
    "a2a_observe",
    "normalize_state",
    "task_state",
]

RETURNING_STATES = frozenset({"completed", "input_required", "auth_required"})
"""Task states that end the delegation successfully (the task object is the output)."""

FAILED_STATES = frozenset({"failed", "rejected", "canceled", "cancelled"})
"""Task states that end the delegation as a failure."""
_METHODS = {
    "1": {"send": "SendMessage", "get": "GetTask", "cancel": "CancelTask"},
    "0": {"send": "message/send", "get": "tasks/get", "cancel": "tasks/cancel"},
}


def normalize_state(state: Any) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` / ``input-required`` -> ``input_required``."""
    text = str(state or "unknown").lower().replace("-", "_")
    return text.removeprefix("task_state_")


async def a2a_delegate(
    peer: Mapping[str, Any],
    message_id: str,
    message: str,
    *,
    environ: Mapping[str, str],
    poll_interval_ms: int | None = None,
    max_polls: int | None = None,
    timeout_seconds: float | None = None,
    on_task: Callable[[Mapping[str, Any]], None] | None = None,
) -> Any:
    """Delegate ``message`` to ``peer`` (a ``spec.a2aPeers`` entry, camelCase keys).

    Returns the peer's direct message object, or the final task object. Unset bounds fall
    back to the peer entry, then to the reference defaults (100 ms, 100 polls, 120 s).
    ``on_task`` is called with the peer's task as soon as the peer answers with one, before
    any poll.
    """
    import httpx

    interval = (poll_interval_ms or int(peer.get("pollIntervalMs") or 100)) / 1000
    polls = max_polls or int(peer.get("maxPolls") or 100)
    timeout = float(timeout_seconds or peer.get("timeoutSeconds") or 120)
    version = str(peer.get("protocolVersion") or "1.0")
    # With telemetry on, the peer receives the W3C trace context of this delegation.
    headers = {"A2A-Version": version, **resolve_headers(peer, environ), **tracecontext.headers()}
    async with httpx.AsyncClient(
        headers=headers, timeout=httpx.Timeout(timeout), follow_redirects=False
    ) as http:
        rpc = _Rpc(http, await _discover(http, peer, version), version)
        reply = await rpc.send(message_id, message)
        if "task" not in reply:
            return reply["message"]
        task = reply["task"]
        if on_task is not None:
            # Before the first poll: from here on, the peer's task can be followed by its id
            # even if this process dies (`agentctl effects continue-remote`).
            on_task(task)
        for _ in range(polls):
            state = normalize_state(task_state(task))
            if state in RETURNING_STATES:
                return task
            if state in FAILED_STATES:
                raise TaskFailure(
                    f"A2A peer task `{task.get('id')}` ended in state `{state}`",
                    code="a2a.task_failed",
                    details={"task": task},
                )
            await asyncio.sleep(interval)
            task = await rpc.get_task(str(task.get("id")))
        state = normalize_state(task_state(task))
        if state in RETURNING_STATES:
            return task
        await rpc.cancel_task(str(task.get("id")))
        raise TaskFailure(
            f"A2A peer task `{task.get('id')}` was still `{state}` after {polls} polls; "
            "it was cancelled",
            code="a2a.poll_exhausted",
            details={"taskId": task.get("id"), "state": state},
        )


async def a2a_observe(
    peer: Mapping[str, Any],
    task_id: str,
    *,
    environ: Mapping[str, str],
    timeout_seconds: float,
    poll_interval_ms: int | None = None,
) -> dict[str, Any]:
    """Follow the peer's task ``task_id`` with ``GetTask`` (``tasks/get`` at 0.3) until it
    stops or ``timeout_seconds`` pass; return the last task object seen.

    Never sends a message: this is how a delegation whose owner died is picked up again
    (docs/protocols.md). The caller reads the state (:func:`task_state`); a peer that cannot
    be asked raises ``TaskFailure`` (card, refusal, RPC error) or ``OutcomeUnknown`` (the
    answer was lost).
    """
    import httpx

    interval = (poll_interval_ms or int(peer.get("pollIntervalMs") or 100)) / 1000
    version = str(peer.get("protocolVersion") or "1.0")
    headers = {"A2A-Version": version, **resolve_headers(peer, environ), **tracecontext.headers()}
    per_request = float(peer.get("timeoutSeconds") or 120)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, timeout_seconds)
    async with httpx.AsyncClient(
        headers=headers,
        timeout=httpx.Timeout(min(per_request, max(timeout_seconds, 1.0))),
        follow_redirects=False,
    ) as http:
        rpc = _Rpc(http, await _discover(http, peer, version), version)
        while True:
            task = await rpc.get_task(task_id)
            state = normalize_state(task_state(task))
            if state in RETURNING_STATES or state in FAILED_STATES:
                return task
            if loop.time() + interval > deadline:
                return task
            await asyncio.sleep(interval)


def task_state(task: Mapping[str, Any]) -> Any:
    """The state a task object reports, as the peer wrote it."""
    status = task.get("status")
    return status.get("state") if isinstance(status, Mapping) else None


async def _discover(http: httpx.AsyncClient, peer: Mapping[str, Any], version: str) -> str:
    """Fetch the Agent Card and return the JSON-RPC endpoint for ``version``."""
    import httpx

    card_url = str(peer.get("cardUrl") or "")
    if not card_url:
        raise TaskFailure("an A2A peer needs `cardUrl`", code="input.invalid")
    try:
        response = await http.get(card_url)
        body = await _bounded_json(response)
    except (httpx.TransportError, _BadBody) as exc:
        raise TaskFailure(
            f"cannot fetch the A2A Agent Card at {card_url}: {exc}",
            code="a2a.unavailable",
            retryable=True,
        ) from exc
    if response.status_code != 200 or not isinstance(body, Mapping):
        raise TaskFailure(
            f"the A2A Agent Card at {card_url} answered HTTP {response.status_code} "
            "without a card object",
            code="a2a.card_invalid",
        )
    endpoint = _jsonrpc_interface(body, version)
    if endpoint is None:
        raise TaskFailure(
            f"the A2A Agent Card at {card_url} advertises no JSON-RPC interface at "
            f"protocol version {version}",
            code="a2a.card_invalid",
        )
    if _origin(endpoint) != _origin(card_url):
        raise TaskFailure(
            f"the A2A JSON-RPC interface {endpoint} is not on the card's origin "
            f"{_origin(card_url)}",
            code="a2a.card_invalid",
        )
    return endpoint


def _jsonrpc_interface(card: Mapping[str, Any], version: str) -> str | None:
    wanted = _major_minor(version)
    candidates: list[Mapping[str, Any]] = [
        entry for entry in card.get("supportedInterfaces") or [] if isinstance(entry, Mapping)
    ]
    if wanted.startswith("0."):
        # 0.3 cards: the main url speaks preferredTransport (JSONRPC when absent).
        main = {
            "url": card.get("url"),
            "protocolBinding": card.get("preferredTransport") or "JSONRPC",
            "protocolVersion": card.get("protocolVersion"),
        }
        extra = [
            {"url": e.get("url"), "protocolBinding": e.get("transport"), "protocolVersion": None}
            for e in card.get("additionalInterfaces") or []
            if isinstance(e, Mapping)
        ]
        candidates = [main, *extra]
    for entry in candidates:
        binding = str(entry.get("protocolBinding") or "").upper().replace("-", "")
        advertised = entry.get("protocolVersion")
        url = entry.get("url")
        if binding != "JSONRPC" or not isinstance(url, str) or not url:
            continue
        if advertised is None or _major_minor(str(advertised)) == wanted:
            return url
    return None


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return (parts.scheme, (parts.hostname or "").lower(), parts.port or default)


class _BadBody(Exception):
    """A response body that is too large or not JSON."""


async def _bounded_json(response: httpx.Response) -> Any:
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_RESPONSE_BYTES:
        raise _BadBody(f"response of {declared} bytes exceeds {MAX_RESPONSE_BYTES}")
    body = response.content
    if len(body) > MAX_RESPONSE_BYTES:
        raise _BadBody(f"response of {len(body)} bytes exceeds {MAX_RESPONSE_BYTES}")
    try:
        return json.loads(body)
    except ValueError as exc:
        raise _BadBody(f"response is not JSON: {exc}") from exc


class _Rpc:
    """JSON-RPC calls on one endpoint, with the ambiguity rule applied per method."""

    def __init__(self, http: httpx.AsyncClient, endpoint: str, version: str) -> None:
        self._http = http
        self._endpoint = endpoint
        self._legacy = _major_minor(version).startswith("0.")
        self._methods = _METHODS["0" if self._legacy else "1"]
        self._next_id = 0

    async def send(self, message_id: str, text: str) -> dict[str, Any]:
        """Send ONE SendMessage; return ``{"task": …}`` or ``{"message": …}``."""
        if self._legacy:
            message: dict[str, Any] = {
                "kind": "message",
                "messageId": message_id,
                "role": "user",
                "parts": [{"kind": "text", "text": text}],
            }
        else:
            message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
        result = await self._call("send", {"message": message}, ambiguous_after_send=True)
        if isinstance(result, Mapping):
            for key in ("task", "message"):
                if isinstance(result.get(key), Mapping):
                    return {key: dict(result[key])}
            if result.get("kind") in ("task", "message"):
                return {str(result["kind"]): dict(result)}
            if isinstance(result.get("status"), Mapping) and "id" in result:
                return {"task": dict(result)}
        # The peer accepted something, but what it did cannot be read from this answer.
        raise OutcomeUnknown(
            "A2A SendMessage was answered with neither a task nor a message",
            details={"messageId": message_id},
        )

    async def get_task(self, task_id: str) -> dict[str, Any]:
        try:
            result = await self._call("get", {"id": task_id}, ambiguous_after_send=True)
        except TaskFailure as failure:
            # The message was delivered: whatever stops the polling, the delegated work may
            # go on, so this is never a plain (retryable) failure that would resend it.
            raise OutcomeUnknown(
                f"A2A task `{task_id}` could not be polled: {failure.message}",
                details={"taskId": task_id, "code": failure.code},
            ) from failure
        if isinstance(result, Mapping) and isinstance(result.get("task"), Mapping):
            result = result["task"]
        if not isinstance(result, Mapping):
            raise OutcomeUnknown(
                f"A2A GetTask for `{task_id}` returned no task object",
                details={"taskId": task_id},
            )
        return dict(result)

    async def cancel_task(self, task_id: str) -> None:
        """Best effort: the delegation fails either way, so a failed cancel is not raised."""
        try:
            await self._call("cancel", {"id": task_id}, ambiguous_after_send=False)
        except TaskFailure:
            return

    async def _call(
        self, method: str, params: dict[str, Any], *, ambiguous_after_send: bool
    ) -> Any:
        import httpx

        self._next_id += 1
        name = self._methods[method]
        payload = {"jsonrpc": "2.0", "id": self._next_id, "method": name, "params": params}
        try:
            response = await self._http.post(self._endpoint, json=payload)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            # The connection was never made, so the request never left.
            raise TaskFailure(
                f"cannot reach A2A peer at {self._endpoint} for {name}: {exc!r}",
                code="a2a.unavailable",
                retryable=True,
            ) from exc
        except httpx.TransportError as exc:
            self._lost(name, params, f"{type(exc).__name__}: {exc}", ambiguous_after_send)
        if response.status_code >= 500:
            self._lost(name, params, f"HTTP {response.status_code}", ambiguous_after_send)
        if response.status_code >= 400:
            raise TaskFailure(
                f"A2A peer refused {name} with HTTP {response.status_code}",
                code="a2a.http_error",
                details={"status": response.status_code},
            )
        try:
            body = await _bounded_json(response)
        except _BadBody as exc:
            self._lost(name, params, str(exc), ambiguous_after_send)
        if not isinstance(body, Mapping):
            self._lost(name, params, "a non-object JSON-RPC response", ambiguous_after_send)
        error = body.get("error")
        if isinstance(error, Mapping):
            raise TaskFailure(
                f"A2A peer answered {name} with error {error.get('code')}: {error.get('message')}",
                code="a2a.rpc_error",
                details={"rpcCode": error.get("code")},
            )
        if "result" not in body:
            self._lost(name, params, "a JSON-RPC response without result", ambiguous_after_send)
        return body["result"]

    def _lost(self, name: str, params: dict[str, Any], why: str, ambiguous: bool) -> NoReturn:
        """The request left and no usable answer came back."""
        if ambiguous:
            raise OutcomeUnknown(
                f"A2A {name} to {self._endpoint} was sent but its answer was lost ({why}); "
                "it is never resent",
                details={"method": name, "ids": _ids_of(params)},
            )
        raise TaskFailure(f"A2A {name} failed: {why}", code="a2a.unavailable")


def _ids_of(params: Mapping[str, Any]) -> dict[str, Any]:
    message = params.get("message")
    if isinstance(message, Mapping):
        return {"messageId": message.get("messageId")}
    return {"taskId": params.get("id")}
