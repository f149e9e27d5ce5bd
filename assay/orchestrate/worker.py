"""A Dask worker's side of a run: execute shards of a run another process drives (docs/scale.md).

    execute_shard(run, shard, items)     the task the driver submits, once per shard (Dask runs it
                                         again elsewhere when a worker dies)
    forget_run(run_id, token)            closes the run's target in this process, once it ended

Nothing here imports Dask when it is imported: the functions are plain, pickled by the driver and
called by a worker in one of its threads. Every shard of a run executed by one worker process
shares one event loop (a thread of its own), one open target and its limiter and rate controller,
built the way the driver builds them in a local run (`open_plan_target`); each shard's commits are
fenced by its `ShardExecution` under the driver's lease. What must be the run's, not the worker's, is
kept in step through the worker's scheduler (imported then: `assay.calls.fleet_dask`): the budget
(`assay.calls.budget_share`) and a sequential compare's stop (`FollowedCompare`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.calls import rate
from assay.calls.accounting import Budget
from assay.calls.budget_share import SharedBudget, budget_key
from assay.orchestrate.loop import event_loop_factory
from assay.orchestrate.target import close_plan_target, open_plan_target
from assay.outcomes import ScorerOutcome
from assay.run.execute import ShardExecutor, ShardReport
from assay.run.identity import Identity
from assay.run.plan import RunPlan, Shard, committed_request_bytes
from assay.spec import EvalSpec
from assay.spec.dataset import Item
from assay.store import Store
from assay.store.executions import FollowedLease, ShardExecution
from assay.targets import Target

_CHECK_TIMEOUT_S = 10.0  # the scheduler is slow to say whether the run was stopped: run anyway

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WorkerRun:
    """What a worker needs of a run to execute its shards: sent with each shard (small: the
    items go with their shards).

    Args:
        run_id: the run.
        store: the store's root, as every worker reaches it (`s3://…`, or a shared folder).
        spec: the validated spec.
        spec_dir: the spec's folder (user code; must exist at this path on the workers).
        identity: the run's identity.
        record: the run's record as the driver wrote it (the target's preflight snapshot).
        token: the driver's lease token: a worker commits while it still holds the run.
        generation: the driver's lease generation, in every part's name.
        retried: `--retry-failed`'s items and the `retry` of their failed rows.
        spent_usd: what the run had spent when the driver planned it (the run's budget, kept
            by the scheduler, counts from there: `assay.calls.budget_share`).
    """

    run_id: str
    store: str
    spec: EvalSpec
    spec_dir: str
    identity: Identity
    record: dict[str, Any]
    token: str
    generation: int
    retried: dict[tuple[str, int], int]
    spent_usd: float


class _Executing:
    """One run in this worker process: its plan (the items of the shards it was sent), open
    target and executor, shared by every shard of the run it executes."""

    def __init__(self, run: WorkerRun, scheduler: str | None) -> None:
        store = Store(run.store)
        self.lease = FollowedLease(store, run.run_id, run.token, run.generation)
        self.items: dict[int, Item] = {}
        self.plan = RunPlan(
            run_id=run.run_id,
            spec=run.spec,
            spec_dir=Path(run.spec_dir),
            items=self.items,  # type: ignore[arg-type] - indexed by position, like the driver's list
            identity=run.identity,
            store=store,
            record=run.record,
            done=set(),
            lease=self.lease,
            work=[],
            retried=run.retried,
            # The capture's limit counts the run's stored requests when this worker retries
            # failed items (its plan holds no done ones); the budget is the scheduler's (`_budget`).
            stored_bytes=committed_request_bytes(store, run.run_id) if run.retried else 0,
        )
        self.plan.budget = _budget(run, scheduler)
        self.target: Target = open_plan_target(self.plan)
        self.executor = ShardExecutor.for_target(self.plan, self.target)
        self.compare: FollowedCompare | None = None
        self.watching: asyncio.Task[None] | None = None
        compare, scorer = run.spec.compare_to, run.spec.compared_scorer
        if compare is not None and scorer is not None:
            self.compare = self.plan.monitor = FollowedCompare(scorer)
            if compare.stop == "decided" and scheduler is not None:
                event = stop_event(run.run_id, run.generation)
                self.watching = asyncio.ensure_future(self.compare.watch(scheduler, event))
            else:
                self.compare.checked.set()


def _budget(run: WorkerRun, scheduler: str | None) -> Budget:
    """The run's budget in this worker: the run's spend kept by the scheduler, not this process's."""
    if run.spec.budget_usd is None or scheduler is None:
        return Budget(run.spec.budget_usd, spent_usd=run.spent_usd)
    from assay.calls.fleet_dask import DaskBudgetLink

    return SharedBudget(
        run.spec.budget_usd,
        run.spent_usd,
        key=budget_key(run.run_id, run.generation),
        link=DaskBudgetLink(scheduler),
    )


@asynccontextmanager
async def _reporting(budget: Budget) -> AsyncIterator[None]:
    """While a shard runs, its worker's spend reaches the run's budget as it is spent; once more
    when it ends, before the driver reads the run's total."""
    if not isinstance(budget, SharedBudget):
        yield
        return
    task = asyncio.create_task(budget.keep_reporting(), name=f"budget {budget.key}")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await budget.sync()


