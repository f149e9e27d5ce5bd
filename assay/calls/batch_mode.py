"""What a chat caller in batch mode needs around its `Batcher` (`assay.calls.batch`): its spec's
`batch:` field (`BatchOption`), the run's batch ledger in the store, and one request asked through
a batch — admitted by the budget, held against it at its maximum cost until its result arrives,
priced at the batch rate.

Two callers use it: a chat target with `batch:` (`assay.targets._chat`, its batches recorded
with `purpose: generation`) and an `llm_judge` with `batch:` (`purpose: judging`, with the
scorer's name), both in the same `batches/` dataset of the run. A batcher re-attaches only to
the batches of its own purpose and scorer.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import BeforeValidator

from assay.calls.accounting import Accounting, Usage, current_ledger
from assay.calls.batch import BatchEntry, Batcher, BatchSettings
from assay.calls.batch_apis import BATCH_APIS
from assay.calls.wire import ChatAPI
from assay.errors import BudgetDenied, TargetFailure
from assay.outcomes import BatchState, FailureKind, SpendKind


def _batch_settings(value: object) -> object:
    """`batch: true` is the default settings, `false` none."""
    if value is True:
        return BatchSettings()
    return None if value is False else value


# `batch: true` (the default settings), `false` (none), or the settings: a spec field's type.
BatchOption = Annotated[BatchSettings | None, BeforeValidator(_batch_settings)]


# Batch errors a later batch may not meet again.
_TRANSIENT = frozenset({"overloaded_error", "api_error", "rate_limit_error", "server_error"})


class StoreLedger:
    """A run's batches of one purpose in the store's `batches/` dataset
    (`assay.calls.batch.BatchLedger`).

    Args:
        store: the run's store.
        run_id: the run.
        scorer: the judging scorer whose batches these are; None for the target's.
    """

    def __init__(self, store: Any, run_id: str, scorer: str | None = None) -> None:
        self._store = store
        self._run_id = run_id
        self._scorer = scorer
        self._purpose = SpendKind.GENERATION if scorer is None else SpendKind.JUDGING

    def record(self, entry: BatchEntry) -> None:
        self._store.record_batch(
            self._run_id,
            {
                "batch_id": entry.batch_id,
                "provider": entry.provider,
                "purpose": self._purpose.value,
                "scorer": self._scorer,
                "custom_ids": entry.custom_ids,
                "requests": len(entry.custom_ids),
                "state": entry.state.value,
                "submitted_at": entry.submitted_at,
                "ended_at": entry.ended_at,
                "request_counts": json.dumps(entry.counts, sort_keys=True) if entry.counts else None,
            },
        )

    def entries(self) -> list[BatchEntry]:
        """This purpose's batches (a row written before purposes were recorded is the target's)."""
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
            if (row["purpose"] or SpendKind.GENERATION) == self._purpose and row["scorer"] == self._scorer
        ]


class _MemoryLedger:
    """Batches recorded nowhere durable: a caller used outside a run (no store)."""

    def __init__(self) -> None:
        self._entries: dict[str, BatchEntry] = {}

    def record(self, entry: BatchEntry) -> None:
        self._entries[entry.batch_id] = entry

    def entries(self) -> list[BatchEntry]:
        return list(self._entries.values())


def open_batcher(
    spec: Any,
    api: ChatAPI,
    *,
    store: Any,
    run_id: str | None,
    scorer: str | None = None,
) -> Batcher:
    """The batcher of a spec in batch mode (a target's or a judge's: its endpoint and `batch`), its
    ledger the run's `batches/` (in memory without a store).

    Args:
        spec: the target or scorer spec (an `Endpoint` with `batch` settings).
        api: the chat API it speaks.
        store: the run's store, or None.
        run_id: the run's id, or None.
        scorer: the judging scorer's name; None for a target.
    """
    return Batcher(
        BATCH_APIS[(api.name, api.path)],
        spec,
        headers=api.headers(spec.api_key()),
        settings=spec.batch,
        ledger=StoreLedger(store, run_id, scorer)
        if store is not None and run_id is not None
        else _MemoryLedger(),
        label="target" if scorer is None else f"judge {scorer}",
    )


async def batched_call(
    batcher: Batcher,
    custom_id: str,
    body: dict[str, Any],
    *,
    api: ChatAPI,
    model: str,
    max_tokens: int,
) -> tuple[dict[str, Any], Usage | None]:
    """One request through a batch, measured into the current ledger (if any): admitted by the
    budget, held against it at its maximum cost until its result arrives, priced at the batch rate.

    Args:
        batcher: the caller's batcher.
        custom_id: the request's custom id, the same on every run for the same request.
        body: the request body.
        api: the chat API (reads usage off the reply).
        model: the model asked (prices the hold).
        max_tokens: the reply's limit (bounds the hold).

    Returns:
        The reply message and its usage.

    Raises:
        BudgetDenied: the budget refused the call.
        TargetFailure: the batch could not be submitted or read, or it ended without an answer.
    """
    ledger = current_ledger()
    if ledger is not None:
        try:
            ledger.budget.admit()
        except BudgetDenied:
            ledger.add(Accounting.of_denied_call(ledger.kind))
            raise
    # Until its result arrives the request counts against the budget at its maximum cost:
    # every byte a token (a bound no tokenizer can exceed), `max_tokens` out, batch prices.
    held = 0.0
    if ledger is not None:
        bound = Usage(input_tokens=len(json.dumps(body).encode()), output_tokens=max_tokens)
        held = ledger.prices.cost(model, bound, batch=True) or 0.0
        ledger.budget.reserve(held)
    try:
        result = await batcher.ask(custom_id, body)
    finally:
        if ledger is not None:
            ledger.budget.release(held)
    if result.get("type") != "succeeded":
        raise batch_failure(result, batcher.provider)
    message = result["message"]
    usage = api.usage(message)
    if ledger is not None:
        record = Accounting.of_call(ledger.kind, message.get("model"), usage, ledger.prices, batch=True)
        ledger.add(record)
        ledger.budget.spend(record.known_cost)
    return message, usage


def batch_failure(result: dict[str, Any], provider: str) -> TargetFailure:
    """A batch result without an answer, as a failure: an `errored` request says why (the
    provider's error); an expired or cancelled one may be sent again by a resume."""
    kind = str(result.get("type"))
    error = result.get("error") or {} if kind == "errored" else {}
    message = f"batch request {kind}" + (f": {error.get('type')}: {error.get('message')}" if error else "")
    return TargetFailure(
        message,
        kind=FailureKind.HTTP if error else FailureKind.PROTOCOL,
        provider=provider,
        retryable=kind != "errored" or error.get("type") in _TRANSIENT,
    )
