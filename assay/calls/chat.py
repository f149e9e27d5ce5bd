"""One OpenAI-compatible chat-completions client, for targets and judges alike.

httpx's request and response models over aiohttp's transport (`httpx-aiohttp`), one connection
pool per client, as wide as the run's concurrency. Measured here: httpx's own transport costs ~4 ms
of CPU per request (~250 req/s on 2 cores); over aiohttp's transport ~0.4 ms. Requests go
straight to the transport rather than through `httpx.AsyncClient.send`: the client's cookie jar,
redirect and auth layers, which a model API never uses, cost another ~30 % of a request's CPU
(benchmarks/throughput.py, docs/performance.md).
Retries (tenacity) cover 429, 5xx, timeouts and connection errors, with exponential backoff and
jitter, and honour `Retry-After`.

Every call is measured into the current `assay.calls.accounting.Ledger` — priced with its run's price
table and admitted by its run's `Budget` before it is sent, each retry included. Outside any
ledger (a client used on its own) calls are neither budgeted nor recorded.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlsplit

import httpx
from httpx_aiohttp import AiohttpTransport
from pydantic import AfterValidator, Field
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from assay.calls.accounting import Accounting, Ledger, Usage, current_ledger
from assay.calls.capture import Operation
from assay.errors import BudgetDenied, TargetFailure
from assay.outcomes import FailureKind, RequestOutcome


def _usable_url(url: str) -> str:
    """An endpoint a spec names must parse as a URL with a host (and a port in 1..65535)."""
    if any(character.isspace() for character in url):
        raise ValueError(f"{url!r} is not a URL: it contains white space")
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ValueError(f"{url!r} is not a URL: {exc}") from None
    if not parsed.host:
        raise ValueError(f"{url!r} is not a URL: it names no host")
    if parsed.port is not None and not 0 < parsed.port < 65536:
        raise ValueError(f"{url!r} is not a URL: port {parsed.port} is out of range")
    return url


# The type of every endpoint field of a spec (targets' and judges' `base_url`, a remote
# evaluator's `url`): checked when the spec is read, so a typo is bad input, not a failed run.
HttpURL = Annotated[str, Field(pattern=r"^https?://"), AfterValidator(_usable_url)]

_RETRYABLE_STATUS = {408, 409, 429} | set(range(500, 600))
_MAX_RETRY_AFTER_S = 60.0


class _Attempt(Exception):
    """A failed attempt, carrying what the final failure description needs."""

    def __init__(self, failure: TargetFailure, retry_after: float | None = None) -> None:
        super().__init__(failure.message)
        self.failure = failure
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class ChatReply:
    """A successful chat completion and how it went.

    Args:
        content: the first choice's message content.
        model: the model that answered, as the provider named it.
        usage: token usage as reported.
        wire_ms: time of the attempt that succeeded.
        retry_ms: time spent before it in failed attempts and backoff.
        retries: failed attempts before it.
        request_id: the provider's request id.
    """

    content: Any
    model: str | None
    usage: Usage
    wire_ms: float
    retry_ms: float
    retries: int
    request_id: str | None


class ChatClient:
    """`POST {base_url}/chat/completions` with retries, measurement and admission.

    Args:
        base_url: e.g. `http://127.0.0.1:8000/v1`.
        api_key_env: the environment variable holding the API key, if any.
        timeout: seconds for one HTTP attempt.
        max_retries: retries after the first attempt on retryable failures.
        concurrency: the connection pool's width.
        cache: answer from (and fill) the store's response cache.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key_env: str | None,
        timeout: float,
        max_retries: int,
        concurrency: int,
        cache: bool = False,
    ) -> None:
        self._cache = cache
        self._url = httpx.URL(base_url.rstrip("/") + "/chat/completions")
        self._provider = f"openai:{urlsplit(base_url).netloc}"
        self._timeout = timeout
        self._max_retries = max_retries
        headers = {"content-type": "application/json"}
        if api_key_env:
            # Read here and kept only in the request headers: never in a record, a log or argv.
            headers["authorization"] = f"Bearer {os.environ.get(api_key_env, '')}"
        self._headers = httpx.Headers(headers)
        self._extensions = {"timeout": httpx.Timeout(timeout).as_dict()}
        self._transport = AiohttpTransport(limits=httpx.Limits(max_connections=concurrency))
        self._wait_backoff = wait_exponential_jitter(multiplier=0.5, max=30.0, jitter=0.5)

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _Attempt) and exc.retry_after is not None:
            return min(exc.retry_after, _MAX_RETRY_AFTER_S)
        return self._wait_backoff(state)

    async def complete(self, body: dict[str, Any]) -> ChatReply:
        """Send `body`; raises `TargetFailure` when it fails for good, `BudgetDenied` when refused."""
        ledger = current_ledger()
        op = None
        if ledger is not None and ledger.capture is not None:
            op = ledger.capture.begin(ledger.kind, body.get("model"), body)
        started = time.perf_counter()
        cache = ledger.cache if self._cache and ledger is not None else None
        key = cache.key(str(self._url), body) if cache is not None else ""
        if cache is not None and (hit := cache.get(key)) is not None:
            ledger.add(Accounting.of_cache_hit(ledger.kind))  # type: ignore[union-attr]
            if op is not None:
                op.end(RequestOutcome.CACHE_HIT, total_ms=(time.perf_counter() - started) * 1000)
            return _chat_reply(hit, _usage(hit), wire_ms=0.0, retry_ms=0.0, retries=0)
        try:
            reply, wire_ms, retries = await self._send(json.dumps(body).encode(), op)
        except _Attempt as exc:
            if op is not None:
                op.end(
                    RequestOutcome.FAILED,
                    error=exc.failure.message,
                    total_ms=(time.perf_counter() - started) * 1000,
                )
            raise exc.failure from None
        except BudgetDenied as exc:
            if op is not None:
                op.end(RequestOutcome.BUDGET_DENIED, error=str(exc))
            raise
        if cache is not None:
            cache.put(key, reply)
        return self._reply(reply, op, started, wire_ms=wire_ms, retries=retries)

    async def _send(self, content: bytes, op: Operation | None) -> tuple[dict[str, Any], float, int]:
        """The reply, the wire time of the attempt that got it, and how many attempts failed first."""
        started = time.perf_counter()
        try:
            # Most calls succeed at once; tenacity (~100 us of CPU a call) starts only after a failure.
            return await self._attempt(content, op, 1), (time.perf_counter() - started) * 1000, 0
        except _Attempt as first:
            if not first.failure.retryable or self._max_retries == 0:
                raise
            pending: _Attempt | None = first
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self._max_retries + 1),
            retry=retry_if_exception(lambda e: isinstance(e, _Attempt) and e.failure.retryable),
            wait=self._wait,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                if pending is not None:  # replay the first failure so tenacity counts and waits on it
                    failed, pending = pending, None
                    raise failed
                wire_started = time.perf_counter()
                reply = await self._attempt(content, op, attempt.retry_state.attempt_number)
                wire_ms = (time.perf_counter() - wire_started) * 1000
        return reply, wire_ms, retrying.statistics["attempt_number"] - 1

    @staticmethod
    def _measure(make: Callable[[Ledger], Accounting]) -> Accounting | None:
        ledger = current_ledger()
        if ledger is None:
            return None
        record = make(ledger)
        ledger.add(record)
        ledger.budget.spend(record.known_cost)
        return record

    async def _attempt(self, content: bytes, op: Operation | None, number: int) -> dict[str, Any]:
        ledger = current_ledger()
        if ledger is not None:
            try:
                ledger.budget.admit()
            except BudgetDenied:
                ledger.add(Accounting.of_denied_call(ledger.kind))
                raise
        sent = time.perf_counter()
        try:
            # A prebuilt URL and headers: httpx re-parses a string URL on every request (~100 us).
            request = httpx.Request(
                "POST", self._url, headers=self._headers, content=content, extensions=self._extensions
            )
            response = await self._transport.handle_async_request(request)
            await response.aread()
        except httpx.TransportError as exc:
            # The request may have reached the provider and been billed: its cost is unknown.
            self._measure(lambda ledger: Accounting.of_lost_call(ledger.kind))
            timeout = _is_timeout(exc)
            message = (
                f"timed out after {self._timeout:g}s"
                if timeout
                else f"connection error: {exc or type(exc).__name__}"
            )
            if op is not None:
                op.attempt(number, status=None, wire_ms=(time.perf_counter() - sent) * 1000, error=message)
            raise self._failed(
                message, FailureKind.TIMEOUT if timeout else FailureKind.CONNECTION, True
            ) from None
        if op is not None:
            op.attempt(
                number,
                status=response.status_code,
                wire_ms=(time.perf_counter() - sent) * 1000,
                response=_body(response.content),
            )
        if response.status_code >= 400:
            # Providers do not bill refused requests: a settled operation that cost nothing.
            self._measure(lambda ledger: Accounting(operations=1, settled=1, by_kind={ledger.kind.value: 1}))
            raise self._failed(
                f"HTTP {response.status_code}: {_error_message(response)}",
                FailureKind.HTTP,
                response.status_code in _RETRYABLE_STATUS,
                status=response.status_code,
                request_id=response.headers.get("x-request-id"),
                retry_after=_retry_after(response.headers.get("retry-after")),
            )
        try:
            # Bytes straight to json: httpx's header and charset look-ups cost more than the parse.
            reply = json.loads(response.content)
            reply["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise self._failed(
                f"malformed reply: {response.text[:200]!r}",
                FailureKind.PROTOCOL,
                False,
                status=response.status_code,
                request_id=response.headers.get("x-request-id"),
            ) from None
        return reply

    def _failed(
        self,
        message: str,
        kind: FailureKind,
        retryable: bool,
        *,
        status: int | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
    ) -> _Attempt:
        failure = TargetFailure(
            message,
            kind=kind,
            provider=self._provider,
            http_status=status,
            retryable=retryable,
            request_id=request_id,
        )
        return _Attempt(failure, retry_after)

    def _reply(
        self, reply: dict[str, Any], op: Operation | None, started: float, *, wire_ms: float, retries: int
    ) -> ChatReply:
        usage = _usage(reply)
        model = reply.get("model")
        spend = self._measure(lambda ledger: Accounting.of_call(ledger.kind, model, usage, ledger.prices))
        total_ms = (time.perf_counter() - started) * 1000
        retry_ms = total_ms - wire_ms if retries else 0.0
        if op is not None:
            op.model = model or op.model
            op.end(
                RequestOutcome.OK,
                retry_ms=retry_ms,
                total_ms=total_ms,
                tokens_input=usage.input_tokens,
                tokens_output=usage.output_tokens,
                cost_usd=spend.known_cost if spend is not None and not spend.reasons else None,
            )
        return _chat_reply(reply, usage, wire_ms=wire_ms, retry_ms=retry_ms, retries=retries)

    async def aclose(self) -> None:
        await self._transport.aclose()