class FollowedCompare:
    """A worker's side of its run's sequential compare (`compare_to`; the driver keeps the
    sequence, `assay.analysis.monitor`): it keeps what the driver needs of each committed batch for
    the next shard report, and stops admitting items once the driver says the compare decided (a
    Dask event the driver sets; `watch`).

    Args:
        scorer: the compared scorer.
    """

    def __init__(self, scorer: str) -> None:
        self.stop = False
        self.scorer = scorer
        self.checked = asyncio.Event()  # the driver's word is known (the event read once)
        self._items: list[dict[str, Any]] = []
        self._scores: list[dict[str, Any]] = []

    def committed(self, items: list[dict[str, Any]], scores: list[dict[str, Any]]) -> None:
        self._items += [{"item_id": r["item_id"], "trial": r["trial"]} for r in items]
        self._scores += [
            {k: r[k] for k in ("item_id", "trial", "scorer", "outcome", "score")}
            for r in scores
            if r.get("scorer") == self.scorer and r.get("outcome") == ScorerOutcome.SCORED
        ]

    def report(self, report: ShardReport) -> ShardReport:
        """`report` with the rows committed since the last report (any shard's: they all reach
        the driver)."""
        report.compared_items, self._items = self._items, []
        report.compared_scores, self._scores = self._scores, []
        return report

    async def watch(self, scheduler: str, event: str) -> None:
        """Stop admitting items once `event` is set (run until cancelled)."""
        from assay.calls.fleet_dask import wait_for_event

        def checked(is_set: bool) -> None:
            self.stop = is_set
            self.checked.set()

        try:
            await wait_for_event(scheduler, event, checked=checked)
            self.stop = True
        except (
            ConnectionError
        ) as exc:  # the driver's summary still has every row; only stopping early is lost
            logger.warning("run %s: cannot hear the driver stop it (%s); its items run on", event, exc)
        finally:
            self.checked.set()


def stop_event(run_id: str, generation: int) -> str:
    """The Dask event that tells an execution's workers its sequential compare decided."""
    return f"assay-stop-{run_id}-g{generation}"


_runs: dict[tuple[str, str], _Executing] = {}
_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def _shard_loop() -> asyncio.AbstractEventLoop:
    """This process's event loop for shards, in a thread of its own: Dask calls `execute_shard`
    from its worker threads, and shards of one run must share a loop to share a target."""
    global _loop
    with _lock:
        if _loop is None:
            loop = event_loop_factory()()
            threading.Thread(target=loop.run_forever, name="assay-shards", daemon=True).start()
            _loop = loop
        return _loop


def execute_shard(run: WorkerRun, shard: Shard, items: dict[int, Item]) -> ShardReport:
    """Execute one shard in this worker process: its items not committed by an earlier execution
    of it, committed as parts of the run fenced by this execution (`ShardExecution`).

    Args:
        run: the run.
        shard: the shard (positions in the run's items, and trials).
        items: the shard's items by position.

    Raises:
        LeaseLostError: the driver no longer holds the run, or a later execution of this shard began.
    """
    # Only here, in Dask's task thread, is the worker (so its scheduler) known; the shards' loop
    # thread makes the rate controllers: the run's workers share one window through the scheduler.
    rate.use_share(rate.current_share())
    scheduler = rate.worker_scheduler()
    return asyncio.run_coroutine_threadsafe(_execute(run, shard, items, scheduler), _shard_loop()).result()


async def _execute(
    run: WorkerRun, shard: Shard, items: dict[int, Item], scheduler: str | None
) -> ShardReport:
    key = (run.run_id, run.token)
    executing = _runs.get(key)
    if executing is None:
        # A new driver of the run (a resume): the earlier one's target here is closed.
        for earlier in [k for k in _runs if k[0] == run.run_id]:
            await _forget(*earlier)
        executing = _runs[key] = _Executing(run, scheduler)
    executing.items.update(items)
    execution = ShardExecution(executing.lease, shard.index)
    accepted = execution.begin()
    if accepted:
        executing.plan.done.update(executing.plan.store.done_keys(run.run_id, parts=accepted))
    compare = executing.compare
    if compare is not None:  # a worker joining late must not start items of a decided run
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_CHECK_TIMEOUT_S):
                await compare.checked.wait()
    async with _reporting(executing.plan.budget):
        report = await executing.executor.run_shard(shard, execution)
    return compare.report(report) if compare is not None else report


def forget_run(run_id: str, token: str) -> bool:
    """Close the run's target in this worker process (the driver calls it on every worker when
    the run ended); True when this process had executed some of the run."""
    if _loop is None:
        return False
    return asyncio.run_coroutine_threadsafe(_forget(run_id, token), _loop).result()


async def _forget(run_id: str, token: str) -> bool:
    executing = _runs.pop((run_id, token), None)
    if executing is None:
        return False
    if executing.watching is not None:
        executing.watching.cancel()
    await close_plan_target(executing.plan, executing.target)
    if isinstance(executing.plan.budget, SharedBudget):
        executing.plan.budget.close()
    return True
