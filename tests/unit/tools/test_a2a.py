"""A2A delegation against a real loopback peer speaking JSON-RPC (protocol 1.0)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from agentctl.signals import OutcomeUnknown, TaskFailure
from agentctl.tools.a2a import a2a_delegate, normalize_state
from tests.fixtures.protocol_servers.a2a_peer import A2APeer


def _delegate(peer: dict[str, Any], text: str, **kwargs: Any) -> Any:
    options: dict[str, Any] = {
        "environ": {},
        "poll_interval_ms": 10,
        "max_polls": 5,
        "timeout_seconds": 2,
    }
    options.update(kwargs)
    return asyncio.run(a2a_delegate(peer, "msg-1", text, **options))


def test_direct_message_reply_is_the_output_and_sends_one_message() -> None:
    with A2APeer() as peer:
        out = _delegate({"cardUrl": peer.card_url}, "direct")
        assert out == {"messageId": "reply-1", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}
        assert peer.methods() == ["SendMessage"]
        sent = peer.requests[0]["params"]["message"]
        assert sent == {"messageId": "msg-1", "role": "ROLE_USER", "parts": [{"text": "direct"}]}
        assert peer.headers[0]["a2a-version"] == "1.0"


def test_task_is_polled_until_completed() -> None:
    with A2APeer() as peer:
        out = _delegate({"cardUrl": peer.card_url}, "task")
        assert out["id"] == "task-task"
        assert out["status"]["state"] == "TASK_STATE_COMPLETED"
        assert peer.methods() == ["SendMessage", "GetTask", "GetTask"]
        assert peer.requests[1]["params"] == {"id": "task-task"}


def test_input_required_returns_without_polling() -> None:
    with A2APeer() as peer:
        out = _delegate({"cardUrl": peer.card_url}, "input")
        assert out["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert peer.methods() == ["SendMessage"]


def test_failed_task_fails_the_delegation() -> None:
    with A2APeer() as peer:
        with pytest.raises(TaskFailure) as caught:
            _delegate({"cardUrl": peer.card_url}, "fail")
        assert caught.value.code == "a2a.task_failed"
        assert "`failed`" in caught.value.message
        assert not caught.value.retryable


def test_exhausted_polls_cancel_the_task_then_fail() -> None:
    with A2APeer() as peer:
        with pytest.raises(TaskFailure) as caught:
            _delegate({"cardUrl": peer.card_url}, "forever", max_polls=3)
        assert caught.value.code == "a2a.poll_exhausted"
        assert peer.methods() == ["SendMessage", "GetTask", "GetTask", "GetTask", "CancelTask"]
        assert peer.requests[-1]["params"] == {"id": "task-forever"}


def test_lost_answer_to_send_message_is_uncertain_and_never_resent() -> None:
    with A2APeer() as peer:
        with pytest.raises(OutcomeUnknown) as caught:
            _delegate({"cardUrl": peer.card_url}, "hang", timeout_seconds=1)
        assert "never resent" in caught.value.message
        assert caught.value.details == {"method": "SendMessage", "ids": {"messageId": "msg-1"}}
        assert peer.methods() == ["SendMessage"]


def test_unreachable_peer_is_a_retryable_failure_before_anything_is_sent() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    with pytest.raises(TaskFailure) as caught:
        _delegate({"cardUrl": f"http://127.0.0.1:{port}/.well-known/agent-card.json"}, "x")
    assert caught.value.code == "a2a.unavailable"
    assert caught.value.retryable


def test_interface_on_another_origin_is_refused() -> None:
    with A2APeer(interface_url="http://127.0.0.2:9/rpc") as peer:
        with pytest.raises(TaskFailure) as caught:
            _delegate({"cardUrl": peer.card_url}, "direct")
        assert caught.value.code == "a2a.card_invalid"
        assert peer.methods() == []


def test_wrong_protocol_version_finds_no_interface() -> None:
    with A2APeer() as peer:
        with pytest.raises(TaskFailure) as caught:
            _delegate({"cardUrl": peer.card_url, "protocolVersion": "2.0"}, "direct")
        assert caught.value.code == "a2a.card_invalid"
        assert "protocol version 2.0" in caught.value.message


def test_header_secrets_are_sent_by_reference_and_missing_ones_fail_first() -> None:
    with A2APeer() as peer:
        config = {"cardUrl": peer.card_url, "headers": {"Authorization": {"env": "PEER_TOKEN"}}}
        _delegate(config, "direct", environ={"PEER_TOKEN": "Bearer s3cret\n"})
        assert peer.headers[0]["authorization"] == "Bearer s3cret"
        with pytest.raises(TaskFailure) as caught:
            _delegate(config, "direct", environ={})
        assert caught.value.code == "secret.unresolved"
        assert "PEER_TOKEN" in caught.value.message
        assert peer.methods() == ["SendMessage"]


def test_state_names_are_normalized_across_protocol_versions() -> None:
    assert normalize_state("TASK_STATE_INPUT_REQUIRED") == "input_required"
    assert normalize_state("input-required") == "input_required"
    assert normalize_state("auth-required") == "auth_required"
    assert normalize_state(None) == "unknown"


def test_protocol_0_3_peer_gets_the_older_method_names_and_shapes() -> None:
    with A2APeer(legacy=True) as peer:
        config = {"cardUrl": peer.card_url, "protocolVersion": "0.3"}
        out = _delegate(config, "task")
        assert out["kind"] == "task"
        assert out["status"]["state"] == "completed"
        assert peer.methods() == ["message/send", "tasks/get", "tasks/get"]
        sent = peer.requests[0]["params"]["message"]
        assert sent["role"] == "user"
        assert sent["parts"] == [{"kind": "text", "text": "task"}]
        assert _delegate(config, "input")["status"]["state"] == "input-required"


def test_http_4xx_refusal_of_send_message_is_a_definite_failure() -> None:
    with A2APeer(deny=True) as peer:
        with pytest.raises(TaskFailure) as caught:
            _delegate({"cardUrl": peer.card_url}, "direct")
        assert caught.value.code == "a2a.http_error"
        assert caught.value.details == {"status": 401}
        assert peer.methods() == ["SendMessage"]


def test_the_accepted_task_is_announced_before_the_first_poll() -> None:
    with A2APeer() as peer:
        seen: list[tuple[str, list[str]]] = []
        _delegate(
            {"cardUrl": peer.card_url},
            "task",
            on_task=lambda task: seen.append((str(task["id"]), peer.methods())),
        )
        assert seen == [("task-task", ["SendMessage"])]


def test_observing_a_task_never_sends_a_message() -> None:
    from agentctl.tools.a2a import a2a_observe

    with A2APeer(legacy=True) as peer:
        with pytest.raises(TaskFailure):  # a delegation that gave up on a working task
            _delegate({"cardUrl": peer.card_url, "protocolVersion": "0.3"}, "hold", max_polls=1)
        # Still working when the time is up: the last task seen is returned.
        entry = {"cardUrl": peer.card_url, "protocolVersion": "0.3", "pollIntervalMs": 10}
        working = asyncio.run(a2a_observe(entry, "task-hold", environ={}, timeout_seconds=0.05))
        assert normalize_state(working["status"]["state"]) == "working"
        peer.release()
        done = asyncio.run(a2a_observe(entry, "task-hold", environ={}, timeout_seconds=2))
        assert normalize_state(done["status"]["state"]) == "completed"
        methods = peer.methods()
        assert methods.count("message/send") == 1
        assert set(methods) == {"message/send", "tasks/get", "tasks/cancel"}
