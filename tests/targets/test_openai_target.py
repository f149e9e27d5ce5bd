"""The openai target against the mock server over real HTTP: retries, Retry-After, failures."""

from __future__ import annotations

import asyncio
import socket

import pytest

from assay.errors import TargetFailure
from assay.spec import OpenAITarget
from assay.spec.dataset import Item
from assay.targets import OpenAIChatTarget

ITEM = Item(item_id="a", item_index=0, input="What is 1 + 1?", expected="2", fields={"q": "What is 1 + 1?"})


def call(base_url: str, item: Item = ITEM, **spec: object):
    target = OpenAIChatTarget(
        OpenAITarget(kind="openai", base_url=base_url, model="mock-1", prompt="{q}", **spec),
        concurrency=4,
        seed=7,
    )

    async def go():
        try:
            return await target(item, 0)
        finally:
            await target.aclose()

    return asyncio.run(go())


def test_request_body_and_usage(mock):
    mock.configure(answers={"What is 1 + 1?": "2"})
    result = call(mock.base_url, system="Answer with a number.", temperature=0.0, max_tokens=5)
    assert result.output == "2" and result.retries == 0 and result.retry_ms < 50
    assert result.usage.input_tokens == 9 and result.usage.output_tokens == 1
    body = mock.stats()["bodies"][-1]
    assert body["messages"] == [
        {"role": "system", "content": "Answer with a number."},
        {"role": "user", "content": "What is 1 + 1?"},
    ]
    assert body["temperature"] == 0.0 and body["max_tokens"] == 5 and body["seed"] == 7


def test_429_honours_retry_after_then_succeeds(mock):
    mock.configure(faults=[{"status": 429, "times": 2, "retry_after": 0.3}])
    result = call(mock.base_url)
    assert result.retries == 2
    assert result.retry_ms >= 600, "two Retry-After waits of 0.3 s each"
    assert mock.stats()["requests"] == 3


def test_500_retried_with_backoff(mock):
    mock.configure(faults=[{"status": 500, "times": 1}, {"status": 503, "times": 1}])
    result = call(mock.base_url)
    assert result.retries == 2 and result.output == "What is 1 + 1?"


def test_retries_run_out_into_a_failure_description(mock):
    mock.configure(faults=[{"status": 503, "times": -1, "retry_after": 0}])
    with pytest.raises(TargetFailure) as caught:
        call(mock.base_url, max_retries=2)
    failure = caught.value
    assert failure.http_status == 503 and failure.retryable is True and failure.kind == "http"
    assert failure.request_id.startswith("req_") and failure.provider.startswith("openai:127.0.0.1:")
    assert mock.stats()["requests"] == 3, "the first attempt and two retries"


def test_non_retryable_status_fails_at_once(mock):
    mock.configure(faults=[{"status": 401, "times": 1}])
    with pytest.raises(TargetFailure) as caught:
        call(mock.base_url)
    assert caught.value.http_status == 401 and caught.value.retryable is False
    assert mock.stats()["requests"] == 1


def test_slow_reply_times_out_and_is_retried(mock):
    mock.configure(faults=[{"delay_ms": 2000, "times": 1}])
    result = call(mock.base_url, timeout=0.3)
    assert result.retries == 1 and result.retry_ms >= 300


def test_connection_refused_is_a_connection_failure():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(TargetFailure) as caught:
        call(f"http://127.0.0.1:{port}/v1", max_retries=0)  # retrying it is not the point: no backoff
    assert caught.value.kind == "connection" and caught.value.retryable is True


def test_malformed_reply_is_a_protocol_failure(mock_server):
    # The mock serves its own /_mock/stats JSON at this path, which is no chat completion.
    with pytest.raises(TargetFailure) as caught:
        call(mock_server.base_url.removesuffix("/v1") + "/_mock/stats#", max_retries=0)
    assert caught.value.kind in {"protocol", "http"}


def test_timeout_after_last_retry_is_a_timeout_failure(mock):
    mock.configure(faults=[{"delay_ms": 2000, "times": 1}])
    with pytest.raises(TargetFailure) as caught:
        call(mock.base_url, timeout=0.2, max_retries=0)
    assert caught.value.kind == "timeout" and caught.value.retryable is True
