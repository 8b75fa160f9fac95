"""``mcp.call``: call one tool on an MCP server through the official SDK (docs/actions.md,
docs/protocols.md).

Where a failure happens decides what it means for the effect (docs/durable-execution.md):

- Before ``tools/call`` was handed to the transport (server not reachable, process would not
  start, handshake failed or timed out) nothing was sent: ``TaskFailure``, retryable when the
  cause is transient (the connection), so the task retry policy may try again.
- After it was sent, a lost connection or a timeout leaves the outcome unknown. Calls declared
  ``pure``/``idempotent``/``keyed`` are safe to repeat, so they reconnect and resend exactly
  once; if that also ends without an answer the task fails (repeating is harmless, so the
  effect need not block the run). Every other call raises ``OutcomeUnknown`` and is never
  resent: the effect becomes ``uncertain`` until an operator reconciles it.
- An answer is never ambiguous: a result with ``isError`` fails the task
  (``mcp.tool_error``), and a JSON-RPC error that rejects the request (bad params, unknown
  method) fails it with ``mcp.protocol_error``.

Server-supplied schemas and annotations are returned as data only; they grant nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TypeVar, cast

from agentctl.signals import OutcomeUnknown, TaskFailure
from agentctl.tools.mcp_transport import leaf_exceptions, open_client, server_label

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["REPEATABLE_IDEMPOTENCY", "call_mcp_tool", "list_mcp_tools"]

REPEATABLE_IDEMPOTENCY = frozenset({"pure", "idempotent", "keyed"})
"""Declared idempotency values for which one reconnect-and-resend is allowed
(docs/durable-execution.md)."""

# JSON-RPC errors that say the request was rejected before the tool ran.
_REJECTION_CODES = frozenset({-32700, -32600, -32601, -32602})
# Errors the SDK synthesizes for a dead connection or a timeout, not answers from the server.
_TRANSPORT_CODES = frozenset({-32000, -32001})

# Failures of the connection phase, raised before any tools/call was sent.
_CONNECT_CODES = frozenset({"mcp.unavailable", "mcp.handshake_failed", "mcp.protocol_version"})

_Failure = Literal["timeout", "connection_lost"]
_T = TypeVar("_T")


class _Ambiguous(Exception):
    """The call was sent and no answer came back; ``kind`` says why."""

    def __init__(self, kind: _Failure, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


async def call_mcp_tool(
    server: Mapping[str, Any],
    tool: str,
    arguments: Mapping[str, Any],
    *,
    idempotency: str,
    environ: Mapping[str, str],
    timeout_seconds: float,
    process_allowlist: Sequence[str] | None = None,
) -> Any:
    """Call ``tool`` on ``server`` (a ``spec.mcpServers`` entry, camelCase keys).

    Returns the result's ``structuredContent`` when present, else its ``content`` list (or
    ``None``). ``timeout_seconds`` bounds the connection handshake and the call separately.
    ``process_allowlist`` (``policy.processAllowlist``) is required for stdio servers.
    """
    label = server_label(server)
    attempts = 2 if idempotency in REPEATABLE_IDEMPOTENCY else 1
    last: _Ambiguous | None = None
    for attempt in range(1, attempts + 1):
        client = open_client(
            server,
            environ=environ,
            timeout_seconds=timeout_seconds,
            process_allowlist=process_allowlist,
        )
        try:
            return await _call_once(client, server, tool, dict(arguments), timeout_seconds)
        except _Ambiguous as ambiguous:
            last = ambiguous
        except TaskFailure as failure:
            if last is None or failure.code not in _CONNECT_CODES:
                raise
            # The reconnect for a repeatable call could not even be made: the first call's
            # outcome stays unknown, but repeating it later is as safe as it was now.
            raise TaskFailure(
                f"MCP tool `{tool}` on {label}: {last.detail}; the single reconnect failed: "
                f"{failure.message}",
                code=f"mcp.{last.kind}",
                details={"attempts": attempt, "idempotency": idempotency},
            ) from failure
    assert last is not None
    if attempts == 1:
        raise OutcomeUnknown(
            f"MCP tool `{tool}` on {label}: {last.detail} after the request was sent; "
            f"idempotency `{idempotency}` forbids resending it",
            details={"kind": last.kind, "tool": tool, "idempotency": idempotency},
        )
    raise TaskFailure(
        f"MCP tool `{tool}` on {label}: {last.detail}, also after one reconnect",
        code=f"mcp.{last.kind}",
        details={"attempts": attempts, "idempotency": idempotency},
    )


async def list_mcp_tools(
    server: Mapping[str, Any],
    *,
    environ: Mapping[str, str],
    timeout_seconds: float,
    process_allowlist: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """The server's tools as ``{name, description, inputSchema}`` (at most 100 pages).

    Listing has no effect on the server, so a timeout or lost connection is a retryable
    ``TaskFailure`` rather than an unknown outcome.
    """
    client = open_client(
        server,
        environ=environ,
        timeout_seconds=timeout_seconds,
        process_allowlist=process_allowlist,
    )

    async def list_all(session: Client) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(100):
            page = await session.list_tools(cursor=cursor)
            tools.extend(
                {
                    "name": entry.name,
                    "description": entry.description or "",
                    "inputSchema": dict(entry.input_schema),
                }
                for entry in page.tools
            )
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    try:
        return await _with_client(client, server, "tools/list", timeout_seconds, list_all)
    except _Ambiguous as ambiguous:
        raise TaskFailure(
            f"MCP server {server_label(server)}: tools/list failed: {ambiguous.detail}",
            code=f"mcp.{ambiguous.kind}",
            retryable=True,
        ) from ambiguous


async def _call_once(
    client: Client,
    server: Mapping[str, Any],
    tool: str,
    arguments: dict[str, Any],
    timeout_seconds: float,
) -> Any:
    async def call(session: Client) -> Any:
        return await session.call_tool(tool, arguments)

    result = await _with_client(client, server, f"`{tool}`", timeout_seconds, call)
    return _result_value(result, tool, server)


async def _with_client(
    client: Client,
    server: Mapping[str, Any],
    what: str,
    timeout_seconds: float,
    operation: Callable[[Client], Awaitable[_T]],
) -> _T:
    """Connect, check the negotiated version, run ``operation`` once, disconnect.

    One cancel scope spans the whole client context (the SDK's task groups must nest inside
    it); its deadline restarts when the request is handed over, so the handshake and the
    request each get ``timeout_seconds``. ``phase`` records how far we got, which is what
    decides whether a failure is "nothing sent" or "outcome unknown".
    """
    import anyio

    label = server_label(server)
    phase: Literal["connect", "sent", "answered"] = "connect"
    result: Any = None
    try:
        with anyio.CancelScope(deadline=anyio.current_time() + timeout_seconds) as scope:
            async with client:
                _check_version(client, server)
                phase = "sent"
                scope.deadline = anyio.current_time() + timeout_seconds
                result = await operation(client)
                phase = "answered"
    except Exception as exc:
        for leaf in leaf_exceptions(exc):
            if isinstance(leaf, TaskFailure | _Ambiguous):
                raise leaf from exc
        if phase == "connect":
            _raise_connect_error(exc, label)
        if phase == "sent":
            _raise_call_error(exc, what, server)
        # Answered: an error while closing the session does not change the answer.
    if phase == "connect":
        raise TaskFailure(
            f"MCP server {label} did not complete the handshake within {timeout_seconds:g}s",
            code="mcp.unavailable",
            retryable=True,
        )
    if phase == "sent" and scope.cancelled_caught:
        raise _Ambiguous("timeout", f"no answer within {timeout_seconds:g}s")
    return cast(_T, result)


def _raise_connect_error(exc: Exception, label: str) -> NoReturn:
    """Nothing was sent yet. The server refusing the handshake (an HTTP or JSON-RPC error,
    such as a rejected credential) will refuse again; a transport failure may not."""
    from mcp import MCPError

    refused = any(
        isinstance(leaf, MCPError) and leaf.error.code not in _TRANSPORT_CODES
        for leaf in leaf_exceptions(exc)
    )
    what = f"MCP server {label} refused the handshake" if refused else f"cannot reach {label}"
    raise TaskFailure(
        f"{what}: {_describe(exc)}",
        code="mcp.handshake_failed" if refused else "mcp.unavailable",
        retryable=not refused,
    ) from exc


def _check_version(client: Client, server: Mapping[str, Any]) -> None:
    wanted = str(server.get("protocolVersion") or "2025-11-25")
    negotiated = client.protocol_version
    if negotiated != wanted:
        raise TaskFailure(
            f"MCP server {server_label(server)} negotiated protocol version `{negotiated}`, "
            f"but `{wanted}` is the only one configured",
            code="mcp.protocol_version",
        )


def _raise_call_error(exc: Exception, what: str, server: Mapping[str, Any]) -> NoReturn:
    """Classify an exception raised by ``tools/call``: a rejection, or an ambiguous loss."""
    from mcp import MCPError

    for leaf in leaf_exceptions(exc):
        if isinstance(leaf, MCPError) and leaf.error.code in _REJECTION_CODES:
            raise TaskFailure(
                f"MCP server {server_label(server)} rejected {what}: {leaf.error.message}",
                code="mcp.protocol_error",
                details={"rpcCode": leaf.error.code},
            ) from exc
    timed_out = any(
        isinstance(leaf, MCPError) and leaf.error.code == -32001 for leaf in leaf_exceptions(exc)
    )
    if timed_out:
        raise _Ambiguous("timeout", f"the request timed out ({_describe(exc)})") from exc
    raise _Ambiguous("connection_lost", f"connection lost ({_describe(exc)})") from exc


def _result_value(result: Any, tool: str, server: Mapping[str, Any]) -> Any:
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    content = dumped.get("content")
    if dumped.get("isError"):
        texts = [
            str(block.get("text"))
            for block in content or []
            if isinstance(block, dict) and block.get("type") == "text"
        ]
        remote = "; ".join(texts) or "no error text"
        raise TaskFailure(
            f"MCP tool `{tool}` on {server_label(server)} returned an error: {remote}",
            code="mcp.tool_error",
            details={"content": content},
        )
    if dumped.get("structuredContent") is not None:
        return dumped["structuredContent"]
    return content


def _describe(exc: BaseException) -> str:
    leaves = leaf_exceptions(exc)
    return "; ".join(f"{type(leaf).__name__}: {leaf}".rstrip(": ") for leaf in leaves)
