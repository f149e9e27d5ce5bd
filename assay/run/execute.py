"""Executing a shard: each item admitted, produced, scored, and its rows committed in batches.

Plain asyncio, composed of parts each written once:

    ShardExecutor(plan, run_item)      drains a shard with a few workers; commits `Finished` rows
    │                                  in batches, only while this process holds the run's lease
    └── run_item(item, trial)          where an item's rows come from:
        ├── PlainItems                 a target call        ┐ admitted by one `Gate` (assay/run/admit.py),
        ├── SandboxedItems             a live sandbox       │ scored by one `Scoring` (assay/run/scoring.py),
        ├── SessionItems               managed sessions     │ rows built by assay/run/rows.py
        └── RescoreItems               a stored output      ┘ (attempts.py, rescore.py)

One limiter (the spec's `concurrency`, in the run's `Gate`) bounds the whole run's in-flight target
calls across every shard — shards are awaited together on one event loop — and one per item bounds
its scorers. A finished item's batch is committed at most 2 s after the item finished (a timer,
whether or not another item finishes), so a killed process loses at most the items in flight,
those finished in its last 2 s and the batch being written on the commit thread; those run again on
resume. A process that lost the run's
lease (assay/store/lease.py) starts and commits nothing more.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from assay.calls.accounting import Accounting
from assay.errors import TargetUnreachable
from assay.evaluators._base import RunContext, run_context
from assay.run import progress
from assay.run.admit import Gate
from assay.run.attempts import SessionItems
from assay.run.breaker import CircuitBreaker
from assay.run.plan import RunPlan, Shard
from assay.run.rows import (
    ITEMS,
    SCORES,
    TURNS,
    Finished,
    ItemRow,
    ScoreRow,
    TurnRow,
    captured,
    completed_row,
    failed_row,
    gauge_values,
    gauges_table,
    requests_table,
    skipped_row,
    to_json,
)
from assay.run.scoring import Scoring
from assay.spec.dataset import Item
from assay.targets import Target, kind_of

_BATCH_ROWS = 500
_BATCH_SECONDS = 2.0


class Writer(Protocol):
    """Fences a shard's commits: the run's `Lease`, or a worker's `ShardExecution`."""

    def check(self) -> None: ...

    def part_name(self, shard: int) -> str: ...

    def after_commit(self, part: str) -> None: ...


class RunItem(Protocol):
    """Produces one item x trial's rows."""

    async def __call__(self, item: Item, trial: int) -> Finished: ...


@dataclass(slots=True)
class ShardReport:
    """What a shard did: outcome counts of the items it executed, and how many it found done."""

    shard: int
    executed: dict[str, int] = field(default_factory=dict)
    already_done: int = 0
    # On a Dask worker: what the driver's sequential compare needs of the rows committed meanwhile.
    compared_items: list[dict[str, Any]] = field(default_factory=list)
    compared_scores: list[dict[str, Any]] = field(default_factory=list)
    # Under Prefect: the circuit breaker's stop (`TargetUnreachable`'s message), returned by the
    # shard task as its result rather than raised as a task failure Prefect would retry.
    stopped: str | None = None


