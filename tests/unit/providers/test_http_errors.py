"""Failure semantics shared by every HTTP provider, over real loopback sockets
(docs/retries-and-timeouts.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from agentctl.providers.base import Provider, ProviderCallError
from agentctl.providers.http import parse_retry_after
from agentctl.providers.registry import build_provider
from tests.fixtures.llm_servers.anthropic_wire import message_body
from tests.fixtures.llm_servers.model_requests import call, model_request
from tests.fixtures.llm_servers.openai_wire import chat_body, responses_body
from tests.fixtures.llm_servers.server import (
    Drop,
    Hang,
    JsonReply,
    LoopbackServer,
    RawReply,
    unused_port,
)

ENV = {"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "ak-test"}

# (label, provider definition for a base URL, a valid body, a body missing a field, its path)
FORMATS: list[tuple[str, Callable[[str], dict[str, Any]], Any, Any, str]] = [
    (
        "responses",
        lambda base: {"kind": "openai", "endpoint": f"{base}/v1/responses"},
        responses_body(text="hi"),
        {**responses_body(text="hi"), "output": [{"type": "function_call", "name": "x"}]},
        "output[0].call_id",
    ),
    (
        "chat",
        lambda base: {"kind": "openai", "endpoint": f"{base}/v1/chat/completions"},
        chat_body(text="hi"),
        {**chat_body(text="hi"), "choices": [{"index": 0, "finish_reason": "stop"}]},
        "choices[0].message",
    ),
    (
        "anthropic",
        lambda base: {"kind": "anthropic", "endpoint": f"{base}/v1/messages"},
        message_body(text="hi"),
        {**message_body(text="hi"), "content": [{"type": "text"}]},
        "content[0].text",
    ),
]
IDS = [entry[0] for entry in FORMATS]


def _provider(definition: dict[str, Any]) -> Provider:
    return build_provider("llm", definition, environ=ENV)


def _error(server_reply: Any, make: Callable[[str], dict[str, Any]], **kw: Any) -> Any:
    with LoopbackServer() as server:
        server.script(server_reply)
        provider = _provider(make(f"http://127.0.0.1:{server.port}"))
        with pytest.raises(ProviderCallError) as caught:
            call(provider, model_request(**kw))
    return caught.value


@pytest.mark.parametrize(("label", "make", "good", "bad", "path"), FORMATS, ids=IDS)
def test_valid_reply_parses(label: str, make: Any, good: Any, bad: Any, path: str) -> None:
    with LoopbackServer() as server:
        server.script(JsonReply(good))
        response = call(_provider(make(f"http://127.0.0.1:{server.port}")), model_request())
    assert response.text == "hi"
    assert response.finish_reason == "complete"


@pytest.mark.parametrize(("label", "make", "good", "bad", "path"), FORMATS, ids=IDS)
def test_429_is_retryable_not_applied_with_retry_after(
    label: str, make: Any, good: Any, bad: Any, path: str
) -> None:
    reply = JsonReply(
        {"error": {"message": "slow down", "type": "rate_limit"}},
        status=429,
        headers={"retry-after": "7", "x-request-id": "req-429"},
    )
    error = _error(reply, make)
    assert (error.retryable, error.applied, error.status) == (True, "not_applied", 429)
    assert error.code == "provider.rate_limited"
    assert error.retry_after_seconds == 7.0
    assert error.request_id == "req-429"
    assert "slow down" in error.message


@pytest.mark.parametrize(("label", "make", "good", "bad", "path"), FORMATS, ids=IDS)
def test_500_is_retryable_not_applied(
    label: str, make: Any, good: Any, bad: Any, path: str
) -> None:
    error = _error(JsonReply({"error": {"message": "boom"}}, status=500), make)
    assert (error.retryable, error.applied, error.status) == (True, "not_applied", 500)
    assert error.code == "provider.unavailable"
    assert error.retry_after_seconds is None


@pytest.mark.parametrize(("label", "make", "good", "bad", "path"), FORMATS, ids=IDS)
def test_400_is_not_retryable(label: str, make: Any, good: Any, bad: Any, path: str) -> None:
    error = _error(JsonReply({"error": {"message": "bad schema"}}, status=400), make)
    assert (error.retryable, error.applied, error.status) == (False, "not_applied", 400)
    assert error.code == "provider.request_rejected"
    assert "bad schema" in error.message


def test_401_names_the_credential() -> None:
    error = _error(JsonReply({"error": {"message": "no"}}, status=401), FORMATS[0][1])
    assert (error.retryable, error.code, error.hint) == (
        False,
        "provider.unauthorized",
        "check the credential",
    )


@pytest.mark.parametrize(("label", "make", "good", "bad", "path"), FORMATS, ids=IDS)
def test_connection_refused_is_retryable_not_applied(
    label: str, make: Any, good: Any, bad: Any, path: str
) -> None:
    provider = _provider(make(f"http://127.0.0.1:{unused_port()}"))
    with pytest.raises(ProviderCallError) as caught:
        call(provider, model_request())
    error = caught.value
    assert (error.retryable, error.applied, error.status) == (True, "not_applied", 0)
    assert error.code == "provider.unreachable"


@pytest.mark.parametrize(("label", "make", "good", "bad", "path"), FORMATS, ids=IDS)
def test_server_that_hangs_after_reading_makes_the_call_uncertain(
    label: str, make: Any, good: Any, bad: Any, path: str
) -> None:
    started = time.monotonic()
    error = _error(Hang(), make, timeout_seconds=0.3)
    assert time.monotonic() - started < 5
    assert (error.retryable, error.applied, error.code) == (False, "uncertain", "provider.timeout")


@pytest.mark.parametrize(("label", "make", "good", "bad", "path"), FORMATS, ids=IDS)
def test_connection_dropped_after_sending_is_uncertain(
    label: str, make: Any, good: Any, bad: Any, path: str
) -> None:
    error = _error(Drop(), make)
    assert (error.retryable, error.applied) == (False, "uncertain")
    assert error.code == "provider.connection_lost"


@pytest.mark.parametrize(("label", "make", "good", "bad", "path"), FORMATS, ids=IDS)
def test_malformed_json_is_an_invalid_response(
    label: str, make: Any, good: Any, bad: Any, path: str
) -> None:
    error = _error(RawReply(b'{"id": "x", "output": ['), make)
    assert error.code == "provider.invalid_response"
    assert (error.retryable, error.applied) == (False, "applied")
    assert "`(body)` response body is not JSON" in error.message


@pytest.mark.parametrize(("label", "make", "good", "bad", "path"), FORMATS, ids=IDS)
def test_missing_field_is_named(label: str, make: Any, good: Any, bad: Any, path: str) -> None:
    error = _error(JsonReply(bad), make)
    assert error.code == "provider.invalid_response"
    assert f"`{path}`" in error.message


def test_retry_after_forms() -> None:
    assert parse_retry_after(httpx.Headers({"retry-after": "2.5"})) == 2.5
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "1500", "retry-after": "9"})) == 1.5
    date = "Sun, 29 Nov 2026 17:00:10 GMT"
    now = 1795971600.0  # 2026-11-29T17:00:00Z
    assert parse_retry_after(httpx.Headers({"retry-after": date}), now=now) == 10.0
    assert parse_retry_after(httpx.Headers({"retry-after": "soon"})) is None
    assert parse_retry_after(httpx.Headers({"retry-after": "-3"})) is None
    assert parse_retry_after(httpx.Headers({})) is None


def test_redirects_are_not_followed() -> None:
    reply = JsonReply({}, status=307, headers={"location": "http://elsewhere.invalid/"})
    error = _error(reply, FORMATS[0][1])
    assert (error.status, error.retryable, error.applied) == (307, False, "not_applied")
    assert "elsewhere.invalid" in error.message
