"""The one HTTP layer under Assay's clients: what is retried, how long to wait, how a failure reads.

Its clients stand each on the HTTP library that serves it best (docs/performance.md): the model
clients — chat (`assay.calls.chat`, the hot path, one call per item) and batches
(`assay.calls.batch`) — on pyreqwest (`assay.calls.transport`), whose HTTP work runs outside the
GIL; the `http_agent` target (`assay.targets.http_agent`) on httpx, for its multipart uploads and
streamed downloads. None decides on its own what this module decides:

Retried statuses (`RETRY_STATUSES`), decided once:

    408 Request Timeout     the server gave up waiting for the request; resending is the remedy
    409 Conflict            OpenAI's answer to a request that raced another on the same resource
                            (a lock), gone on a resend; the OpenAI and Anthropic SDKs retry it too
    429 Too Many Requests   a rate limit: wait (`Retry-After` when given) and send again
    500-599                 the server's trouble, 529 included (Anthropic's "overloaded")

Every other status (400, 401, 403, 404, 422, ...) fails at once: the same request gets the same
answer. So does a 429 that says the account's quota is used up (OpenAI's `insufficient_quota`):
no wait cures it, and waiting it out as a rate limit would hold every item for many minutes. Timeouts and connection errors are retried too, unless the caller says an attempt must
not be sent twice (`AttemptFailed.again`: the `http_agent`'s `POST /runs`, which could start a
second run).

Waiting (`RetryPolicy`): the server's `Retry-After` when it sends one — delta-seconds or an
HTTP-date — capped at `MAX_RETRY_AFTER_S`; else exponential backoff with jitter, 0.5 s, 1 s,
2 s, ... up to 30 s, plus up to 0.5 s at random (tenacity's `wait_exponential_jitter`). The
first attempt runs outside tenacity: most calls succeed at once, and tenacity's set-up is paid
only after a failure (it is not even imported until a call first fails; docs/performance.md).

Failures (`Peer`): a status is `HTTP <status>: <the body's error message>`; a transport error
is a *timeout* when the request ran out of time (any `TimeoutError` in its cause chain — the one
`assay.calls.transport` makes of pyreqwest's, or the one under httpx's) and a *connection* error
otherwise (refused, reset, cut short). A refused connection (`refused`) reads `connection refused by <host:port>`: the request was never
sent, so it cost nothing.
Each becomes an `assay.errors.TargetFailure` naming the endpoint's provider, the status, whether
it was retryable and the provider's request id.

A rate limit's refusals (`RATE_LIMIT_STATUSES`: 429, 529) are retried beyond `max_retries` — at
`max_retries: 0` too — up to `MAX_RATE_LIMITED_RETRIES` more (an `item_timeout` still bounds the
item): a rate limit costs time, never items.

Rate control plugs in at `Peer.on_response`: a hook called with every attempt's status and
rate-limit hints (`None` and none for a transport failure), where the adaptive per-endpoint
controller (`assay.calls.rate`) reads 429s, `Retry-After` and `x-ratelimit-*`.

Where a reply's request id and hints are found: `assay.calls.headers`.
"""

from __future__ import annotations

import errno
import json
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, TypeVar
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field

from assay.calls.headers import HEADERS, ResponseHeaders
from assay.calls.waits import CallWaits
from assay.errors import TargetFailure
from assay.outcomes import FailureKind


def _usable_url(url: str) -> str:
    """An endpoint a spec names must parse as a URL with a host (and a port in 1..65535)."""
    if any(character.isspace() for character in url):
        raise ValueError(f"{url!r} is not a URL: it contains white space")
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        text = parts.netloc.rpartition(":")[2]
        problem = f"port {text} is out of range" if text.isdigit() else f"port {text!r} is not a number"
        raise ValueError(f"{url!r} is not a URL: {problem}") from None
    if not parts.hostname:
        raise ValueError(f"{url!r} is not a URL: it names no host")
    if port is not None and not 0 < port < 65536:
        raise ValueError(f"{url!r} is not a URL: port {port} is out of range")
    return url


