"""Batch mode: requests gathered into provider batches (half price), with a durable ledger.

A `Batcher` takes one request per item (`await batcher.ask(custom_id, body)`), gathers them
into batches of at most `max_requests` (or what arrived within `max_wait_s` of the first),
submits each, polls it every `poll_s`, and hands each caller its own result when the batch
ends — so items flow on to scoring batch by batch.

The ledger is what makes a batch survive a crash: the moment the provider accepts a batch, its
id and its requests' custom ids are recorded (`BatchLedger.record`, the store's `batches/`
dataset), and again when it ends. A batcher opened on a ledger that holds batches re-attaches to
them: a request whose custom id is in a recorded batch is never submitted again — the caller
waits for that batch instead — unless that batch ended without a result for it (`errored`,
`expired`, `canceled`), in which case it is submitted in a new batch, and counted
(`Batcher.resubmitted`, by reason).

The providers' batch APIs it speaks are `assay.calls.batch_apis`'s. What is retried and how
failures read is `assay.calls.http`'s, as for every Assay client.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from assay.calls.batch_apis import BatchAPI
from assay.calls.endpoint import Endpoint
from assay.calls.headers import response_headers
from assay.calls.http import AttemptFailed, Peer, RetryPolicy
from assay.calls.transport import Client, RequestError, multipart, open_client, reason, standard_error
from assay.errors import TargetFailure
from assay.outcomes import BatchState, FailureKind

_log = logging.getLogger(__name__)


class BatchSettings(BaseModel):
    """`batch: true`, or these settings.

    Args:
        max_requests: requests in one batch at most.
        max_wait_s: seconds a request waits for others to join its batch before it is sent.
        poll_s: seconds between two looks at a batch in flight.
        max_batches: batches in flight at once (a run keeps `max_requests` x `max_batches` items
            in flight, whatever its `concurrency`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_requests: int = Field(default=1000, ge=1, le=100_000, strict=True)
    max_wait_s: float = Field(default=2.0, ge=0, le=3600, strict=True)
    poll_s: float = Field(default=10.0, gt=0, le=3600, strict=True)
    max_batches: int = Field(default=4, ge=1, le=1000, strict=True)

    @property
    def in_flight(self) -> int:
        """Requests a caller should keep waiting at once to fill its batches."""
        return self.max_requests * self.max_batches


@dataclass(slots=True)
class BatchCounts:
    """What one batcher has in flight and done, for progress.

    Args:
        in_flight: batches submitted (or re-attached to) and not yet ended.
        ended: batches ended.
        requests_in_flight: requests in the batches in flight.
        requests_done: requests in the batches ended.
    """

    in_flight: int = 0
    ended: int = 0
    requests_in_flight: int = 0
    requests_done: int = 0


Watcher = Callable[[str, BatchCounts], None]
"""`watcher(label, counts)`: told of each batcher's counts as they change (the progress bar)."""

_watcher: Watcher | None = None


def watch(watcher: Watcher | None) -> None:
    """Tell `watcher` of every batcher's counts in this process from now on (None: no one);
    `assay.run.progress.install` sets it to the progress reporter's."""
    global _watcher
    _watcher = watcher


@dataclass(slots=True)
class BatchEntry:
    """One batch as the ledger holds it.

    Args:
        batch_id: the provider's id.
        provider: `anthropic:<host>`.
        custom_ids: its requests' custom ids.
        state: `in_progress` until it ends, then `ended`.
        submitted_at: when the provider accepted it.
        ended_at: when it was seen to have ended.
        counts: the provider's request counts (succeeded, errored, expired, canceled), once ended.
    """

    batch_id: str
    provider: str
    custom_ids: list[str]
    state: BatchState
    submitted_at: datetime
    ended_at: datetime | None = None
    counts: dict[str, int] = field(default_factory=dict)


class BatchLedger(Protocol):
    """Where a batcher records its batches (the store's `batches/` dataset)."""

    def record(self, entry: BatchEntry) -> None:
        """Record a batch's state durably before returning."""
        ...

    def entries(self) -> list[BatchEntry]:
        """Every batch recorded, each in its latest state."""
        ...


def custom_id(*parts: object) -> str:
    """A custom id for a request (`^[A-Za-z0-9_-]{1,64}$`, as the batch APIs require), the same
    for the same parts on every run: how a resumed run finds its requests in a recorded batch."""
    return "r" + hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()[:40]


@dataclass(slots=True)
class _Waiting:
    custom_id: str
    body: dict[str, Any]
    future: asyncio.Future[dict[str, Any]]


class Batcher:
    """A provider's batch API behind one `ask` per request (see the module docstring).

    Args:
        api: the provider's batch API.
        endpoint: where it calls (`base_url`, e.g. `https://api.anthropic.com/v1`), the seconds
            one HTTP request may take (`timeout`), its `max_retries` and `response_headers`.
        headers: the request headers (key and version), never recorded.
        settings: batch sizes and timing.
        ledger: where batches are recorded, and found again on resume.
        label: what its batches are for, as progress names them (`target`, `judge <name>`).
    """

    def __init__(
        self,
        api: BatchAPI,
        endpoint: Endpoint,
        *,
        headers: dict[str, str],
        settings: BatchSettings,
        ledger: BatchLedger,
        label: str = "target",
    ) -> None:
        self._api = api
        self._base = endpoint.base_url
        self._headers = headers
        self._settings = settings
        self._ledger = ledger
        self._peer = Peer(
            f"{api.name}:{endpoint.host}",
            endpoint.attempt_timeout,
            headers=response_headers(endpoint.response_headers),
        )
        self._policy = RetryPolicy(endpoint.max_retries)
        self._timeout = endpoint.attempt_timeout
        self._client: Client | None = None
        self._waiting: list[_Waiting] = []
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # custom id -> the recorded batch it was submitted in (re-attached on resume).
        self._recorded: dict[str, BatchEntry] = {}
        self._polls: dict[str, asyncio.Task[dict[str, dict[str, Any]]]] = {}
        self.submitted = 0
        self.resubmitted: collections.Counter[str] = collections.Counter()
        self.counts = BatchCounts()
        self._label = label
        for entry in ledger.entries():
            for cid in entry.custom_ids:
                self._recorded[cid] = entry
            self._count(entry, +1)
        if self._recorded:  # re-attached: progress shows them from the start
            self._changed()

    def _count(self, entry: BatchEntry, sign: int) -> None:
        """Count `entry` in (+1) or out of (-1) `counts`, in its state."""
        counts = self.counts
        if entry.state is BatchState.ENDED:
            counts.ended += sign
            counts.requests_done += sign * len(entry.custom_ids)
        else:
            counts.in_flight += sign
            counts.requests_in_flight += sign * len(entry.custom_ids)

    def _changed(self) -> None:
        if _watcher is not None:
            _watcher(self._label, self.counts)

    async def ask(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """The batch result for one request: `{"type": "succeeded", "message"}`, or `errored`
        (with `error`), `expired` or `canceled`. Raises `TargetFailure` when the batch itself
        could not be submitted or read."""
        entry = self._recorded.pop(custom_id, None)
        if entry is not None:
            results = await self._poll(entry)
            result = results.get(custom_id) or {"type": "missing"}
            if result.get("type") == "succeeded":
                return result
            # Ended without an answer: this request goes into a new batch, counted and said.
            reason = str(result.get("type"))
            self.resubmitted[reason] += 1
            _log.warning(
                "batch %s ended without an answer to request %s (%s): submitting it again",
                entry.batch_id,
                custom_id,
                reason,
            )
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Waiting(custom_id, body, future))
        if len(self._waiting) >= self._settings.max_requests:
            self._flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._settings.max_wait_s, self._flush)
        return await future

    @property
    def provider(self) -> str:
        """`anthropic:<host>`, as failures name it."""
        return self._peer.provider

    @property
    def pending(self) -> int:
        """Requests gathered and not yet submitted."""
        return len(self._waiting)

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._waiting = self._waiting, []
        if batch:
            self._spawn(self._run(batch))

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: list[_Waiting]) -> None:
        try:
            entry = await self._submit(batch)
            results = await self._poll(entry)
        except TargetFailure as failure:
            for waiting in batch:
                if not waiting.future.done():
                    waiting.future.set_exception(failure)
            return
        except BaseException as exc:  # every waiting caller must learn of it
            for waiting in batch:
                if not waiting.future.done():
                    waiting.future.set_exception(exc)
            raise
        for waiting in batch:
            if not waiting.future.done():
                waiting.future.set_result(results.get(waiting.custom_id) or {"type": "missing"})

    async def _submit(self, batch: list[_Waiting]) -> BatchEntry:
        batch_id = await self._api.submit(self._request, self._base, [(w.custom_id, w.body) for w in batch])
        entry = BatchEntry(
            batch_id=batch_id,
            provider=self._peer.provider,
            custom_ids=[w.custom_id for w in batch],
            state=BatchState.IN_PROGRESS,
            submitted_at=datetime.now(UTC),
        )
        # Recorded before anything else happens: a crash from here on re-attaches, never resubmits.
        await asyncio.to_thread(self._ledger.record, entry)
        self.submitted += len(batch)
        self._count(entry, +1)
        self._changed()
        return entry

    def _poll(self, entry: BatchEntry) -> asyncio.Task[dict[str, dict[str, Any]]]:
        """One poller per batch, shared by every caller waiting on it."""
        task = self._polls.get(entry.batch_id)
        if task is None:
            task = self._polls[entry.batch_id] = asyncio.ensure_future(self._until_ended(entry))
        return task

    async def _until_ended(self, entry: BatchEntry) -> dict[str, dict[str, Any]]:
        """Poll the batch until it ends; record that; return its results by custom id."""
        while not (status := await self._api.status(self._request, self._base, entry.batch_id)).ended:
            await asyncio.sleep(self._settings.poll_s)
        results = await self._api.results(self._request, self._base, entry.batch_id, status)
        if entry.state is not BatchState.ENDED:
            self._count(entry, -1)
            entry.state = BatchState.ENDED
            entry.ended_at = datetime.now(UTC)
            entry.counts = status.counts
            await asyncio.to_thread(self._ledger.record, entry)
            self._count(entry, +1)
            self._changed()
        return results

    async def _request(
        self,
        method: str,
        url: str,
        *,
        body: Any = None,
        form: dict[str, str | bytes] | None = None,
        parse: bool = True,
    ) -> Any:
        """One request with the retry policy (see `Request`)."""
        client = self._client
        if client is None:
            client = self._client = open_client(self._base, headers=self._headers, timeout=self._timeout)
        what = f"{method} {urlsplit(url).path}"

        async def attempt(number: int) -> Any:
            request = client.request(method, url)
            if body is not None:
                request = request.body_bytes(json.dumps(body).encode()).header(
                    "content-type", "application/json"
                )
            if form is not None:  # built per attempt: a form is consumed by sending it
                request = request.multipart(multipart(form, filename="batch.jsonl", mime="application/jsonl"))
            try:
                response = await request.build().send()
                status, headers, raw = response.status, response.headers, bytes(await response.bytes())
            except RequestError as exc:
                # A lost submission could have been accepted: resending it could bill it twice.
                raise self._peer.transport_failed(
                    standard_error(exc), what=what, again=method == "GET"
                ) from None
            if status >= 400:
                raise self._peer.status_failed(status, headers, raw, what=what, reason=reason(status))
            if not parse:
                return raw
            try:
                return json.loads(raw)
            except ValueError:
                raise AttemptFailed(
                    self._peer.failure(f"{what}: malformed reply {raw[:200]!r}", FailureKind.PROTOCOL)
                ) from None

        try:
            reply, _ = await self._policy.run(attempt)
        except AttemptFailed as failed:
            raise failed.failure from None
        return reply

    async def aclose(self) -> None:
        """Stop gathering and polling (a batch in flight stays recorded, to re-attach to)."""
        if self._timer is not None:
            self._timer.cancel()
        for task in [*self._tasks, *self._polls.values()]:
            task.cancel()
        if self._client is not None:
            await self._client.close()
            self._client = None
