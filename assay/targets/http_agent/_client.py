"""HTTP to one harness: httpx over aiohttp's transport, retried and described by `assay.calls.http`.

httpx here, not aiohttp directly as the chat client does: a start may be a multipart upload of
fixture files and an artifact a streamed download, which httpx's models make plain, while a harness
run costs seconds, so the CPU its models add to each of an item's few requests is noise.
aiohttp's transport (`httpx-aiohttp`) under it, cheaper than httpx's own (docs/performance.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import httpx
from httpx_aiohttp import AiohttpTransport

from assay.calls.headers import response_headers
from assay.calls.http import AttemptFailed, Peer, ResponseHook, RetryPolicy, tls_context
from assay.outcomes import FailureKind
from assay.spec import HttpAgentTarget

Files = list[tuple[str, tuple[str | None, bytes, str]]]
_CANCEL_TIMEOUT_S = 5.0
# The failed attempts of the requests an item's call made so far (`counting_retries`); None
# outside one. Per task: items run concurrently, each in its own worker task.
_RETRIED: ContextVar[list[int] | None] = ContextVar("harness_retried", default=None)


@contextmanager
def counting_retries() -> Iterator[list[int]]:
    """Within the block, count the failed attempts of every request this task makes; yields the
    one-element counter (an item's `retries`: the attempts that failed before the last, summed
    over its requests to the harness)."""
    counter = [0]
    token = _RETRIED.set(counter)
    try:
        yield counter
    finally:
        _RETRIED.reset(token)


def _count(failed_attempts: int) -> None:
    counter = _RETRIED.get()
    if counter is not None:
        counter[0] += failed_attempts


class HarnessClient:
    """Requests to one harness, with the API key (if any) in every request's headers.

    Args:
        spec: the target spec (base URL, key, `request_timeout`, `max_retries`).
        concurrency: the connection pool's width.
        transport: an httpx transport to use instead of aiohttp's (tests).
        on_response: called with every attempt's status and headers (`assay.calls.http`).
    """

    def __init__(
        self,
        spec: HttpAgentTarget,
        *,
        concurrency: int,
        transport: httpx.AsyncBaseTransport | None = None,
        on_response: ResponseHook | None = None,
    ) -> None:
        self.peer = Peer(
            f"http_agent:{spec.host}",
            spec.attempt_timeout,
            f"target.{spec.attempt_timeout_field}",
            on_response,
            response_headers(spec.response_headers),
        )
        self._policy = RetryPolicy(spec.max_retries)
        headers = {"accept": "application/json"}
        key = spec.api_key()
        if key is not None:
            # Read here and kept only in the client's headers: never in a record, a log or argv.
            headers["authorization"] = f"Bearer {key}"
        self._client = httpx.AsyncClient(
            base_url=spec.base_url,
            headers=headers,
            timeout=httpx.Timeout(spec.attempt_timeout),
            transport=transport
            or AiohttpTransport(verify=tls_context(), limits=httpx.Limits(max_connections=concurrency)),
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        what: str,
        content: bytes | None = None,
        files: Files | None = None,
        headers: dict[str, str] | None = None,
        idempotent: bool = True,
        ok_404: bool = False,
        stream: bool = False,
    ) -> httpx.Response:
        """One request, retried as `assay.calls.http` says; raises `TargetFailure` when it fails
        for good.

        Args:
            method: the HTTP method.
            path: the path below the base URL.
            what: what the request is (`POST /runs`), for failure messages.
            content: the body.
            files: multipart parts instead (httpx's `files=`).
            headers: more headers.
            idempotent: False when the request must not be sent twice after a transport error
                (it may have reached the harness: a second `POST /runs` could start a second run).
            ok_404: return a 404 reply instead of failing.
            stream: return the successful response unread; the caller reads and closes it.
        """

        tried = [0]

        async def attempt(number: int) -> httpx.Response:
            tried[0] = number
            # Built anew for each attempt: a multipart body is a stream, consumed once.
            request = self._client.build_request(method, path, content=content, files=files, headers=headers)
            try:
                response = await self._client.send(request, stream=stream)
            except httpx.TransportError as exc:
                self.peer.observe(None, {})
                raise self.peer.transport_failed(exc, what=what, again=idempotent) from None
            self.peer.observe(response.status_code, response.headers)
            if response.status_code < 400 or (ok_404 and response.status_code == 404):
                return response
            if stream:
                await response.aread()
                await response.aclose()
            raise self.peer.status_failed(
                response.status_code,
                response.headers,
                response.content,
                what=what,
                reason=response.reason_phrase,
            )

        try:
            response, retries = await self._policy.run(attempt)
        except AttemptFailed as failed:
            _count(tried[0] - 1)  # as a chat call counts: the attempts that failed before the last
            raise failed.failure from None
        _count(retries)
        return response

    def json(self, response: httpx.Response, what: str) -> dict[str, Any]:
        """The reply's JSON object; a `protocol` failure when it is not JSON, or not an object."""
        try:
            doc = json.loads(response.content)
        except ValueError:
            raise self.peer.failure(
                f"{what}: the reply is not JSON: {response.text[:200]!r}",
                FailureKind.PROTOCOL,
                http_status=response.status_code,
            ) from None
        if not isinstance(doc, dict):
            raise self.peer.failure(
                f"{what}: expected a JSON object, got {type(doc).__name__}",
                FailureKind.PROTOCOL,
                http_status=response.status_code,
            )
        return doc

    async def post_once(self, path: str) -> bool:
        """A bodyless POST sent once, briefly (a cancel on the way out): True if it succeeded."""
        try:
            response = await self._client.post(path, timeout=_CANCEL_TIMEOUT_S)
        except httpx.HTTPError:
            return False
        return response.status_code < 300

    async def aclose(self) -> None:
        await self._client.aclose()
