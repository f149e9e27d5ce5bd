"""One chat client, for targets and judges alike: OpenAI-compatible chat completions or
Anthropic's Messages API (`assay.calls.wire` says how each looks on the wire), answered whole or
streamed.

One client per `ChatClient` (`assay.calls.transport`: pyreqwest, its HTTP work on its own thread
outside the GIL), its connection pool as wide as the run's concurrency, the URL, headers and
timeouts set once and each body sent as JSON bytes. This is the hot path — one call per item — and
the event loop's thread, which bounds a run's throughput, spends a quarter of what it did on
aiohttp (docs/performance.md). Nothing of the library is visible to a user of
this client, whose API is `complete(body) -> ChatReply`. Bodies are encoded and replies parsed with
pydantic-core's JSON (already a dependency), faster than the standard library's. What is
retried, how long to wait and how a failure is described are `assay.calls.http`'s (the same for
every Assay client).

Streaming (`stream=True`): the reply is read as Server-Sent Events and assembled into the reply
the request would have had unstreamed; the time to the first answer token is measured
(`ChatReply.first_token_ms`). Usage comes from the stream's final events. A stream that breaks
off before its final event is a retryable failure whose tokens are unknown (the call may have
been billed: `unknown_outcome`), never guessed from the text received; it keeps the reply's
request id. A streamed request answered with a whole body instead (`application/json`, as a
gateway may send a reply or an error) is read as that body.

Every reply says how it ended (`ChatReply.finish`, `assay.calls.finish.Finish`), and so does its
captured `end` record (`finish_reason`): whether that makes it no answer at all is for the
caller to say (`assay.calls.finish.not_an_answer`).

Every call is measured into the current `assay.calls.accounting.Ledger` — priced with its run's price
table and admitted by its run's `Budget` before it is sent, each retry included. Outside any
ledger (a client used on its own) calls are neither budgeted nor recorded.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pydantic_core

from assay.calls.accounting import Accounting, Ledger, Usage, current_ledger
from assay.calls.capture import Operation
from assay.calls.endpoint import Endpoint
from assay.calls.finish import Finish
from assay.calls.headers import response_headers
from assay.calls.http import (
    AttemptFailed,
    Peer,
    ResponseHook,
    RetryPolicy,
    error_message,
    refused,
)
from assay.calls.reply import ChatReply
from assay.calls.transport import Client, RequestError, open_client, parsed_url, reason, standard_error
from assay.calls.wire import ChatAPI, StreamFailed
from assay.calls.wire_openai import OPENAI
from assay.errors import BudgetDenied
from assay.outcomes import FailureKind, RequestOutcome, SpendKind

if TYPE_CHECKING:
    from assay.calls.aimd import RateController
    from assay.calls.transport import Transport


class ChatClient:
    """`POST {base_url}{api.path}` with retries, measurement and admission: the live client of an
    endpoint spec (a chat target's, a judge's).

    Args:
        endpoint: where it calls (`base_url`), with which key, its attempts' `timeout` (to
            connect, and between bytes of the reply), `max_retries` and `response_headers`.
        api: the provider's chat API (default: OpenAI's chat completions).
        stream: ask for the reply as a stream, and time its first token.
        concurrency: the connection pool's width.
        cache: answer from (and fill) the store's response cache.
        on_response: called with every attempt's status and headers (`assay.calls.http`).
        gate: the endpoint's rate controller (`assay.calls.rate`): each attempt takes one of its
            slots, and it observes every attempt's status and headers.
        transport: what answers instead of the network (`assay.calls.transport.Transport`:
            tests), if not None.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        concurrency: int,
        cache: bool = False,
        on_response: ResponseHook | None = None,
        gate: RateController | None = None,
        api: ChatAPI = OPENAI,
        stream: bool = False,
        transport: Transport | None = None,
    ) -> None:
        self._cache = cache
        self._transport = transport
        self._gate = gate
        if gate is not None and on_response is None:
            on_response = gate.observe
        self._api = api
        self._stream = stream
        self._url = endpoint.base_url + api.path
        self._parsed_url: Any = None  # pyreqwest's `Url`, parsed once (per request it costs ~4 us)
        self._peer = Peer(
            f"{api.name}:{endpoint.host}",
            endpoint.attempt_timeout,
            on_response=on_response,
            headers=response_headers(endpoint.response_headers),
        )
        self._policy = RetryPolicy(endpoint.max_retries)
        # The key is read here and kept only in the request headers: never in a record, a log or argv.
        self._headers = {"content-type": "application/json", **api.headers(endpoint.api_key())}
        self._timeout = endpoint.attempt_timeout
        self._concurrency = concurrency
        self._client: Client | None = None

    @property
    def api(self) -> ChatAPI:
        """The provider's chat API this client speaks."""
        return self._api

    @property
    def provider(self) -> str:
        """Who answers, as failures name it: `<api>:<host>`."""
        return self._peer.provider

    def _open(self) -> Client:
        """The client, opened on first use (by then the run's loop is running)."""
        self._client = open_client(
            self._url,
            headers=self._headers,
            timeout=self._timeout,
            connections=self._concurrency,
            transport=self._transport,
        )
        self._parsed_url = parsed_url(self._url)
        return self._client

    async def complete(self, body: dict[str, Any]) -> ChatReply:
        """Send `body`; raises `TargetFailure` when it fails for good, `BudgetDenied` when refused."""
        ledger = current_ledger()
        sent_body = self._api.streamed(body) if self._stream else body
        op = None
        if ledger is not None and ledger.capture is not None:
            op = ledger.capture.begin(ledger.kind, body.get("model"), sent_body)
        started = time.perf_counter()
        cache = ledger.cache if self._cache and ledger is not None else None
        # Keyed on the unstreamed body: a streamed reply is stored assembled, as the same request
        # unstreamed would have had it, so streamed and unstreamed runs share entries.
        key = cache.key(str(self._url), body) if cache is not None else ""
        if cache is not None and (hit := cache.get(key)) is not None:
            ledger.add(Accounting.of_cache_hit(ledger.kind))  # type: ignore[union-attr]
            answer = self._chat_reply(hit, self._api.usage(hit), wire_ms=0.0, retry_ms=0.0, retries=0)
            if op is not None:
                op.end(
                    RequestOutcome.CACHE_HIT,
                    total_ms=(time.perf_counter() - started) * 1000,
                    **_finish_fields(answer.finish),
                )
            return answer
        content = pydantic_core.to_json(sent_body)
        tokens = _token_estimate(content, body)
        wire: list[float] = [0.0]
        first: list[float | None] = [None]
        attempts: list[int] = [0]

        async def attempt(number: int) -> tuple[dict[str, Any], Usage]:
            attempts[0] = number
            sent = time.perf_counter()
            reply, usage, first[0] = await self._attempt(ledger, content, op, number, tokens)
            wire[0] = (time.perf_counter() - sent) * 1000
            return reply, usage

        try:
            who = "judge" if ledger is not None and ledger.kind == SpendKind.JUDGING else "target"
            (reply, usage), retries = await self._policy.run(attempt, who)
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
        return self._reply(
            ledger, reply, usage, op, started, wire_ms=wire[0], retries=retries, first_token_ms=first[0]
        )

    @staticmethod
    def _measure(ledger: Ledger | None, make: Callable[[Ledger], Accounting]) -> Accounting | None:
        if ledger is None:
            return None
        record = make(ledger)
        ledger.add(record)
        ledger.budget.spend(record.known_cost)
        return record

    async def _attempt(
        self, ledger: Ledger | None, content: bytes, op: Operation | None, number: int, tokens: int = 0
    ) -> tuple[dict[str, Any], Usage, float | None]:
        """One attempt: its reply (assembled, when streamed), its usage and its first token's time.

        Args:
            ledger: where the call is measured (the caller's: read once a call).
            content: the request body.
            op: its capture, if captured.
            number: the attempt's number, from 1.
            tokens: the attempt's estimated size, for the rate controller's `tpm` pacing.
        """
        if ledger is not None:
            try:
                ledger.budget.admit()
            except BudgetDenied:
                ledger.add(Accounting.of_denied_call(ledger.kind))
                raise
        client = self._client or self._open()
        gate = self._gate
        first_token_ms: float | None = None
        streamed: dict[str, Any] | None = None
        headers: Any = None  # the reply's, once they came: a stream that fails later keeps its request id
        if gate is not None:  # a slot of the endpoint's rate controller for the attempt
            await gate.acquire(tokens)
        sent = time.perf_counter()
        try:
            try:
                request = client.post(self._parsed_url).body_bytes(content)
                if self._stream:
                    # pyreqwest reads a streamed body ahead up to this limit before it hands the reply
                    # over (64 KiB by default: a whole short stream, its first token timed last).
                    async with request.streamed_read_buffer_limit(1).build_streamed() as response:
                        status, headers = response.status, response.headers
                        if status < 400 and _is_event_stream(headers):
                            streamed, first_token_ms = await self._read_stream(response, sent)
                            raw = b""
                        else:  # an error, or a whole reply (a gateway's JSON): read as unstreamed
                            raw = bytes(await response.bytes())
                else:
                    response = await request.build().send()
                    status, headers = response.status, response.headers
                    raw = bytes(await response.bytes())
            finally:
                if gate is not None:
                    gate.release()
        except (RequestError, StreamFailed) as exc:
            error = standard_error(exc) if isinstance(exc, RequestError) else exc
            if refused(error):  # never sent: $0, known
                self._measure(ledger, lambda ledger: Accounting.of_unsent_call(ledger.kind))
            else:  # the request may have reached the provider and been billed: its cost is unknown
                self._measure(ledger, lambda ledger: Accounting.of_lost_call(ledger.kind))
            self._peer.observe(None, {})
            if isinstance(error, StreamFailed):
                failed = AttemptFailed(
                    self._peer.failure(error.message, error.kind, retryable=error.retryable)
                )
            else:
                failed = self._peer.transport_failed(error)
            if headers is not None:  # it failed mid-stream: the reply had begun, with its id
                failed.failure.request_id = self._peer.request_id(headers)
            if op is not None:
                op.attempt(
                    number,
                    status=None,
                    wire_ms=(time.perf_counter() - sent) * 1000,
                    error=failed.failure.message,
                )
            raise failed from None
        self._peer.observe(status, headers)
        if op is not None:
            op.attempt(
                number,
                status=status,
                wire_ms=(time.perf_counter() - sent) * 1000,
                response=streamed if streamed is not None else _body(raw),
            )
        if status >= 400:
            if self._gate is not None:  # a refused request used no tokens of the account's
                self._gate.settle(tokens, 0)
            # Providers do not bill refused requests: a settled operation that cost nothing.
            self._measure(
                ledger, lambda ledger: Accounting(operations=1, settled=1, by_kind={ledger.kind.value: 1})
            )
            raise self._peer.status_failed(status, headers, raw, reason=reason(status))
        try:
            reply = streamed if streamed is not None else pydantic_core.from_json(raw)
            if streamed is None and isinstance(reply, dict) and reply.get("error"):
                # An error in a success's clothes (a gateway's 200): no reply, and not malformed.
                raise AttemptFailed(
                    self._peer.failure(
                        f"error reply (HTTP {status}): {error_message(raw)}",
                        FailureKind.HTTP,
                        retryable=True,
                        http_status=status,
                        request_id=self._peer.request_id(headers),
                    )
                )
            self._api.check(reply)
            usage = self._api.usage(reply)
            if self._gate is not None and (usage.input_tokens is not None or usage.output_tokens is not None):
                self._gate.settle(tokens, (usage.input_tokens or 0) + (usage.output_tokens or 0))
        except (ValueError, KeyError, IndexError, TypeError):
            shown = json.dumps(streamed) if streamed is not None else raw.decode("utf-8", "replace")
            raise AttemptFailed(
                self._peer.failure(
                    f"malformed reply: {shown[:200]!r}",
                    FailureKind.PROTOCOL,
                    http_status=status,
                    request_id=self._peer.request_id(headers),
                )
            ) from None
        return reply, usage, first_token_ms

    async def _read_stream(self, response: Any, sent: float) -> tuple[dict[str, Any], float | None]:
        """Read a reply's Server-Sent Events into the assembled reply; returns it and the time
        from `sent` to the first answer token. Raises `StreamFailed` when the stream ends before
        its final event or reports an error, `RequestError` when the connection breaks.

        Args:
            response: pyreqwest's streamed response, its headers read.
            sent: when the attempt was sent (`time.perf_counter`).
        """
        assembler = self._api.assembler()
        first_token_ms: float | None = None
        data: list[str] = []

        def dispatch() -> None:
            nonlocal first_token_ms
            event = "\n".join(data)
            data.clear()
            try:
                token = assembler.feed(event)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise StreamFailed(
                    f"malformed stream event ({type(exc).__name__}): {event[:200]!r}", FailureKind.PROTOCOL
                ) from None
            if token and first_token_ms is None:
                first_token_ms = (time.perf_counter() - sent) * 1000

        def take(line_bytes: bytes) -> None:
            line = line_bytes.decode("utf-8", "replace").rstrip("\r")
            if line.startswith("data:"):
                data.append(line[6:] if line.startswith("data: ") else line[5:])
            elif not line and data:  # a blank line ends an event
                dispatch()

        reader = response.body_reader
        pending = b""
        while (chunk := await reader.read_chunk()) is not None:
            pending += bytes(chunk)
            *lines, pending = pending.split(b"\n")
            if len(pending) > _MAX_STREAM_LINE:
                raise StreamFailed(
                    f"unreadable stream: a line longer than {_MAX_STREAM_LINE} bytes", FailureKind.PROTOCOL
                )
            for line in lines:
                take(line)
        if pending:
            take(pending)
        if data:
            dispatch()
        if not assembler.done:
            raise StreamFailed(
                "connection error: the stream ended before its final event", FailureKind.CONNECTION
            )
        return assembler.reply(), first_token_ms

    def _reply(
        self,
        ledger: Ledger | None,
        reply: dict[str, Any],
        usage: Usage,
        op: Operation | None,
        started: float,
        *,
        wire_ms: float,
        retries: int,
        first_token_ms: float | None,
    ) -> ChatReply:
        model = reply.get("model")
        spend = self._measure(
            ledger, lambda ledger: Accounting.of_call(ledger.kind, model, usage, ledger.prices)
        )
        total_ms = (time.perf_counter() - started) * 1000
        retry_ms = total_ms - wire_ms if retries else 0.0
        answer = self._chat_reply(
            reply, usage, wire_ms=wire_ms, retry_ms=retry_ms, retries=retries, first_token_ms=first_token_ms
        )
        if op is not None:
            op.model = model or op.model
            op.end(
                RequestOutcome.OK,
                retry_ms=retry_ms,
                total_ms=total_ms,
                first_token_ms=first_token_ms,
                tokens_input=usage.input_tokens,
                tokens_output=usage.output_tokens,
                cost_usd=spend.known_cost if spend is not None and not spend.reasons else None,
                **_finish_fields(answer.finish),
            )
        return answer

    def _chat_reply(
        self,
        reply: dict[str, Any],
        usage: Usage,
        *,
        wire_ms: float,
        retry_ms: float,
        retries: int,
        first_token_ms: float | None = None,
    ) -> ChatReply:
        return ChatReply(
            content=self._api.content(reply),
            model=reply.get("model"),
            usage=usage,
            wire_ms=wire_ms,
            retry_ms=retry_ms,
            retries=retries,
            request_id=reply.get("id"),
            finish=self._api.finish(reply),
            first_token_ms=first_token_ms,
            reasoning=self._api.reasoning(reply),
            body=reply,
        )

    async def aclose(self) -> None:
        if self._gate is not None:
            await self._gate.aclose()
        if self._client is not None:
            await self._client.close()
            self._client = None


