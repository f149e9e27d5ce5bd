"""The one HTTP layer (`assay.calls.http`) as both of Assay's clients use it — the chat client
(aiohttp) and the http_agent target (httpx) — against real servers on 127.0.0.1: the same statuses
retried, `Retry-After` honoured in seconds and as an HTTP-date, a timeout told from a connection
error in the same words, and every attempt's status and headers handed to the response hook."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest

from assay.calls.chat import ChatClient, ChatReply
from assay.calls.endpoint import Endpoint
from assay.calls.http import RETRY_STATUSES, is_timeout, retry_after
from assay.errors import HarnessError, TargetFailure
from assay.spec import HttpAgentTarget
from assay.targets import HttpAgent

RETRIED = [408, 409, 429, 500, 503, 529]
NOT_RETRIED = [400, 401, 404, 422]
BODY = {"model": "mock-1", "messages": [{"role": "user", "content": "What is 1 + 1?"}]}


def chat(base_url: str, *, timeout: float = 10.0, max_retries: int = 2, hook: Any = None) -> ChatReply:
    async def go() -> ChatReply:
        client = ChatClient(
            Endpoint(base_url=base_url, timeout=timeout, max_retries=max_retries),
            concurrency=2,
            on_response=hook,
        )
        try:
            return await client.complete(BODY)
        finally:
            await client.aclose()

    return asyncio.run(go())


def agent_prepare(
    base_url: str, *, request_timeout: float = 10.0, max_retries: int = 2, hook: Any = None
) -> None:
    """`GET /capabilities` through the http_agent's client (`HttpAgent.prepare`)."""

    async def go() -> None:
        spec = HttpAgentTarget(
            kind="http_agent", base_url=base_url, request_timeout=request_timeout, max_retries=max_retries
        )
        agent = HttpAgent(spec, concurrency=2, on_response=hook)
        try:
            await agent.prepare([])
        finally:
            await agent.aclose()

    asyncio.run(go())


def http_date_in(seconds: float) -> str:
    return format_datetime(datetime.now(UTC) + timedelta(seconds=seconds), usegmt=True)


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A server that accepts connections and never answers: every request to it times out."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield server.getsockname()[1]