class ShardExecutor:
    """Runs shards of one plan: each item's rows from `run_item`, committed in batches.

    Args:
        plan: the run's plan.
        run_item: where an item's rows come from (`for_target`, or a rescore's `RescoreItems`).
        width: items in flight at once; default the spec's `concurrency`.
    """

    def __init__(self, plan: RunPlan, run_item: RunItem, width: int | None = None) -> None:
        self.plan = plan
        self._run_item = run_item
        self.width = width or plan.spec.concurrency
        self._breaker = CircuitBreaker()
        # Every shard's workers: the breaker's trip in one shard stops the items of all of them,
        # as it stops the one shard of an embedded run.
        self._draining: set[asyncio.Future[None]] = set()

    @classmethod
    def for_target(cls, plan: RunPlan, target: Any) -> ShardExecutor:
        """Shards against one open target: each item as a plain call, a managed session (a spec
        with a policy or attempts) or a live sandbox (a kind whose attempts stay alive)."""
        # A batching target holds a batch's worth of items at once (`TargetKind.in_flight`).
        width = kind_of(plan.spec.target).in_flight(plan.spec.target, plan.spec.concurrency)
        gate, scoring = Gate(plan, width=width), Scoring(plan)
        run_item: RunItem
        if plan.spec.sessions:  # a container's attempts are live sandboxes there too
            run_item = SessionItems(target, gate, scoring)
        elif kind_of(plan.spec.target).live_attempts:
            run_item = SandboxedItems(target, gate, scoring)
        else:
            run_item = PlainItems(target, gate, scoring)
        # A batching judge waits for a batch's worth of outputs; the gate still bounds the target calls.
        return cls(plan, run_item, scoring.in_flight(width))

    async def run_shard(self, shard: Shard, writer: Writer | None = None) -> ShardReport:
        """Execute the shard's items not yet committed; returns what it did.

        Args:
            shard: the shard.
            writer: what fences its commits; default the run's lease (a Dask worker's: its
                `assay.store.executions.ShardExecution`).
        """
        plan = self.plan
        run_context.set(RunContext(plan.run_id, str(plan.spec_dir), plan.store))
        report = ShardReport(shard=shard.index)
        todo = []
        for position, trial in shard.work:
            if (plan.items[position].item_id, trial) in plan.done:
                report.already_done += 1
            else:
                todo.append((plan.items[position], trial))
        batch = _Batch(plan, shard.index, writer or plan.lease)
        pending = iter(todo)
        run_item = self._run_item

        async def drain() -> None:
            for item, trial in pending:
                if plan.monitor is not None and plan.monitor.stop:  # its compare is decided: admit no more
                    return
                if self._breaker.stop is not None:  # another shard's items tripped it: send no more
                    raise TargetUnreachable(str(self._breaker.stop))
                finished = await run_item(item, trial)
                outcome = finished.item["outcome"]
                report.executed[outcome] = report.executed.get(outcome, 0) + 1
                await batch.add(finished)
                calls = finished.item.get("operations") or 0
                cached = calls > 0 and finished.item.get("operations_cached") == calls
                progress.current().item_done(outcome, finished.item.get("cost_usd"), cached)
                try:
                    self._breaker.observe(finished.item)
                except TargetUnreachable:
                    for worker in self._draining:
                        if worker is not asyncio.current_task():
                            worker.cancel()
                    raise

        # A few workers draining the shard rather than a task per item (cheaper by ~10 us an item);
        # the run-wide limiter in the gate still bounds the target calls in flight.
        workers = [asyncio.ensure_future(drain()) for _ in range(min(self.width, len(todo)))]
        self._draining.update(workers)
        try:
            await asyncio.gather(*workers)
        except asyncio.CancelledError:
            stop = self._breaker.stop
            this = asyncio.current_task()
            if stop is None or (this is not None and this.cancelling()):
                raise
            raise TargetUnreachable(str(stop)) from None  # another shard's items tripped the breaker
        finally:
            self._draining.difference_update(workers)
            # On cancellation or an infrastructure error, stop the shard's other items (a retry
            # runs them again) and commit what finished, so none of it runs twice — once they have
            # stopped, so that none adds an item after the last commit.
            for worker in workers:
                worker.cancel()
            try:
                if workers:
                    await asyncio.wait(workers)
            finally:
                await batch.close()
        return report


