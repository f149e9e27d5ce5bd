"""What the two chat-model kinds (`openai`, `anthropic`) share: prompts rendered and checked
before anything runs, metered calls, a target that asks its model once per item — or once per
turn of a session, with the conversation so far — and batch mode.

Batch mode (`batch:` on the spec): an item's request goes through the provider's batch API
(`assay.calls.batch`), priced at the model's batch rate and held against the budget at its
maximum cost until its result arrives; each batch is recorded in the store's `batches/`
(`StoreLedger`), so a resumed run re-attaches to it. A session's turns are sent online.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from assay.calls.accounting import Accounting, Usage, current_ledger
from assay.calls.batch import BATCH_APIS, BatchEntry, Batcher, BatchSettings, custom_id
from assay.calls.chat import ChatClient
from assay.calls.keys import key_of
from assay.calls.wire import ChatAPI
from assay.errors import BudgetDenied, TargetFailure
from assay.outcomes import BatchState, FailureKind
from assay.spec.dataset import Item
from assay.targets._base import SessionState, TargetResult, render
from assay.targets._kind import Metered, TargetContext, TargetKind

# More lines than this about unfillable templates add nothing: the first show the pattern.
_MAX_PROBLEMS = 20
# Batch errors a later batch may not meet again.
_TRANSIENT = frozenset({"overloaded_error", "api_error", "rate_limit_error", "server_error"})


class ChatSpec(Protocol):
    """The fields a chat target's spec has."""

    model: str
    prompt: str
    system: str | None
    max_tokens: int | None
    batch: BatchSettings | None


S = TypeVar("S", bound=BaseModel)


class ChatKind(TargetKind[S]):
    """A chat model's kind: every prompt is rendered before anything runs; its calls are measured."""

    def item_problems(self, spec: S, items: list[Item], where: str) -> list[str]:
        """Render every prompt once, so a template naming a missing field fails before anything runs."""
        chat: ChatSpec = spec  # type: ignore[assignment]
        problems = []
        for field_name, template in (("prompt", chat.prompt), ("system", chat.system)):
            if template is None:
                continue
            for item in items:
                try:
                    render(template, item)
                except (KeyError, IndexError, ValueError) as exc:
                    problems.append(
                        f"item {item.item_index} (id {item.item_id!r}): {where}.{field_name} {template!r} "
                        f"cannot be filled: {type(exc).__name__} {exc}"
                    )
                if len(problems) >= _MAX_PROBLEMS:
                    break
        return problems

    def metered(self, spec: S) -> Metered:
        chat: ChatSpec = spec  # type: ignore[assignment]
        templates = [t for t in (chat.prompt, chat.system) if t is not None]
        return Metered(
            chat.model,
            chat.max_tokens,
            lambda item: [render(t, item) for t in templates],
            batch=chat.batch is not None,
        )

    def in_flight(self, spec: S, concurrency: int) -> int:
        """In batch mode `max_batches` batches' worth of items wait at once, whatever `concurrency` is."""
        batch = spec.batch  # type: ignore[attr-defined]
        return concurrency if batch is None else max(concurrency, batch.max_requests * batch.max_batches)


class StoreLedger:
    """A run's batches in the store's `batches/` dataset (`assay.calls.batch.BatchLedger`).

    Args:
        store: the run's store.
        run_id: the run.
    """

    def __init__(self, store: Any, run_id: str) -> None:
        self._store = store
        self._run_id = run_id

    def record(self, entry: BatchEntry) -> None:
        self._store.record_batch(
            self._run_id,
            {
                "batch_id": entry.batch_id,
                "provider": entry.provider,
                "custom_ids": entry.custom_ids,
                "requests": len(entry.custom_ids),
                "state": entry.state.value,
                "submitted_at": entry.submitted_at,
                "ended_at": entry.ended_at,
                "request_counts": json.dumps(entry.counts, sort_keys=True) if entry.counts else None,
            },
        )

    def entries(self) -> list[BatchEntry]:
        return [
            BatchEntry(
                batch_id=row["batch_id"],
                provider=row["provider"],
                custom_ids=list(row["custom_ids"]),
                state=BatchState(row["state"]),
                submitted_at=row["submitted_at"],
                ended_at=row["ended_at"],
                counts=json.loads(row["request_counts"]) if row["request_counts"] else {},
            )
            for row in self._store.run_batches(self._run_id).iter_rows(named=True)
        ]


class _MemoryLedger:
    """Batches recorded nowhere durable: a target used outside a run (no store)."""

    def __init__(self) -> None:
        self._entries: dict[str, BatchEntry] = {}

    def record(self, entry: BatchEntry) -> None:
        self._entries[entry.batch_id] = entry

    def entries(self) -> list[BatchEntry]:
        return list(self._entries.values())


