"""One provider HTTP call and what its failures mean for the model effect
(docs/workflow-language.md, docs/retries-and-timeouts.md).

Every HTTP provider posts a JSON body and reads either one JSON document or a stream of
server-sent events. The failure mapping lives here, once:

- HTTP 429 and 5xx, and a refused or timed-out *connect*: the request did not take effect
  (``not_applied``) and may be retried; ``Retry-After`` / ``retry-after-ms`` is kept on the
  error as ``retry_after_seconds``.
- Any other HTTP error status: ``not_applied`` and not retryable (fix the request).
- A read/write timeout, a dropped connection or a stream cut short once the request was
  on the wire: ``uncertain`` — the model may have run, so it is never silently repeated.
- A 2xx answer that is not valid JSON or lacks a field: ``applied`` with
  ``provider.invalid_response`` (see ``agentctl.providers.wire``).

A fresh ``httpx.AsyncClient`` per call keeps a provider instance independent of any one
event loop (the CLI and tests may run several) and means cancellation closes the socket.
``trust_env`` is off: proxies and ``.netrc`` from the process environment must not change
where, or with which credentials, a provider request goes. The clients share one TLS
context, built on first use: building it loads the system's CA certificates, about 14 ms
of CPU that a client of its own would pay on every call (a worker making hundreds of model
calls a second would spend a core on it). The context is the one httpx would build.
"""

from __future__ import annotations

import email.utils
import functools
import json
import math
import ssl
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from agentctl.providers.base import ProviderCallError
from agentctl.providers.wire import invalid_response
from agentctl.redaction import redact

__all__ = [
    "USER_AGENT",
    "HttpTarget",
    "SseEvent",
    "TextSink",
    "parse_retry_after",
    "post_json",
    "post_sse",
    "stream_cut_short",
    "warm_up",
]

USER_AGENT = "agentctl/0.1"
TextSink = Callable[[str], None]
"""Receives each streamed text delta (durable progress streaming hooks in here)."""

_CONNECT_TIMEOUT_CAP = 10.0
_ERROR_DETAIL_CHARS = 300


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The TLS context every provider client uses (what httpx builds for ``verify=True``)."""
    return httpx.create_ssl_context(trust_env=False)


def warm_up() -> None:
    """Build the shared TLS context and load the connection stack httpx loads on its first
    request: a long-running process (a worker) pays for them when it starts, not in its
    first model call while that call's task holds a claim and its batch waits."""
    import httpcore  # noqa: F401 - imported for its side effect (loaded once)

    _tls_context()


@dataclass(frozen=True)
class HttpTarget:
    """Where to post: URL, headers (secret values: kept out of ``repr``), query params.

    ``secrets`` are the raw resolved values behind the headers, redacted from any error
    text the server sends back.
    """

    url: str
    headers: Mapping[str, str] = field(repr=False)
    params: Mapping[str, str] = field(default_factory=dict)
    secrets: tuple[str, ...] = field(default=(), repr=False)


@dataclass(frozen=True)
class SseEvent:
    """One server-sent event: its ``event:`` name (None when absent) and joined data."""

    event: str | None
    data: str


async def post_json(
    provider: str, target: HttpTarget, body: Mapping[str, Any], *, timeout: float
) -> Any:
    """POST ``body`` and return the decoded JSON answer, or raise ``ProviderCallError``."""
    result: list[bytes] = []

    async def consume(response: httpx.Response) -> None:
        result.append(await response.aread())

    await _post(provider, target, body, timeout, consume, accept="application/json")
    try:
        return json.loads(result[0])
    except ValueError as exc:
        raise invalid_response(provider, "(body)", f"response body is not JSON: {exc}") from exc


async def post_sse(
    provider: str,
    target: HttpTarget,
    body: Mapping[str, Any],
    *,
    timeout: float,
    on_event: Callable[[SseEvent], None],
) -> Any:
    """POST ``body`` and feed each server-sent event to ``on_event`` until the stream ends.

    The caller decides whether the stream was complete (it saw its final event) and calls
    ``stream_cut_short`` if not. Some compatible servers ignore ``stream: true`` and answer
    one JSON document: then nothing is fed and the decoded document is returned (``None``
    after a real stream), for the caller to read as a non-streamed answer.
    """
    document: list[Any] = []

    async def consume(response: httpx.Response) -> None:
        content_type = response.headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() == "application/json":
            raw = await response.aread()
            try:
                document.append(json.loads(raw))
            except ValueError as exc:
                raise invalid_response(
                    provider, "(body)", f"response body is not JSON: {exc}"
                ) from exc
            return
        event: str | None = None
        data: list[str] = []
        async for line in response.aiter_lines():
            if line == "":
                if data:
                    on_event(SseEvent(event, "\n".join(data)))
                event, data = None, []
            elif line.startswith(":"):
                continue
            else:
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "event":
                    event = value
                elif name == "data":
                    data.append(value)
        if data:
            on_event(SseEvent(event, "\n".join(data)))

    await _post(provider, target, body, timeout, consume, accept="text/event-stream")
    return document[0] if document else None