# As aiohttp's line reader allowed: a longer line is not an event any provider sends.
_MAX_STREAM_LINE = 2**17


def _token_estimate(content: bytes, body: dict[str, Any]) -> int:
    """A request's tokens before it is sent, as providers count them against a `tpm` limit: the
    prompt at ~4 bytes a token (the JSON around it included: an over-estimate), plus the most the
    answer may take (`max_tokens`); corrected by the reply's usage (`RateController.settle`)."""
    most = body.get("max_tokens") or body.get("max_completion_tokens") or body.get("max_output_tokens") or 0
    return len(content) // 4 + (most if isinstance(most, int) else 0)


def _is_event_stream(headers: Any) -> bool:
    """Whether a reply is Server-Sent Events: `text/event-stream`, or no content type at all."""
    kind = headers.get("content-type")
    return kind is None or kind.split(";")[0].strip().lower() == "text/event-stream"


def _finish_fields(finish: Finish) -> dict[str, Any]:
    """A captured `end` record's finish columns."""
    return {
        "finish_reason": None if finish.reason is None else finish.reason.value,
        "finish_reason_raw": finish.raw,
    }


def _body(content: bytes) -> Any:
    """A response body for the capture: its JSON, else its text."""
    try:
        return json.loads(content)
    except ValueError:
        return content.decode("utf-8", "replace")