def open_batcher(spec: Any, api: ChatAPI, context: TargetContext | None) -> Batcher | None:
    """The batcher of a spec in batch mode (its ledger the run's `batches/`), else None."""
    if spec.batch is None:
        return None
    store = context.store if context is not None else None
    run_id = context.run_id if context is not None else None
    key = key_of(spec)
    return Batcher(
        BATCH_APIS[api.name],
        spec.base_url,
        headers=api.headers(key),
        settings=spec.batch,
        ledger=StoreLedger(store, run_id) if store is not None and run_id is not None else _MemoryLedger(),
        timeout=spec.timeout,
        max_retries=spec.max_retries,
    )


class ChatTarget(ABC):
    """Renders the item's prompt and asks the model once (plus retries); a session's turns carry
    the conversation so far. A kind says how its request body looks (`request_body`).

    Args:
        spec: the target spec.
        client: the chat client it asks through.
        batcher: its batch API, in batch mode.
    """

    instrumented = True

    def __init__(self, spec: Any, client: ChatClient, batcher: Batcher | None = None) -> None:
        self._spec = spec
        self._client = client
        self._api = client.api
        self._batcher = batcher

    @abstractmethod
    def request_body(
        self, item: Item, prompt: Any = None, history: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """The request: the system prompt (if any), a session's earlier turns, then `prompt`
        (default: the item's rendered prompt) as the user's message."""

    def messages(self, item: Item, prompt: Any, history: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
        """A session's earlier turns, then `prompt` (default: the item's) as the user's message."""
        content = render(self._spec.prompt, item) if prompt is None else prompt
        return [*(history or []), {"role": "user", "content": content}]

    def item_prompt(self, item: Item) -> str:
        return render(self._spec.prompt, item)

    async def __call__(self, item: Item, trial: int) -> TargetResult:
        if self._batcher is not None:
            return await self._batched(item, trial, self._batcher)
        return await self._ask(self.request_body(item))

    async def turn(self, item: Item, trial: int, prompt: Any, session: SessionState) -> TargetResult:
        """One prompt of a session: the conversation so far is sent with it, so the model sees
        every earlier prompt and answer."""
        return await self._ask(self.request_body(item, prompt, session.history))

    async def _ask(self, body: dict[str, Any]) -> TargetResult:
        reply = await self._client.complete(body)
        return TargetResult(
            output=reply.content,
            model=reply.model or self._spec.model,
            usage=reply.usage,
            wire_ms=reply.wire_ms,
            first_token_ms=reply.first_token_ms,
            retry_ms=reply.retry_ms,
            retries=reply.retries,
        )

    async def _batched(self, item: Item, trial: int, batcher: Batcher) -> TargetResult:
        """One item through a batch: admitted by the budget, priced at the batch rate."""
        ledger = current_ledger()
        if ledger is not None:
            try:
                ledger.budget.admit()
            except BudgetDenied:
                ledger.add(Accounting.of_denied_call(ledger.kind))
                raise
        started = time.perf_counter()
        body = self.request_body(item)
        # Until its result arrives the request counts against the budget at its maximum cost:
        # every byte a token (a bound no tokenizer can exceed), `max_tokens` out, batch prices.
        held = 0.0
        if ledger is not None:
            bound = Usage(input_tokens=len(json.dumps(body).encode()), output_tokens=self._spec.max_tokens)
            held = ledger.prices.cost(self._spec.model, bound, batch=True) or 0.0
            ledger.budget.reserve(held)
        try:
            result = await batcher.ask(custom_id(item.item_id, trial), body)
        finally:
            if ledger is not None:
                ledger.budget.release(held)
        if result.get("type") != "succeeded":
            raise _failure(result, batcher.provider)
        message = result["message"]
        usage = self._api.usage(message)
        if ledger is not None:
            record = Accounting.of_call(ledger.kind, message.get("model"), usage, ledger.prices, batch=True)
            ledger.add(record)
            ledger.budget.spend(record.known_cost)
        return TargetResult(
            output=self._api.content(message),
            model=message.get("model") or self._spec.model,
            usage=usage,
            wire_ms=(time.perf_counter() - started) * 1000,
        )

    async def aclose(self) -> None:
        if self._batcher is not None:
            await self._batcher.aclose()
        await self._client.aclose()


def _failure(result: dict[str, Any], provider: str) -> TargetFailure:
    """A batch result without an answer, as the item's failure: an `errored` request says why
    (the provider's error); an expired or cancelled one may be sent again by a resume."""
    kind = str(result.get("type"))
    error = result.get("error") or {} if kind == "errored" else {}
    message = f"batch request {kind}" + (f": {error.get('type')}: {error.get('message')}" if error else "")
    return TargetFailure(
        message,
        kind=FailureKind.HTTP if error else FailureKind.PROTOCOL,
        provider=provider,
        retryable=kind != "errored" or error.get("type") in _TRANSIENT,
    )