# The type of every URL a spec names (an endpoint's `base_url`: `assay.calls.endpoint.BaseURL`; a
# remote evaluator's `url`): checked when the spec is read, so a typo is bad input, not a failed run.
HttpURL = Annotated[str, Field(pattern=r"^https?://"), AfterValidator(_usable_url)]


@cache
def tls_context() -> ssl.SSLContext:
    """The TLS settings every httpx client of this process shares (httpx's defaults): a client
    building its own loads the CA bundle again (docs/performance.md) — a harness client per target
    opened, a remote scorer's client per item scored."""
    import httpx  # here: the model clients stand on pyreqwest, and need not load httpx

    return httpx.create_ssl_context()


RETRY_STATUSES: frozenset[int] = frozenset({408, 409, 429, *range(500, 600)})
# A rate limit's refusals (429, and Anthropic's 529 "overloaded") are retried without counting
# against `max_retries`, up to this many: a rate limit costs time, never items.
RATE_LIMIT_STATUSES: frozenset[int] = frozenset({429, 529})

MAX_RATE_LIMITED_RETRIES = 50
# A 429 whose error code says the quota is spent, not the rate exceeded: final, never waited out.
QUOTA_EXHAUSTED_CODES = frozenset({"insufficient_quota"})
MAX_RETRY_AFTER_S = 60.0
_MAX_MESSAGE = 300

if TYPE_CHECKING:
    import ssl

    from tenacity import RetryCallState

T = TypeVar("T")
ResponseHook = Callable[[int | None, Mapping[str, str]], None]
"""Called with each attempt's HTTP status and rate-limit hints (headers under their standard names:
`ResponseHeaders.hints`); `None` and `{}` for a transport failure."""


class AttemptFailed(Exception):
    """One failed attempt: the failure it would end in, and what the retry policy needs.

    Args:
        failure: the call's failure if this was its last attempt.
        retry_after: seconds the server asked to wait (`Retry-After`), if it did.
        again: whether another attempt may be made; default: whether the failure is retryable.
    """

    def __init__(
        self, failure: TargetFailure, *, retry_after: float | None = None, again: bool | None = None
    ) -> None:
        super().__init__(failure.message)
        self.failure = failure
        self.retry_after = retry_after
        self.again = failure.retryable if again is None else again

    @property
    def rate_limited(self) -> bool:
        """A refusal for rate (429, 529): retried beyond `max_retries`."""
        return self.failure.http_status in RATE_LIMIT_STATUSES


def retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` header: delta-seconds (`"2"`, `"0.5"`) or an HTTP-date
    (`"Wed, 21 Oct 2026 07:28:00 GMT"`; a date in the past is 0). None when absent or unreadable.

    Args:
        value: the header's value.
        now: the time a date is counted from (default: now).
    """
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # HTTP-dates are GMT; an obsolete form may parse without a zone
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def is_timeout(exc: BaseException) -> bool:
    """Whether a transport error is a timeout (else it is a connection error).

    Any `TimeoutError` in the exception's cause chain decides (`assay.calls.transport` makes
    pyreqwest's timeouts `TimeoutError`s, and httpx's rest on one). The chain, not the outer type: httpx-aiohttp
    raises every aiohttp connection error as `httpx.ConnectTimeout`, with the real error as its
    cause. A library's timeout raised with no cause at all is known by its class name.
    """
    link: BaseException | None = exc
    for _ in range(8):
        if link is None:
            return False
        if isinstance(link, TimeoutError):
            return True
        if link.__cause__ is None:
            return link is exc and any(c.__name__.endswith("Timeout") for c in type(exc).__mro__)
        link = link.__cause__
    return False


# What a refused connection's failure reads, before its `host:port`: a request never sent.
REFUSED = "connection refused by"


def refused(exc: BaseException) -> bool:
    """Whether the connection was refused, so the request was never sent (nor billed).

    `assay.calls.transport` makes a refusal a `ConnectionRefusedError`; httpx's error has one
    in its cause chain.
    """
    link: BaseException | None = exc
    for _ in range(8):
        if link is None:
            return False
        if isinstance(link, ConnectionRefusedError) or (
            isinstance(link, OSError) and link.errno == errno.ECONNREFUSED
        ):
            return True
        link = link.__cause__
    return False


def error_message(body: bytes, reason: str | None = None) -> str:
    """What an error reply says, for people: its JSON `error.message` (OpenAI, Anthropic), or its
    `error` (text, else as JSON), else the body's text, else the reason phrase; cut to 300."""
    try:
        doc = json.loads(body) if body else None
    except ValueError:
        doc = None
    error = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        message = error["message"]
    elif isinstance(error, str) or error is None:
        message = error or ""
    else:
        message = json.dumps(error, default=str)
    return (message or body.decode("utf-8", "replace") or reason or "")[:_MAX_MESSAGE]


def _error_code(body: bytes) -> str | None:
    """An error reply's JSON `error.code` (OpenAI's), if any."""
    try:
        error = json.loads(body).get("error") if body else None
    except (ValueError, AttributeError):
        return None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


def request_id(headers: Mapping[str, str], names: ResponseHeaders = HEADERS) -> str | None:
    """The provider's request id, from whichever of `names.request_id` it sends it in."""
    return names.first("request_id", headers)


@dataclass(frozen=True, slots=True)
class Peer:
    """The server at the other end of one client's calls: who it is, and how its failures are
    described (the spec's side of an endpoint is `assay.calls.endpoint.Endpoint`).

    Args:
        provider: who fails, as failures name it (`openai:<host>`, `http_agent:<host>`).
        timeout_s: seconds one attempt may take.
        timeout_setting: the spec setting a timeout message names (`target.request_timeout`).
        on_response: called with every attempt's status and rate-limit hints (rate control
            plugs in here).
        headers: where the reply's request id and hints are read (`response_headers`).
    """

    provider: str
    timeout_s: float
    timeout_setting: str | None = None
    on_response: ResponseHook | None = None
    headers: ResponseHeaders = HEADERS

    def observe(self, status: int | None, headers: Mapping[str, str]) -> None:
        """Report one attempt's status and its rate-limit hints — each under its standard name,
        wherever the reply had it (`ResponseHeaders.hints`) — to `on_response`, if set."""
        if self.on_response is not None:
            self.on_response(status, self.headers.hints(headers) if headers else {})

    def request_id(self, headers: Mapping[str, str]) -> str | None:
        """The provider's request id in a reply's headers."""
        return request_id(headers, self.headers)

    def status_failed(
        self,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        *,
        what: str = "",
        reason: str | None = None,
    ) -> AttemptFailed:
        """An HTTP error status: retryable when in `RETRY_STATUSES`, with the server's wait.

        Args:
            status: the status (>= 400).
            headers: the reply's headers.
            body: the reply's body.
            what: what the request was (`POST /runs`), prefixed to the message.
            reason: the status's reason phrase, used when the body says nothing.
        """
        exhausted = status == 429 and _error_code(body) in QUOTA_EXHAUSTED_CODES
        failure = self.failure(
            f"{_prefix(what)}HTTP {status}: {error_message(body, reason)}"
            + (" (the account's quota is used up: no retry cures it)" if exhausted else ""),
            FailureKind.HTTP,
            retryable=status in RETRY_STATUSES and not exhausted,
            http_status=status,
            request_id=self.request_id(headers),
        )
        return AttemptFailed(failure, retry_after=retry_after(self.headers.first("retry_after", headers)))

    def transport_failed(self, exc: BaseException, *, what: str = "", again: bool = True) -> AttemptFailed:
        """A request that got no reply: timed out, or the connection failed. Retryable.

        Args:
            exc: the client library's exception.
            what: what the request was, prefixed to the message.
            again: False when the request must not be sent twice (it may have reached the server).
        """
        if is_timeout(exc):
            setting = f" ({self.timeout_setting})" if self.timeout_setting else ""
            message, kind = f"timed out after {self.timeout_s:g}s{setting}", FailureKind.TIMEOUT
        elif refused(exc):
            host = self.provider.partition(":")[2] or self.provider
            message, kind = f"{REFUSED} {host}", FailureKind.CONNECTION
        else:
            message, kind = f"connection error: {exc or type(exc).__name__}", FailureKind.CONNECTION
        return AttemptFailed(self.failure(f"{_prefix(what)}{message}", kind, retryable=True), again=again)

    def failure(
        self,
        message: str,
        kind: FailureKind,
        *,
        retryable: bool = False,
        http_status: int | None = None,
        request_id: str | None = None,
        usage: Any = None,
    ) -> TargetFailure:
        """A `TargetFailure` of this peer's provider."""
        return TargetFailure(
            message,
            kind=kind,
            provider=self.provider,
            http_status=http_status,
            retryable=retryable,
            request_id=request_id,
            usage=usage,
        )


def _prefix(what: str) -> str:
    return f"{what}: " if what else ""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Attempts of one call until one succeeds or the failure is final (see the module docstring).

    Args:
        max_retries: attempts after the first.
    """

    max_retries: int

    async def run(self, attempt: Callable[[int], Awaitable[T]], who: str = "target") -> tuple[T, int]:
        """Call `attempt(number)` (numbered from 1) until it returns; returns its result and how
        many attempts failed first. `attempt` raises `AttemptFailed`; the last one is re-raised
        when the failure is final, anything else at once. The waits between attempts are told to
        `assay.calls.waits`'s watcher as `who`'s (`target`, `judge`)."""
        try:
            return await attempt(1), 0
        except AttemptFailed as first:
            # A rate limit's refusal is waited out even at `max_retries: 0` (module docstring).
            if not first.again or (self.max_retries == 0 and not first.rate_limited):
                raise
            pending: AttemptFailed | None = first
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

        limited = [0]  # rate-limit refusals so far: retried beyond `max_retries` (module docstring)

        def stop(state: RetryCallState) -> bool:
            exc = state.outcome.exception() if state.outcome else None
            if isinstance(exc, AttemptFailed) and exc.rate_limited:
                limited[0] += 1
                if limited[0] <= MAX_RATE_LIMITED_RETRIES:
                    return False
            return stop_after_attempt(self.max_retries + 1 + min(limited[0], MAX_RATE_LIMITED_RETRIES))(state)

        waits = CallWaits(who, self.max_retries)
        retrying = AsyncRetrying(
            stop=stop,
            retry=retry_if_exception(lambda e: isinstance(e, AttemptFailed) and e.again),
            wait=_wait,
            before_sleep=waits.before_sleep,
            reraise=True,
        )
        try:
            async for state in retrying:
                waits.end()
                with state:
                    if pending is not None:  # replay the first failure so tenacity counts and waits on it
                        failed, pending = pending, None
                        raise failed
                    result = await attempt(state.retry_state.attempt_number)
        finally:
            waits.end()
        return result, retrying.statistics["attempt_number"] - 1


def _wait(state: RetryCallState) -> float:
    """The server's `Retry-After` (capped), else exponential backoff with jitter."""
    exc = state.outcome.exception() if state.outcome else None
    if isinstance(exc, AttemptFailed) and exc.retry_after is not None:
        return min(exc.retry_after, MAX_RETRY_AFTER_S)
    return _backoff()(state)


@cache
def _backoff() -> Callable[[RetryCallState], float]:
    from tenacity import wait_exponential_jitter

    return wait_exponential_jitter(multiplier=0.5, max=30.0, jitter=0.5)