def _usage(reply: dict[str, Any]) -> Usage:
    raw = reply.get("usage") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    prompt_details = raw.get("prompt_tokens_details") or {}
    return Usage(
        input_tokens=raw.get("prompt_tokens"),
        output_tokens=raw.get("completion_tokens"),
        reasoning_tokens=completion_details.get("reasoning_tokens"),
        cached_tokens=prompt_details.get("cached_tokens"),
    )


def _chat_reply(
    reply: dict[str, Any], usage: Usage, *, wire_ms: float, retry_ms: float, retries: int
) -> ChatReply:
    return ChatReply(
        content=reply["choices"][0]["message"].get("content"),
        model=reply.get("model"),
        usage=usage,
        wire_ms=wire_ms,
        retry_ms=retry_ms,
        retries=retries,
        request_id=reply.get("id"),
    )


def _body(content: bytes) -> Any:
    """A response body for the capture: its JSON, else its text."""
    try:
        return json.loads(content)
    except ValueError:
        return content.decode("utf-8", "replace")


def _is_timeout(exc: httpx.TransportError) -> bool:
    # httpx-aiohttp maps every aiohttp connection error to ConnectTimeout; the cause tells the truth.
    cause = exc.__cause__
    if cause is not None:
        return isinstance(cause, asyncio.TimeoutError)
    return isinstance(exc, httpx.TimeoutException)


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
        message = body["error"]["message"] if isinstance(body.get("error"), dict) else body.get("error")
    except (ValueError, KeyError, AttributeError, TypeError):
        message = None
    return str(message or response.text or response.reason_phrase)[:300]


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP-date; rare from model APIs, so fall back to our own backoff
