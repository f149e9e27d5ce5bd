"""One OpenAI-compatible chat-completions client, for targets and judges alike.

aiohttp directly: one `ClientSession` per client, its connection pool as wide as the run's
concurrency, the URL, headers and timeout built once and each body sent as JSON bytes. This is the
hot path — one call per item — and httpx's request/response models cost ~2.5x the CPU of the
bare aiohttp loop here (docs/performance.md); nothing of httpx is visible to a user of this
client, whose API is `complete(body) -> ChatReply`. Bodies are encoded and replies parsed with
pydantic-core's JSON (already a dependency), ~3x faster than the standard library's here. What is retried, how long to wait and how a
failure is described are `assay.calls.http`'s (the same for every Assay client).

Every call is measured into the current `assay.calls.accounting.Ledger` — priced with its run's price
table and admitted by its run's `Budget` before it is sent, each retry included. Outside any
ledger (a client used on its own) calls are neither budgeted nor recorded.
"""

from __future__ import annotations

import json
import os
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pydantic_core
from yarl import URL

from assay.calls.accounting import Accounting, Ledger, Usage, current_ledger
from assay.calls.capture import Operation
from assay.calls.http import AttemptFailed, Endpoint, ResponseHook, RetryPolicy, refused, request_id
from assay.errors import BudgetDenied
from assay.outcomes import FailureKind, RequestOutcome


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
        timeout: seconds for one HTTP attempt (to connect, and between bytes of the reply).
        max_retries: retries after the first attempt on retryable failures.
        concurrency: the connection pool's width.
        cache: answer from (and fill) the store's response cache.
        on_response: called with every attempt's status and headers (`assay.calls.http`).
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
        on_response: ResponseHook | None = None,
    ) -> None:
        self._cache = cache
        self._url = URL(base_url.rstrip("/") + "/chat/completions")
        self._endpoint = Endpoint(f"openai:{urlsplit(base_url).netloc}", timeout, on_response=on_response)
        self._policy = RetryPolicy(max_retries)
        headers = {"content-type": "application/json"}
        if api_key_env:
            # Read here and kept only in the request headers: never in a record, a log or argv.
            headers["authorization"] = f"Bearer {os.environ.get(api_key_env, '')}"
        self._headers = headers
        # As httpx's `Timeout(t)` was: t to connect (a pooled connection included) and t between
        # reads; no limit on the whole reply, which a slow but live model may take long to send.
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=timeout, sock_connect=timeout, sock_read=timeout
        )
        self._concurrency = concurrency
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        """The session, opened on first use: on the running loop, which a session belongs to."""
        connector = aiohttp.TCPConnector(
            limit=self._concurrency, ssl=_ssl_context() if self._url.scheme == "https" else True
        )
        self._session = aiohttp.ClientSession(
            connector=connector, headers=self._headers, timeout=self._timeout
        )
        return self._session

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
        content = pydantic_core.to_json(body)
        wire: list[float] = [0.0]
        attempts: list[int] = [0]

        async def attempt(number: int) -> dict[str, Any]:
            attempts[0] = number
            sent = time.perf_counter()
            reply = await self._attempt(content, op, number)
            wire[0] = (time.perf_counter() - sent) * 1000
            return reply

        try:
            reply, retries = await self._policy.run(attempt)
        except AttemptFailed as exc:
            if op is not None:
                op.end(
                    RequestOutcome.FAILED,
                    error=exc.failure.message,
                    total_ms=(time.perf_counter() - started) * 1000,
                )
            exc.failure.retries = attempts[0] - 1  # the failed item's `retries`, like a success's
            raise exc.failure from None
        except BudgetDenied as exc:
            if op is not None:
                op.end(RequestOutcome.BUDGET_DENIED, error=str(exc))
            raise
        if cache is not None:
            cache.put(key, reply)
        return self._reply(reply, op, started, wire_ms=wire[0], retries=retries)

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
        session = self._session or self._open()
        try:
            async with session.post(self._url, data=content, allow_redirects=False) as response:
                status, headers, reason = response.status, response.headers, response.reason
                raw = await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            if refused(exc):  # never sent: $0, known
                self._measure(lambda ledger: Accounting.of_unsent_call(ledger.kind))
            else:  # the request may have reached the provider and been billed: its cost is unknown
                self._measure(lambda ledger: Accounting.of_lost_call(ledger.kind))
            self._endpoint.observe(None, {})
            failed = self._endpoint.transport_failed(exc)
            if op is not None:
                op.attempt(
                    number,
                    status=None,
                    wire_ms=(time.perf_counter() - sent) * 1000,
                    error=failed.failure.message,
                )
            raise failed from None
        self._endpoint.observe(status, headers)
        if op is not None:
            op.attempt(
                number, status=status, wire_ms=(time.perf_counter() - sent) * 1000, response=_body(raw)
            )
        if status >= 400:
            # Providers do not bill refused requests: a settled operation that cost nothing.
            self._measure(lambda ledger: Accounting(operations=1, settled=1, by_kind={ledger.kind.value: 1}))
            raise self._endpoint.status_failed(status, headers, raw, reason=reason)
        try:
            reply = pydantic_core.from_json(raw)
            reply["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise AttemptFailed(
                self._endpoint.failure(
                    f"malformed reply: {raw.decode('utf-8', 'replace')[:200]!r}",
                    FailureKind.PROTOCOL,
                    http_status=status,
                    request_id=request_id(headers),
                )
            ) from None
        return reply

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
        if self._session is not None:
            await self._session.close()
            self._session = None


def _ssl_context() -> ssl.SSLContext:
    """Certificates as httpx verifies them (certifi's bundle, or `SSL_CERT_FILE` / `SSL_CERT_DIR`),
    so moving off httpx changes no host a user could reach."""
    import certifi

    return ssl.create_default_context(
        cafile=os.environ.get("SSL_CERT_FILE") or certifi.where(), capath=os.environ.get("SSL_CERT_DIR")
    )


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
