"""`assay.calls.http`'s decisions — what is retried, how long to wait, how a failure reads — through
the chat client with a `Transport` in place of the network (`assay.calls.transport`): no server,
no socket, milliseconds a test. tests/calls/test_http_layer.py tests the same against real servers on
127.0.0.1; these only make the loop on calls/ fast. The replies are the official `openai` SDK's
types, so they cannot drift from the real API."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from openai.types.chat import ChatCompletion
from pyreqwest.request import Request
from pyreqwest.response import Response, ResponseBuilder

from assay.calls.chat import ChatClient, ChatReply
from assay.calls.endpoint import Endpoint
from assay.calls.http import MAX_RATE_LIMITED_RETRIES
from assay.errors import TargetFailure
from assay.outcomes import FailureKind

BODY = {"model": "mock-1", "messages": [{"role": "user", "content": "What is 1 + 1?"}]}
ANSWER = ChatCompletion.model_validate(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "mock-1",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "2"}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }
).model_dump(mode="json", exclude_none=True)

Reply = tuple[int, dict[str, str], bytes]


def answer() -> Reply:
    return 200, {"content-type": "application/json"}, json.dumps(ANSWER).encode()


def error(status: int, message: str = "", code: str | None = None, **headers: str) -> Reply:
    """An error reply in OpenAI's shape (`{"error": {"message", "type", "code"}}`)."""
    body = {"error": {"message": message, "type": "server_error", "code": code}} if message else {}
    return status, {"content-type": "application/json", **headers}, json.dumps(body).encode() if body else b""


class Scripted:
    """A transport answering with `replies` in order (the last one again once they run out), each
    request's arrival time kept."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.seen: list[float] = []

    async def __call__(self, request: Request) -> Response:
        self.seen.append(time.monotonic())
        status, headers, body = self.replies[min(len(self.seen), len(self.replies)) - 1]
        return await ResponseBuilder().status(status).headers(headers).body_bytes(body).build()

    def waits(self) -> list[float]:
        """Seconds between one request and the next."""
        return [b - a for a, b in zip(self.seen, self.seen[1:], strict=False)]


def chat(transport: Scripted, *, max_retries: int = 2, hook: Any = None) -> ChatReply:
    async def go() -> ChatReply:
        client = ChatClient(
            Endpoint(base_url="http://model.invalid/v1", max_retries=max_retries),
            concurrency=2,
            on_response=hook,
            transport=transport,
        )
        try:
            return await client.complete(BODY)
        finally:
            await client.aclose()

    return asyncio.run(go())


def failure(transport: Scripted, **options: Any) -> TargetFailure:
    with pytest.raises(TargetFailure) as failed:
        chat(transport, **options)
    return failed.value


def test_a_5xx_is_retried_until_an_answer_comes() -> None:
    transport = Scripted(
        error(503, "busy", **{"retry-after": "0"}), error(500, "oops", **{"retry-after": "0"}), answer()
    )
    reply = chat(transport)
    assert reply.content == "2" and reply.retries == 2 and len(transport.seen) == 3


def test_a_5xx_past_max_retries_fails_retryable_with_the_servers_words() -> None:
    transport = Scripted(error(502, "bad gateway upstream", **{"retry-after": "0", "x-request-id": "req-9"}))
    failed = failure(transport, max_retries=2)
    assert len(transport.seen) == 3, "the first attempt and two retries"
    assert failed.message == "HTTP 502: bad gateway upstream" and failed.kind == FailureKind.HTTP
    assert failed.retryable and failed.http_status == 502 and failed.request_id == "req-9"
    assert failed.retries == 2 and failed.provider == "openai:model.invalid"


def test_retry_after_replaces_the_backoff() -> None:
    """Backoff's first wait is 0.5-1 s; the server's `Retry-After: 0.05` is waited instead."""
    transport = Scripted(error(503, "busy", **{"retry-after": "0.05"}), answer())
    chat(transport)
    (wait,) = transport.waits()
    assert 0.05 <= wait < 0.5, wait


def test_without_retry_after_the_backoff_waits() -> None:
    transport = Scripted(error(503, "busy"), answer())
    chat(transport)
    (wait,) = transport.waits()
    assert 0.5 <= wait <= 1.5, wait


def test_a_429_is_waited_out_beyond_max_retries() -> None:
    transport = Scripted(*[error(429, "slow down", **{"retry-after": "0"})] * 3, answer())
    reply = chat(transport, max_retries=0)
    assert reply.retries == 3 and len(transport.seen) == 4


def test_a_429_is_waited_out_only_so_long() -> None:
    transport = Scripted(error(429, "slow down", **{"retry-after": "0"}))
    failed = failure(transport, max_retries=1)
    assert len(transport.seen) == 1 + 1 + MAX_RATE_LIMITED_RETRIES
    assert failed.http_status == 429 and failed.message == "HTTP 429: slow down"


def test_a_429_saying_the_quota_is_used_up_is_final() -> None:
    transport = Scripted(error(429, "You exceeded your current quota", code="insufficient_quota"))
    failed = failure(transport, max_retries=4)
    assert len(transport.seen) == 1 and not failed.retryable
    assert failed.message == (
        "HTTP 429: You exceeded your current quota (the account's quota is used up: no retry cures it)"
    )


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_a_final_4xx_is_sent_once_and_says_what_the_server_said(status: int) -> None:
    transport = Scripted(error(status, "The model `mock-9` does not exist", **{"x-request-id": "req-1"}))
    failed = failure(transport)
    assert len(transport.seen) == 1
    assert failed.message == f"HTTP {status}: The model `mock-9` does not exist"
    assert not failed.retryable and failed.http_status == status and failed.request_id == "req-1"


def test_a_4xx_with_an_empty_body_reads_its_reason_phrase() -> None:
    failed = failure(Scripted(error(404)))
    assert failed.message == "HTTP 404: Not Found"


def test_every_attempt_reaches_the_hook_with_its_hints() -> None:
    seen: list[tuple[int | None, dict[str, str]]] = []
    transport = Scripted(
        error(429, "slow down", **{"retry-after": "0", "x-ratelimit-remaining-requests": "0"}), answer()
    )
    chat(transport, hook=lambda status, hints: seen.append((status, dict(hints))))
    assert seen == [(429, {"retry-after": "0", "x-ratelimit-remaining-requests": "0"}), (200, {})]