@pytest.fixture
def closed_port() -> int:
    """A port nobody listens on: every connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- the same statuses, retried by both ----------------------------------------------------------


def test_the_retried_statuses_are_decided_once():
    assert {408, 409, 429, 500, 529, 599} <= RETRY_STATUSES
    assert not {400, 401, 403, 404, 422} & RETRY_STATUSES


@pytest.mark.parametrize("status", RETRIED)
def test_the_chat_client_retries_the_statuses(mock, status):
    mock.configure(faults=[{"status": status, "times": 1, "retry_after": 0}])
    reply = chat(mock.base_url)
    assert reply.retries == 1 and mock.stats()["requests"] == 2


@pytest.mark.parametrize("status", RETRIED)
def test_the_http_agent_retries_the_same_statuses(harness, status):
    harness.configure(faults=[{"route": "capabilities", "status": status, "retry_after": 0}])
    agent_prepare(harness.base_url)
    assert harness.stats()["requests"]["capabilities"] == 2


@pytest.mark.parametrize("status", NOT_RETRIED)
def test_neither_client_retries_the_others(mock, harness, status):
    mock.configure(faults=[{"status": status, "times": 1}])
    with pytest.raises(TargetFailure) as failed:
        chat(mock.base_url)
    assert failed.value.http_status == status and failed.value.retryable is False
    assert mock.stats()["requests"] == 1
    harness.configure(faults=[{"route": "capabilities", "status": status}])
    with pytest.raises(HarnessError, match=f"GET /capabilities: HTTP {status}: fault: HTTP {status}"):
        agent_prepare(harness.base_url)
    assert harness.stats()["requests"]["capabilities"] == 1


def test_a_rate_limit_is_waited_out_even_without_retries(mock):
    """`max_retries: 0` stops retries of failures, not of a rate limit's refusals: those cost time,
    never the item (docs/rate-control.md)."""
    mock.configure(faults=[{"status": 429, "times": 3, "retry_after": 0}])
    reply = chat(mock.base_url, max_retries=0)
    assert reply.retries == 3 and mock.stats()["requests"] == 4
    mock.configure(faults=[{"status": 429, "times": 1, "retry_after": 0}, {"status": 500, "times": 1}])
    with pytest.raises(TargetFailure) as failed:
        chat(mock.base_url, max_retries=0)
    assert failed.value.http_status == 500, "past the refusal, max_retries: 0 stops at the failure"
    assert mock.stats()["requests"] == 6


# -- Retry-After ------------------------------------------------------------------------------


def test_retry_after_reads_seconds_and_http_dates():
    now = datetime(2026, 10, 21, 7, 28, 0, tzinfo=UTC)
    assert retry_after("2") == 2.0 and retry_after(" 0.5 ") == 0.5 and retry_after("0") == 0.0
    assert retry_after("Wed, 21 Oct 2026 07:28:30 GMT", now=now) == 30.0
    assert retry_after("Wed, 21 Oct 2026 07:27:00 GMT", now=now) == 0.0, "a date in the past: no wait"
    assert retry_after(None) is None and retry_after("soon") is None and retry_after("nan") is None


@pytest.mark.slow
def test_the_chat_client_waits_for_an_http_date(mock):
    # The date has whole seconds, so the wait is between 2 and 3 s; backoff alone would be <= 1 s.
    mock.configure(faults=[{"status": 503, "times": 1, "retry_after": http_date_in(3)}])
    reply = chat(mock.base_url)
    assert reply.retries == 1 and reply.retry_ms >= 1900


@pytest.mark.slow
def test_the_http_agent_waits_for_an_http_date(harness):
    harness.configure(faults=[{"route": "capabilities", "status": 429, "retry_after": http_date_in(3)}])
    started = time.perf_counter()
    agent_prepare(harness.base_url)
    assert time.perf_counter() - started >= 1.9
    assert harness.stats()["requests"]["capabilities"] == 2


@pytest.mark.slow
def test_the_http_agent_waits_for_seconds(harness):
    harness.configure(faults=[{"route": "capabilities", "status": 503, "retry_after": 1}])
    started = time.perf_counter()
    agent_prepare(harness.base_url)
    assert time.perf_counter() - started >= 0.95


# -- timeouts and connection errors, described alike ---------------------------------------------


def test_a_timeout_reads_the_same_from_both_clients(silent_port):
    base = f"http://127.0.0.1:{silent_port}"
    with pytest.raises(TargetFailure) as failed:
        chat(f"{base}/v1", timeout=0.3, max_retries=0)
    assert failed.value.kind == "timeout" and failed.value.retryable is True
    assert failed.value.message == "timed out after 0.3s"
    with pytest.raises(HarnessError) as refused:
        agent_prepare(base, request_timeout=0.3, max_retries=0)
    assert refused.value.problems == ["GET /capabilities: timed out after 0.3s (target.request_timeout)"]


def test_a_refused_connection_reads_the_same_from_both_clients(closed_port):
    base = f"http://127.0.0.1:{closed_port}"
    with pytest.raises(TargetFailure) as failed:
        chat(f"{base}/v1", max_retries=0)
    assert failed.value.kind == "connection" and failed.value.retryable is True
    assert failed.value.message == f"connection refused by 127.0.0.1:{closed_port}"
    with pytest.raises(HarnessError) as refused:
        agent_prepare(base, max_retries=0)
    assert refused.value.problems == [f"GET /capabilities: connection refused by 127.0.0.1:{closed_port}"]


def test_a_timeout_is_found_under_the_exception_a_library_wraps_it_in():
    class ReadTimeout(Exception):  # a library's own timeout, raised with no cause (httpx's)
        pass

    class ConnectTimeout(Exception):  # httpx-aiohttp's name for every aiohttp connection error
        pass

    wrapped = ConnectTimeout("connect")
    wrapped.__cause__ = ConnectionRefusedError()
    timed_out = RuntimeError("read")
    timed_out.__cause__ = TimeoutError()
    assert is_timeout(TimeoutError()) and is_timeout(timed_out) and is_timeout(ReadTimeout())
    assert not is_timeout(wrapped) and not is_timeout(ConnectionResetError())


# -- the response hook (where rate control plugs in) ------------------------------------------------


def test_both_clients_report_every_attempt_to_the_hook(mock, harness):
    seen: list[tuple[int | None, str | None]] = []

    def hook(status: int | None, headers: Any) -> None:
        seen.append((status, headers.get("retry-after")))

    mock.configure(faults=[{"status": 429, "times": 1, "retry_after": 0}])
    chat(mock.base_url, hook=hook)
    assert seen == [(429, "0"), (200, None)]
    seen.clear()
    harness.configure(faults=[{"route": "capabilities", "status": 503, "retry_after": 0}])
    agent_prepare(harness.base_url, hook=hook)
    assert seen == [(503, "0"), (200, None)]


def test_a_429_saying_the_quota_is_used_up_is_final(mock) -> None:
    """OpenAI answers an account out of credit 429 `insufficient_quota`: no wait cures it, so it
    fails at once instead of being waited out as a rate limit (50 more attempts, minutes)."""
    mock.configure(faults=[{"status": 429, "times": -1, "code": "insufficient_quota"}])
    with pytest.raises(TargetFailure) as failed:
        chat(mock.base_url, max_retries=4)
    assert failed.value.http_status == 429 and not failed.value.retryable
    assert "quota is used up" in failed.value.message
    assert mock.stats()["requests"] == 1
