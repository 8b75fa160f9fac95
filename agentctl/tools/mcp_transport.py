"""Opening an MCP connection on the official SDK: transport choice, headers and error shapes.

Shared by :mod:`agentctl.tools.mcp` (calls) and, for secret headers, :mod:`agentctl.tools.a2a`.
Everything from ``mcp``/``httpx2`` is imported inside functions so that importing agentctl (and
``agentctl --help``) never pays for the SDK.

Transport is chosen by the server entry's shape: ``url`` means Streamable HTTP (reference
docs/protocols.md); ``command`` (+ ``args``, ``env``, ``cwd``) means a local server spoken to over
stdio.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agentctl import tracecontext
from agentctl.errors import AgentctlError
from agentctl.extras import installed, missing_extra_error
from agentctl.process import resolve_executable
from agentctl.signals import TaskFailure, as_task_failure

if TYPE_CHECKING:
    from mcp import Client

__all__ = [
    "MAX_RESPONSE_BYTES",
    "leaf_exceptions",
    "open_client",
    "origin_of",
    "resolve_headers",
    "resolve_secret_map",
    "server_label",
]

MAX_RESPONSE_BYTES = 4 * 1024 * 1024
"""Largest response body accepted from a protocol peer (docs/protocols.md)."""

_HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


def resolve_secret_map(refs: Any, environ: Mapping[str, str], *, what: str) -> dict[str, str]:
    """Resolve ``{NAME: reference}`` through the one secret resolver; values never reach a
    message.

    ``environ`` is what the caller lets the peer see (the engine passes the environment
    already filtered by ``policy.environmentAllowlist``); ``{file}`` and ``{process}``
    references follow the current run's policy (:func:`agentctl.policy.secrets.secret_sources`).
    """
    from agentctl.policy.secrets import resolve_secret

    if refs is None:
        return {}
    if not isinstance(refs, Mapping):
        raise TaskFailure(f"{what} must be a map of name to secret reference", code="input.invalid")
    resolved: dict[str, str] = {}
    for name, ref in sorted(refs.items()):
        try:
            secret = resolve_secret(ref, environ=environ, what=f"{what} `{name}`")
        except AgentctlError as exc:
            code = "secret.unsupported" if exc.code == "secret.invalid" else exc.code
            raise TaskFailure(exc.message, code=code) from exc
        resolved[str(name)] = secret.value
    return resolved


def resolve_headers(peer: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    """The peer's ``headers`` map resolved to values (docs/workflow-language.md)."""
    return resolve_secret_map(peer.get("headers"), environ, what="header")


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, sent as the ``Origin`` header (docs/protocols.md)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


def server_label(server: Mapping[str, Any]) -> str:
    """How a server is named in messages: its URL, or its command (never env or headers)."""
    if server.get("url"):
        return str(server["url"])
    return str(server.get("command") or "<unnamed MCP server>")


def leaf_exceptions(error: BaseException) -> Iterator[BaseException]:
    """The non-group exceptions inside ``error`` (anyio task groups wrap transport errors)."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from leaf_exceptions(inner)
    else:
        yield error


def open_client(
    server: Mapping[str, Any],
    *,
    environ: Mapping[str, str],
    timeout_seconds: float,
    process_allowlist: Sequence[str] | None,
) -> Client:
    """Build (not enter) an SDK ``Client`` for ``server``; entering it connects and handshakes.

    Configuration errors (bad secret, executable not allowed) raise ``TaskFailure`` here,
    before anything is contacted; so does a missing MCP SDK (the ``mcp`` extra).
    """
    if not installed("mcp"):
        raise as_task_failure(missing_extra_error("mcp", f"MCP server {server_label(server)}"))
    from mcp import Client, StdioServerParameters

    version = str(server.get("protocolVersion") or "2025-11-25")
    # A handshake-era version is negotiated with `initialize`; a modern one is adopted as is.
    mode = "legacy" if version in _HANDSHAKE_VERSIONS else version
    url = server.get("url")
    target: Any
    if isinstance(url, str) and url:
        target = _http_transport(url, resolve_headers(server, environ), timeout_seconds)
    elif isinstance(server.get("command"), str):
        from mcp.client.stdio import stdio_client

        parameters = _stdio_parameters(server, environ, process_allowlist, StdioServerParameters)
        # The SDK's default for the server's stderr is the sys.stderr of the moment it was
        # imported, which may be a capture without a file descriptor; name a real one.
        target = stdio_client(parameters, errlog=_server_errlog())
    else:
        raise TaskFailure(
            "an MCP server needs `url` (Streamable HTTP) or `command` (stdio)",
            code="input.invalid",
        )
    try:
        return Client(target, mode=mode, cache=None)
    except ValueError as exc:
        raise TaskFailure(
            f"MCP server {server_label(server)}: protocolVersion `{version}` is not spoken "
            f"by this client: {exc}",
            code="mcp.protocol_version",
        ) from exc


def _http_transport(url: str, headers: dict[str, str], timeout_seconds: float) -> Any:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async def refuse_oversized(response: httpx2.Response) -> None:
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_RESPONSE_BYTES:
            raise httpx2.DecodingError(
                f"response of {declared} bytes exceeds the {MAX_RESPONSE_BYTES}-byte limit"
            )

    # With telemetry on, the server receives the W3C trace context of the call.
    all_headers = {"Origin": origin_of(url), **headers, **tracecontext.headers()}
    # The SDK leaves a client it was handed open; it is closed with the transport below.
    http = httpx2.AsyncClient(
        headers=all_headers,
        timeout=httpx2.Timeout(timeout_seconds),
        follow_redirects=False,
        event_hooks={"response": [refuse_oversized]},
    )
    transport = streamable_http_client(url, http_client=http, max_sse_event_size=MAX_RESPONSE_BYTES)
    return _OwnedHttpTransport(transport, http)


class _OwnedHttpTransport:
    """The SDK's Streamable HTTP transport plus the ``httpx2`` client it runs on."""

    def __init__(self, transport: Any, http: Any) -> None:
        self._transport = transport
        self._http = http

    async def __aenter__(self) -> Any:
        await self._http.__aenter__()
        try:
            return await self._transport.__aenter__()
        except BaseException:
            await self._http.aclose()
            raise

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        try:
            result: bool | None = await self._transport.__aexit__(*exc_info)
        finally:
            await self._http.aclose()
        return result


def _server_errlog() -> Any:
    """Where a stdio server's stderr goes: the process's real stderr, else /dev/null."""
    import sys

    stream = sys.__stderr__
    try:
        if stream is not None:
            stream.fileno()
            return stream
    except (OSError, ValueError):
        pass
    return open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process


def _stdio_parameters(
    server: Mapping[str, Any],
    environ: Mapping[str, str],
    process_allowlist: Sequence[str] | None,
    parameters: Any,
) -> Any:
    command = str(server["command"])
    try:
        if process_allowlist is None:
            raise TaskFailure(
                f"MCP server `{command}` runs a local process, which needs the caller's "
                "policy.processAllowlist",
                code="policy.process_not_allowed",
            )
        executable = resolve_executable(command, process_allowlist)
    except AgentctlError as error:
        raise as_task_failure(error) from error
    args = server.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise TaskFailure(f"MCP server `{command}`: args must be strings", code="input.invalid")
    env = tracecontext.with_environment(resolve_secret_map(server.get("env"), environ, what="env"))
    cwd = server.get("cwd")
    return parameters(command=executable, args=list(args), env=env, cwd=cwd)
