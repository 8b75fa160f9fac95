"""Building providers from entries: kinds, credentials, headers, capabilities, descriptions."""

from __future__ import annotations

import hashlib
import sys
from typing import Any

import pytest

from agentctl.errors import EXIT_PROVIDER, ProviderError
from agentctl.providers.anthropic import AnthropicProvider
from agentctl.providers.command import CommandProvider
from agentctl.providers.credentials import resolve_secret
from agentctl.providers.fake import FakeProvider
from agentctl.providers.openai import OpenAIChatProvider, OpenAIResponsesProvider
from agentctl.providers.registry import build_provider, describe_provider
from agentctl.spec.capabilities import PROVIDER_CAPABILITIES
from tests.fixtures.llm_servers.model_requests import call, model_request
from tests.fixtures.llm_servers.openai_wire import responses_body
from tests.fixtures.llm_servers.server import JsonReply, LoopbackServer


def _sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


@pytest.mark.parametrize(
    ("definition", "cls"),
    [
        ({"kind": "fake"}, FakeProvider),
        ({"kind": "openai"}, OpenAIResponsesProvider),
        (
            {"kind": "openai", "endpoint": "http://h.example/v1/chat/completions"},
            OpenAIChatProvider,
        ),
        (
            {"kind": "azure_openai", "endpoint": "https://x.example/openai/v1/responses"},
            OpenAIResponsesProvider,
        ),
        ({"kind": "anthropic"}, AnthropicProvider),
        ({"kind": "command", "command": "llm"}, CommandProvider),
    ],
)
def test_each_kind_builds_with_its_capabilities(definition: dict[str, Any], cls: type) -> None:
    environ = {"OPENAI_API_KEY": "a", "AZURE_OPENAI_API_KEY": "b", "ANTHROPIC_API_KEY": "c"}
    provider = build_provider("p", definition, environ=environ)
    assert isinstance(provider, cls)
    assert provider.kind == definition["kind"]
    expected = PROVIDER_CAPABILITIES[definition["kind"]]
    if cls is OpenAIChatProvider:
        expected = expected - {"persisted_reasoning", "response_storage"}
    assert provider.capabilities == expected


def test_existing_call_signature_still_builds_the_fake() -> None:
    provider = build_provider("f", {"kind": "fake"})
    assert isinstance(provider, FakeProvider)
    assert call(provider, model_request("f", options={"finalText": "ok"})).text == "ok"


def test_unknown_kinds_fail_clearly() -> None:
    with pytest.raises(ProviderError) as caught:
        build_provider("x", {"kind": "mystery"}, environ={})
    assert caught.value.code == "provider.unknown_kind"


@pytest.mark.parametrize(
    ("definition", "environ", "variable"),
    [
        ({"kind": "openai"}, {}, "OPENAI_API_KEY"),
        ({"kind": "anthropic"}, {"ANTHROPIC_API_KEY": "\n"}, "ANTHROPIC_API_KEY"),
        ({"kind": "openai", "credential": {"env": "MY_KEY"}}, {"OPENAI_API_KEY": "x"}, "MY_KEY"),
        (
            {"kind": "azure_openai", "endpoint": "https://a.example/openai/v1/responses"},
            {},
            "AZURE_OPENAI_API_KEY",
        ),
        # An explicit credential is required even on loopback.
        (
            {
                "kind": "openai",
                "endpoint": "http://127.0.0.1:9/v1/chat/completions",
                "credential": {"env": "K"},
            },
            {},
            "K",
        ),
    ],
)
def test_missing_credential_is_a_provider_error(
    definition: dict[str, Any], environ: dict[str, str], variable: str
) -> None:
    with pytest.raises(ProviderError) as caught:
        build_provider("p", definition, environ=environ)
    assert caught.value.code == "provider.credential_missing"
    assert caught.value.exit_code == EXIT_PROVIDER
    assert f"`{variable}`" in caught.value.message


