from __future__ import annotations

import pytest

from agentctl import errors


@pytest.mark.parametrize(
    ("cls", "code"),
    [
        (errors.UsageError, 2),
        (errors.ValidationError, 2),
        (errors.PausedError, 3),
        (errors.BlockedError, 3),
        (errors.RunFailedError, 4),
        (errors.PersistenceError, 5),
        (errors.NewerSchemaError, 5),
        (errors.NewerFormatError, 5),
        (errors.NotFoundError, 5),
        (errors.ProviderError, 6),
    ],
)
def test_exit_codes_follow_cli_contract(cls: type[errors.AgentctlError], code: int) -> None:
    error = cls("boom", hint="do this")
    assert error.exit_code == code
    assert error.code and error.hint == "do this" and str(error) == "boom"


def test_cancelled_is_not_an_exception() -> None:
    assert not issubclass(errors.Cancelled, Exception)
    assert errors.Cancelled.exit_code == 130
    with pytest.raises(errors.Cancelled):
        try:
            raise errors.Cancelled("sigint")
        except Exception:  # noqa: BLE001 - proving it is not swallowed
            pytest.fail("Cancelled was swallowed by except Exception")


def test_network_allowlist_patterns() -> None:
    from agentctl.engine.core.preflight import host_allowed

    assert host_allowed("api.openai.com", ["api.openai.com"])
    assert host_allowed("eu.api.example.com", ["*.example.com"])
    assert not host_allowed("example.com", ["*.example.com"])  # never the bare suffix
    assert not host_allowed("evilexample.com", ["*.example.com"])
    assert not host_allowed("api.openai.com", [])