@dataclass(frozen=True, slots=True)
class PlainItems:
    """Each item one call of the open `target`, admitted by the run's `gate`, scored by its
    `scoring` once the call's slot is free again."""

    target: Target
    gate: Gate
    scoring: Scoring

    async def __call__(self, item: Item, trial: int) -> Finished:
        gate, target = self.gate, self.target
        async with gate as opening:
            if opening is None:
                return Finished(skipped_row(item, trial), [], [])
            called = await gate.call(
                item, trial, opening, lambda: target(item, trial), instrumented=target.instrumented
            )
        result, generation = called.result, called.generation
        if result is None:
            operation_ids, requests = captured([called.scope])
            row: ItemRow = {**called.stopped, **generation.columns(), "operation_ids": operation_ids}
            return Finished(row, [], requests)
        row = completed_row(item, trial, opening.started_at, called.duration_ms, result)
        row["queued_ms"] = opening.queued_ms
        scored = await self.scoring.score(
            item, trial, result.output, trajectory=result.trajectory, tool_calls=result.calls
        )
        operation_ids, requests = captured([called.scope, *scored.scopes])
        # Deterministic scorers spend nothing: then the item's spend is its generation's.
        spend = Accounting.total([generation, *scored.judging]) if scored.judging else generation
        row.update(spend.columns(), operation_ids=operation_ids)
        return Finished(row, scored.rows, requests, (), gauge_values(row, result, generation))


@dataclass(frozen=True, slots=True)
class SandboxedItems:
    """Each item one attempt in a sandbox of the open `target` (`assay.targets.SandboxedTarget`):
    run, scored while it lives, torn down last. The `gate`'s slot is held throughout, so
    `concurrency` bounds the sandboxes alive at once."""

    target: Any
    gate: Gate
    scoring: Scoring

    async def __call__(self, item: Item, trial: int) -> Finished:
        async with self.gate as opening:
            if opening is None:  # judges' spend counts; no new sandbox once it is reached
                return Finished(skipped_row(item, trial), [], [])
            attempt = await self.target.begin(item, trial)
            try:
                if attempt.failure is not None:
                    row = failed_row(item, trial, opening.started_at, opening.started, attempt.failure)
                    row.update(Accounting.uninstrumented().columns(), queued_ms=opening.queued_ms)
                    finished = Finished(row, [], [])
                else:
                    result = attempt.result
                    row = completed_row(
                        item,
                        trial,
                        opening.started_at,
                        (time.perf_counter() - opening.started) * 1000,
                        result,
                    )
                    row["queued_ms"] = opening.queued_ms
                    scored = await self.scoring.score_live(item, trial, attempt)
                    operation_ids, requests = captured(list(scored.scopes))
                    generation = Accounting.uninstrumented()
                    row.update(
                        Accounting.total([generation, *scored.judging]).columns(),
                        operation_ids=operation_ids,
                    )
                    finished = Finished(row, scored.rows, requests, (), gauge_values(row, result, generation))
            finally:
                teardown_error = await attempt.close()
            finished.item["teardown_error"] = teardown_error
            if attempt.facts is not None:  # now with the scoring and cleanup timings
                finished.item["sandbox"] = to_json(attempt.facts)
            return finished


@dataclass(slots=True)
class _Rows:
    """The rows of the items a batch holds."""

    items: list[ItemRow] = field(default_factory=list)
    scores: list[ScoreRow] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    turns: list[TurnRow] = field(default_factory=list)
    gauges: list[Any] = field(default_factory=list)


