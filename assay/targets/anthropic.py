"""The `anthropic` target: Anthropic's Messages API, natively, one call per item.

Natively, because its accounting does not fit the OpenAI shape: Anthropic reports cache reads
and cache writes apart from `input_tokens`, and bills writes above the input price
(`assay.calls.wire.AnthropicMessages` reads them into Assay's token kinds). Model names must be
pinned: a moving alias is refused before the run starts (`model_pin_problem`).

With `batch:`, an item's request goes through the Message Batches API (`assay.calls.batch`),
priced at the model's batch rate, its batch recorded in the store's `batches/` (`StoreLedger`)
so a resumed run re-attaches to it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from assay.calls.accounting import Accounting, Usage, current_ledger
from assay.calls.batch import BatchEntry, Batcher, custom_id
from assay.calls.chat import ChatClient
from assay.calls.pinning import model_pin_problem
from assay.calls.wire import AnthropicMessages, messages_body
from assay.errors import BudgetDenied, TargetFailure
from assay.outcomes import BatchState, FailureKind
from assay.spec import AnthropicTarget
from assay.spec.dataset import Item
from assay.targets._base import TargetResult, render
from assay.targets._chat import ChatKind, ChatTarget
from assay.targets._kind import Metered, TargetContext


class AnthropicKind(ChatKind[AnthropicTarget]):
    """`kind: anthropic`: a pinned model; every prompt is rendered before anything runs."""

    name = "anthropic"
    # `cache_system` changes what a call costs, not what it answers.
    operational: ClassVar[frozenset[str]] = frozenset(
        {"base_url", "api_key_env", "timeout", "max_retries", "cache", "stream", "cache_system", "batch"}
    )

    def problems(self, spec: AnthropicTarget, spec_dir: Path, where: str) -> list[str]:
        problem = model_pin_problem(spec.model)
        return [] if problem is None else [f"{where}.model: {problem}"]

    def metered(self, spec: AnthropicTarget) -> Metered:
        return replace(super().metered(spec), batch=spec.batch is not None)

    def in_flight(self, spec: AnthropicTarget, concurrency: int) -> int:
        """In batch mode `max_batches` batches' worth of items wait at once, whatever `concurrency` is."""
        if spec.batch is None:
            return concurrency
        return max(concurrency, spec.batch.max_requests * spec.batch.max_batches)

    def open(self, spec: AnthropicTarget, context: TargetContext) -> AnthropicMessagesTarget:
        ledger = None
        if spec.batch is not None and context.store is not None and context.run_id is not None:
            ledger = StoreLedger(context.store, context.run_id)
        return AnthropicMessagesTarget(spec, concurrency=context.concurrency, ledger=ledger)


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


class AnthropicMessagesTarget(ChatTarget):
    """Renders the item's prompt and asks the model once (plus retries).

    Args:
        spec: the target spec.
        concurrency: the run's concurrency; the connection pool is as wide.
    """

    def __init__(self, spec: AnthropicTarget, *, concurrency: int, ledger: StoreLedger | None = None) -> None:
        api = AnthropicMessages(spec.anthropic_version)
        self._batcher: Batcher | None = None
        if spec.batch is not None:
            key = os.environ.get(spec.api_key_env, "") if spec.api_key_env else None
            self._batcher = Batcher(
                spec.base_url,
                headers=api.headers(key),
                settings=spec.batch,
                ledger=ledger or _MemoryLedger(),
                timeout=spec.timeout,
                max_retries=spec.max_retries,
            )
        client = ChatClient(
            spec.base_url,
            api=api,
            api_key_env=spec.api_key_env,
            timeout=spec.timeout,
            max_retries=spec.max_retries,
            concurrency=concurrency,
            cache=bool(spec.cache),
            stream=spec.stream,
        )
        super().__init__(spec, client)

    def request_body(
        self, item: Item, prompt: Any = None, history: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """The Messages request: the system prompt (top level), a session's earlier turns, then
        `prompt` (default: the item's rendered prompt) as the user's message."""
        spec: AnthropicTarget = self._spec
        return messages_body(
            model=spec.model,
            max_tokens=spec.max_tokens,
            messages=self.messages(item, prompt, history),
            system=None if spec.system is None else render(spec.system, item),
            cache_system=spec.cache_system,
            temperature=spec.temperature,
            stop_sequences=spec.stop_sequences,
        )

    async def __call__(self, item: Item, trial: int) -> TargetResult:
        if self._batcher is None:
            return await super().__call__(item, trial)
        return await self._batched(item, trial)

    async def _batched(self, item: Item, trial: int) -> TargetResult:
        """One item through a batch: admitted by the budget, priced at the batch rate."""
        assert self._batcher is not None
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
            result = await self._batcher.ask(custom_id(item.item_id, trial), body)
        finally:
            if ledger is not None:
                ledger.budget.release(held)
        if result.get("type") != "succeeded":
            raise _failure(result, self._batcher)
        message = result["message"]
        api = AnthropicMessages()
        usage = api.usage(message)
        if ledger is not None:
            record = Accounting.of_call(ledger.kind, message.get("model"), usage, ledger.prices, batch=True)
            ledger.add(record)
            ledger.budget.spend(record.known_cost)
        return TargetResult(
            output=api.content(message),
            model=message.get("model") or self._spec.model,
            usage=usage,
            wire_ms=(time.perf_counter() - started) * 1000,
        )

    async def aclose(self) -> None:
        if self._batcher is not None:
            await self._batcher.aclose()
        await super().aclose()


def _failure(result: dict[str, Any], batcher: Batcher) -> TargetFailure:
    """A batch result without an answer, as the item's failure: an `errored` request says why
    (its error is the provider's); an expired or cancelled one may be sent again by a resume."""
    kind = str(result.get("type"))
    error = ((result.get("error") or {}).get("error") or {}) if kind == "errored" else {}
    message = f"batch request {kind}" + (f": {error.get('type')}: {error.get('message')}" if error else "")
    return TargetFailure(
        message,
        kind=FailureKind.HTTP if error else FailureKind.PROTOCOL,
        provider=batcher.provider,
        retryable=kind != "errored"
        or error.get("type") in ("overloaded_error", "api_error", "rate_limit_error"),
    )


class _MemoryLedger:
    """Batches recorded nowhere durable: a target used outside a run (no store)."""

    def __init__(self) -> None:
        self._entries: dict[str, BatchEntry] = {}

    def record(self, entry: BatchEntry) -> None:
        self._entries[entry.batch_id] = entry

    def entries(self) -> list[BatchEntry]:
        return list(self._entries.values())
