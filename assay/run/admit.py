"""Admit or stop: what every item passes before it starts, and the guarded call to the target.

    async with gate as opening:         wait for a slot; the lease lost: raise; the budget closed: None
        called = await gate.call(...)   the target call, measured, under `item_timeout`: its result,
                                        or the row of how it stopped (budget denial, failure, timeout)

The plain executor, managed sessions (per attempt) and a sandboxed attempt hold a slot of the
run-wide limiter; a rescore, which calls no target, only checks the lease and starts at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

from assay.calls.accounting import Accounting, Ledger
from assay.calls.capture import Scope
from assay.errors import BudgetDenied, TargetFailure
from assay.outcomes import BudgetClosedBy, FailureKind, ItemOutcome, SpendKind
from assay.run.plan import RunPlan
from assay.run.rows import ItemRow, failed_row, stopped_row
from assay.spec.dataset import Item
from assay.targets import TargetResult


# Not frozen: one is made per item, and a frozen one costs three times as much.
@dataclass(slots=True)
class Opening:
    """An admitted item's start.

    Args:
        started_at: when it started (UTC).
        started: the same moment on `time.perf_counter`, for durations.
        queued_ms: how long it waited for its slot.
    """

    started_at: datetime
    started: float
    queued_ms: float


_NO_TIMEOUT = contextlib.nullcontext()


class Called(NamedTuple):
    """A guarded target call: its result, or (`result` None) the item row of how it stopped;
    its generation spend, its capture scope, and the call's wall time."""

    result: TargetResult | None
    stopped: ItemRow | None
    generation: Accounting
    scope: Scope | None
    duration_ms: float


class Gate:
    """Admits items one at a time. `async with gate as opening` waits for a slot, stops the
    shard if this process lost the run's lease (`LeaseLostError`), and yields the item's
    `Opening` — or None when the closed budget keeps it from starting (it gets no slot's work).

    Args:
        plan: the run's plan.
        target_calls: whether items call the target: they then share one limiter of `width` and
            the budget admits them (a rescore calls none).
        width: items in flight at once; default the spec's `concurrency` (a batching target
            holds a batch's worth: `TargetKind.in_flight`).
    """

    def __init__(self, plan: RunPlan, *, target_calls: bool = True, width: int | None = None) -> None:
        self.plan = plan
        self.width = width or plan.spec.concurrency
        self._limiter = asyncio.Semaphore(self.width) if target_calls else None
        self._budget = plan.budget if target_calls else None

    # No state per admission, so one gate serves every concurrent item (and costs no object).
    async def __aenter__(self) -> Opening | None:
        waited = time.perf_counter()
        if self._limiter is not None:
            await self._limiter.acquire()
        lost = self.plan.lease.lost
        if lost is not None:  # another process drives the run now: start nothing
            await self.__aexit__(None, None, None)
            raise lost
        started_at = datetime.now(UTC)
        started = time.perf_counter()
        # Checked after the wait for a slot, which may have been long.
        budget = self._budget
        if budget is not None and budget.closed:
            budget.note_closure(BudgetClosedBy.CASE)
            return None
        return Opening(started_at, started, (started - waited) * 1000)

    async def __aexit__(self, *exc: object) -> None:
        if self._limiter is not None:
            self._limiter.release()

    async def call(
        self,
        item: Item,
        trial: int,
        opening: Opening,
        answer: Callable[[], Awaitable[TargetResult]],
        *,
        instrumented: bool,
    ) -> Called:
        """Get the item's answer under `item_timeout`, its model calls measured as generation and
        captured; a budget denial, a target failure or the timeout ends it as a row.

        Args:
            item: the item.
            trial: its trial.
            opening: its admission.
            answer: makes the answer (the target's call, or a session's policy).
            instrumented: whether the target's model calls are measured (else its spend is
                `uninstrumented`).
        """
        plan = self.plan
        scope = plan.capture.scope(item.item_id, trial)
        stopped: ItemRow | None = None
        result = None
        with Ledger(SpendKind.GENERATION, plan.prices, plan.budget, scope, plan.response_cache) as ledger:
            try:
                timeout = plan.spec.item_timeout
                # Without an item timeout no `asyncio.timeout` at all: it costs ~5 us an item.
                async with asyncio.timeout(timeout) if timeout is not None else _NO_TIMEOUT:
                    result = await answer()
            except BudgetDenied as denied:
                stopped = stopped_row(
                    item, trial, opening.started_at, ItemOutcome.BUDGET_INTERRUPTED, str(denied)
                )
            except TargetFailure as failure:
                stopped = failed_row(item, trial, opening.started_at, opening.started, failure)
            except TimeoutError:
                stopped = failed_row(item, trial, opening.started_at, opening.started, self._timed_out())
        duration_ms = (time.perf_counter() - opening.started) * 1000
        # A denied call was measured even for an uninstrumented target: it is what the budget saw.
        generation = (
            ledger.total()
            if instrumented or (stopped is not None and stopped["outcome"] == ItemOutcome.BUDGET_INTERRUPTED)
            else Accounting.uninstrumented()
        )
        return Called(result, stopped, generation, scope, duration_ms)

    def _timed_out(self) -> TargetFailure:
        """The item's failure when `item_timeout` ends it."""
        spec = self.plan.spec
        return TargetFailure(
            f"item timed out after {spec.item_timeout:g}s (item_timeout)",
            kind=FailureKind.TIMEOUT,
            provider=spec.target.kind,
            retryable=True,
        )