class _Batch:
    """Rows waiting to be committed, flushed by size (`_BATCH_ROWS`) or age (`_BATCH_SECONDS`
    since its first row).

    The age is kept by a timer started with the batch's first row, not only looked at when
    another item finishes: an item that ends while its batch is young would otherwise wait for
    the next to end — an agent's next attempt minutes later, a provider's next batch hours later —
    and be lost with the process meanwhile.

    Commits run on a thread of their own, one at a time and in order (`_COMMITS`): writing
    Parquet releases the GIL, so the loop goes on running items while a batch is written (and
    waits for it when the next batch is full before it is written). What
    a commit changes in the plan (`done`, the capture's and the monitor's counts) is changed back
    on the loop once it is written. A failed commit (the lease lost, the store failing) is raised
    by the next `add`, or by `close`.
    """

    def __init__(self, plan: RunPlan, shard: int, writer: Writer) -> None:
        self._plan = plan
        self._shard = shard
        self._writer = writer
        self._rows = _Rows()
        self._since = time.monotonic()  # when the batch's first row came
        self._timer: asyncio.TimerHandle | None = None
        self._committing: asyncio.Future[None] | None = None

    async def add(self, finished: Finished) -> None:
        committing = self._committing
        if committing is not None and committing.done():
            committing.result()  # a failed commit stops the shard here
        rows = self._rows
        item = finished.item
        # 0, or with `--retry-failed` the next after the failed row it replaces (kept as history).
        item.update(self._plan.retry_columns(item["item_id"], item["trial"]))
        for turn in finished.turns:
            turn["retry"] = item["retry"]
        if not rows.items:
            self._since = time.monotonic()
            self._timer = asyncio.get_running_loop().call_later(_BATCH_SECONDS, self._flush)
        rows.items.append(item)
        rows.gauges.append(finished.gauges)
        rows.scores.extend(finished.scores)
        rows.requests.extend(finished.requests)
        rows.turns.extend(finished.turns)
        if self._due():
            if self._committing is not None and not self._committing.done():
                # One batch is written at a time: a store slower than the items wait for it.
                await asyncio.shield(self._committing)
            if self._due():  # unless another worker flushed it meanwhile
                self._flush()

    def _due(self) -> bool:
        return len(self._rows.items) >= _BATCH_ROWS or time.monotonic() - self._since >= _BATCH_SECONDS

    async def close(self) -> None:
        """Commit what is left, and wait until every commit is written. Shielded: a commit
        under way finishes even when the shard is cancelled again meanwhile."""
        self._flush()
        if self._committing is not None:
            await asyncio.shield(self._committing)

    def _flush(self) -> None:
        # Taken out of the batch first: whatever interrupts the commit, a later flush (the shard's
        # last, in `close`) never commits these rows a second time.
        rows, self._rows = self._rows, _Rows()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if rows.items:
            self._committing = asyncio.ensure_future(self._commit(rows, self._committing))

    async def _commit(self, rows: _Rows, previous: asyncio.Future[None] | None) -> None:
        if previous is not None:
            await previous  # in order; once one failed, no later batch is committed
        plan = self._plan
        context = contextvars.copy_context()
        await asyncio.get_running_loop().run_in_executor(_COMMITS, context.run, self._write, rows)
        plan.capture.committed(sum(r["bytes"] for r in rows.requests))
        # A retried shard (Prefect retries a failed task) must not run these again.
        plan.done.update((row["item_id"], row["trial"]) for row in rows.items)
        if plan.monitor is not None:
            plan.monitor.committed(rows.items, rows.scores)

    def _write(self, rows: _Rows) -> None:
        """Write the batch's parts, if this process still holds the run (`Lease.check`, and
        `Lease.after_commit` once the parts are written). Runs on the commit thread."""
        plan = self._plan
        writer = self._writer
        writer.check()
        # The lease generation in the name fences a paused writer (assay/store/lease.py); the random
        # suffix puts a resumed shard's parts beside, never over, its earlier ones.
        part = writer.part_name(self._shard)
        plan.store.commit_batch(
            plan.run_id,
            part,
            ITEMS.table(rows.items),
            pa.concat_tables([SCORES.table(rows.scores), gauges_table(rows.items, rows.gauges)]),
            requests_table(rows.requests) if rows.requests else None,
            TURNS.table(rows.turns) if rows.turns else None,
        )
        writer.after_commit(f"{part}.parquet")


# Every batch of the process is committed on this one thread, in turn, as the loop committed
# them when it wrote them itself: the store's writers need not be safe to run at once.
_COMMITS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="assay-commit")