def test_unsupported_and_invalid_secret_references() -> None:
    from agentctl.errors import PolicyDeniedError

    # {file} references resolve only under policy.secretFileRoots (none here): a policy error.
    with pytest.raises(PolicyDeniedError) as denied:
        build_provider("p", {"kind": "openai", "credential": {"file": "/k"}}, environ={})
    assert denied.value.code == "policy.secret_file"
    # {process} references run only allow-listed executables (none here): a policy error.
    with pytest.raises(PolicyDeniedError) as refused:
        build_provider(
            "p", {"kind": "openai", "credential": {"process": {"command": "x"}}}, environ={}
        )
    assert refused.value.code == "policy.secret_process"
    with pytest.raises(ProviderError) as caught:
        build_provider("p", {"kind": "openai", "credential": {"env": "1BAD"}}, environ={})
    assert caught.value.code == "provider.credential_invalid"


def test_secret_value_strips_one_newline_and_never_reprs() -> None:
    secret = resolve_secret(
        {"env": "K"}, environ={"K": "v4lue\r\n"}, purpose="credential", provider="p"
    )
    assert secret.value == "v4lue"
    assert "v4lue" not in repr(secret)
    assert secret.describe().to_json() == {"source": "env:K", "sha256": _sha("v4lue")}


def test_custom_headers_are_sent_but_auth_headers_win() -> None:
    environ = {"OPENAI_API_KEY": "sk-real", "ORG": "org-7", "FAKE_AUTH": "Bearer nope"}
    with LoopbackServer() as server:
        server.script(JsonReply(responses_body(text="ok")))
        provider = build_provider(
            "p",
            {
                "kind": "openai",
                "endpoint": server.url("/v1/responses"),
                "headers": {
                    "OpenAI-Organization": {"env": "ORG"},
                    "Authorization": {"env": "FAKE_AUTH"},
                },
            },
            environ=environ,
        )
        call(provider, model_request("p"))
    headers = server.requests[0].headers
    assert headers["openai-organization"] == "org-7"
    assert headers["authorization"] == "Bearer sk-real"


def test_describe_shows_sources_and_digests_never_values() -> None:
    environ = {"OPENAI_API_KEY": "sk-very-secret", "ORG": "org-secret"}
    described = describe_provider(
        "p",
        {"kind": "openai", "headers": {"OpenAI-Organization": {"env": "ORG"}}},
        environ=environ,
    )
    assert described["credential"] == {
        "source": "env:OPENAI_API_KEY",
        "sha256": _sha("sk-very-secret"),
    }
    assert described["headers"] == {
        "OpenAI-Organization": {"source": "env:ORG", "sha256": _sha("org-secret")}
    }
    assert (described["kind"], described["api"]) == ("openai", "responses")
    assert described["endpoint"] == "https://api.openai.com/v1/responses"
    assert "sk-very-secret" not in repr(described) and "org-secret" not in repr(described)
    assert "sk-very-secret" not in repr(
        build_provider("p", {"kind": "openai"}, environ=environ).endpoint
    )


def test_describe_command_provider() -> None:
    described = describe_provider(
        "cli",
        {"kind": "command", "command": "llm", "env": {"TOKEN": {"env": "T"}}, "promptVia": "argv"},
        environ={"T": "tok"},
    )
    assert described["command"] == "llm"
    assert described["promptVia"] == "argv"
    assert described["env"] == {"TOKEN": {"source": "env:T", "sha256": _sha("tok")}}
    assert described["capabilities"] == ["cancellation", "text", "usage"]


def test_importing_the_registry_does_not_import_httpx() -> None:
    import subprocess

    code = "import sys, agentctl.providers.registry\nprint('httpx' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_http_entries_dumped_from_the_spec_model_build() -> None:
    from agentctl.spec.models_definitions import Provider

    for raw in (
        {"kind": "openai"},
        {"kind": "anthropic", "credential": {"env": "ANTHROPIC_API_KEY"}},
        {"kind": "azure_openai", "endpoint": "https://a.example/openai/v1/responses"},
    ):
        entry = Provider.model_validate(raw).model_dump(mode="json", by_alias=True)
        environ = {"OPENAI_API_KEY": "a", "ANTHROPIC_API_KEY": "b", "AZURE_OPENAI_API_KEY": "c"}
        described = describe_provider("p", entry, environ=environ)
        assert described["kind"] == raw["kind"]
        assert described["credential"]["source"].startswith("env:")