def stream_cut_short(provider: str) -> ProviderCallError:
    """The stream ended before its final event: the model may have run to completion."""
    return ProviderCallError(
        f"provider `{provider}`: the event stream ended before the response was complete",
        retryable=False,
        applied="uncertain",
        code="provider.stream_incomplete",
        hint="reconcile the model effect, then resume",
    )


def parse_retry_after(headers: httpx.Headers, *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value
    text = headers.get("retry-after")
    if text is None:
        return None
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        current = time.time() if now is None else now
        return max(0.0, when.timestamp() - current)
    return value if math.isfinite(value) and value >= 0 else None


async def _post(
    provider: str,
    target: HttpTarget,
    body: Mapping[str, Any],
    timeout: float,
    consume: Callable[[httpx.Response], Any],
    *,
    accept: str,
) -> None:
    limits = httpx.Timeout(timeout, connect=min(timeout, _CONNECT_TIMEOUT_CAP))
    headers = {"user-agent": USER_AGENT, "accept": accept, **target.headers}
    try:
        async with (
            httpx.AsyncClient(
                timeout=limits, trust_env=False, follow_redirects=False, verify=_tls_context()
            ) as client,
            client.stream(
                "POST", target.url, json=dict(body), headers=headers, params=dict(target.params)
            ) as response,
        ):
            if response.status_code >= 400:
                await response.aread()
                raise _status_error(
                    provider, response, secrets=(*target.secrets, *target.headers.values())
                )
            if response.status_code >= 300:
                raise ProviderCallError(
                    f"provider `{provider}` answered HTTP {response.status_code} (redirect to "
                    f"{response.headers.get('location', '?')}); redirects are not followed",
                    retryable=False,
                    applied="not_applied",
                    status=response.status_code,
                    code="provider.http_error",
                    hint="set the provider's `endpoint` to the final URL",
                )
            await consume(response)
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
        raise ProviderCallError(
            f"provider `{provider}`: cannot connect to {_origin(target.url)}: {_describe(exc)}",
            retryable=True,
            applied="not_applied",
            status=0,
            code="provider.unreachable",
        ) from exc
    except httpx.TimeoutException as exc:
        raise ProviderCallError(
            f"provider `{provider}` did not answer within {timeout}s after the request was sent",
            retryable=False,
            applied="uncertain",
            status=0,
            code="provider.timeout",
            hint="reconcile the model effect, then resume",
        ) from exc
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        raise ProviderCallError(
            f"provider `{provider}`: invalid endpoint {target.url!r}: {_describe(exc)}",
            retryable=False,
            applied="not_applied",
            status=0,
            code="provider.invalid_endpoint",
        ) from exc
    except httpx.TransportError as exc:
        raise ProviderCallError(
            f"provider `{provider}`: connection lost after the request was sent: {_describe(exc)}",
            retryable=False,
            applied="uncertain",
            status=0,
            code="provider.connection_lost",
            hint="reconcile the model effect, then resume",
        ) from exc


def _status_error(
    provider: str, response: httpx.Response, *, secrets: Iterable[str]
) -> ProviderCallError:
    status = response.status_code
    request_id = response.headers.get("x-request-id") or response.headers.get("request-id")
    # A server may echo what it was sent (a key in a 401 message): never pass that on.
    detail = redact(_error_detail(response.content), secrets)
    suffix = f": {detail}" if detail else ""
    if status == 429 or status >= 500:
        return ProviderCallError(
            f"provider `{provider}` answered HTTP {status}{suffix}",
            retryable=True,
            applied="not_applied",
            status=status,
            request_id=request_id,
            code="provider.rate_limited" if status == 429 else "provider.unavailable",
            retry_after_seconds=parse_retry_after(response.headers),
        )
    code = "provider.unauthorized" if status in (401, 403) else "provider.request_rejected"
    return ProviderCallError(
        f"provider `{provider}` rejected the request with HTTP {status}{suffix}",
        retryable=False,
        applied="not_applied",
        status=status,
        request_id=request_id,
        code=code,
        hint="check the credential" if status in (401, 403) else None,
    )


def _error_detail(content: bytes) -> str:
    """The provider's own error message when the body carries one (OpenAI/Anthropic shape)."""
    try:
        data = json.loads(content)
    except ValueError:
        return content.decode("utf-8", errors="replace").strip()[:_ERROR_DETAIL_CHARS]
    if isinstance(data, Mapping):
        error = data.get("error")
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return str(error["message"])[:_ERROR_DETAIL_CHARS]
        if isinstance(error, str):
            return error[:_ERROR_DETAIL_CHARS]
        if isinstance(data.get("message"), str):
            return str(data["message"])[:_ERROR_DETAIL_CHARS]
    return ""


def _origin(url: str) -> str:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return url
    return f"{parsed.scheme}://{parsed.netloc.decode()}"


def _describe(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
