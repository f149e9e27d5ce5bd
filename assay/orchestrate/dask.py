"""A run's shards on a Dask cluster through `distributed.Client` (`assay run --dask ADDRESS`).

The driver (this process) plans the run, holds its lease, submits one task per shard and
summarises; each worker executes its shards and commits their parts straight to the store
(`assay/orchestrate/worker.py`), fenced per execution (`assay/store/executions.py`). Why and how:
docs/scale.md. Imported only when `--dask` / `ASSAY_DASK` asks for a cluster.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

from distributed import Client, as_completed

from assay.errors import InputError
from assay.orchestrate.drive import Host
from assay.orchestrate.worker import WorkerRun, execute_shard, forget_run, stop_event
from assay.outcomes import BudgetClosedBy
from assay.run import progress
from assay.run.execute import ShardReport
from assay.run.plan import RunPlan, Shard
from assay.settings import settings

# Many more shards than worker threads, so a slow or lost worker costs little of the run, and
# no shard so large that running it again is expensive; never one so small that its task and
# its Parquet parts cost more than its items (Dask's ~1 ms a task, a part per shard at least).
SHARDS_PER_THREAD = 8
MAX_SHARD_ITEMS = 2_000
MIN_SHARD_ITEMS = 25
# A task whose worker dies is run again by the scheduler (up to `allowed-failures`, 3, deaths);
# these retries are for errors it raised (a store write that failed, say).
TASK_RETRIES = 2


def connect_timeout() -> float:
    """Seconds to wait for the scheduler: `ASSAY_DASK_TIMEOUT`, default 10."""
    return settings().dask_timeout


@asynccontextmanager
async def dask_host(address: str, host: Host) -> AsyncIterator[Host]:
    """`host` with its plans' shards executed on the Dask cluster at `address`.

    Raises:
        InputError: no Dask scheduler answers at `address` (checked before anything is written).
    """
    client = await _connect(address)
    try:
        yield replace(host, execute=lambda plan, _host: execute_on(client, plan))
    finally:
        await client.close()


async def _connect(address: str) -> Client:
    try:
        return await Client(address, asynchronous=True, timeout=connect_timeout(), set_as_default=False)
    except (ValueError, TypeError) as exc:
        raise InputError(
            f"--dask {address}: not a Dask scheduler's address (tcp://HOST:PORT): {exc}"
        ) from None
    except (OSError, TimeoutError) as exc:
        raise InputError(
            f"--dask {address}: no Dask scheduler answered there within {connect_timeout():g} s "
            f"({type(exc).__name__}: {exc}); start one with `dask scheduler`, or check the address "
            "(tcp://HOST:PORT)"
        ) from None


def shards_for(plan: RunPlan, threads: int) -> list[Shard]:
    """The run's unfinished work cut for a cluster of `threads` worker threads: at least
    `SHARDS_PER_THREAD` shards a thread, none over `MAX_SHARD_ITEMS` or under `MIN_SHARD_ITEMS`
    items (but the last). None when the run's sequential compare has decided already (a resumed
    run that stopped early stays stopped)."""
    if plan.monitor is not None and plan.monitor.stop:
        return []
    todo = [(p, t) for p, t in plan.work if (plan.items[p].item_id, t) not in plan.done]
    count = max(SHARDS_PER_THREAD * max(threads, 1), math.ceil(len(todo) / MAX_SHARD_ITEMS))
    size = max(MIN_SHARD_ITEMS, math.ceil(len(todo) / count))
    return [
        Shard(index=n, work=tuple(todo[start : start + size]))
        for n, start in enumerate(range(0, len(todo), size))
    ]


def worker_run(plan: RunPlan) -> WorkerRun:
    """What each shard's task carries of the run."""
    return WorkerRun(
        run_id=plan.run_id,
        store=plan.store.root,
        spec=plan.spec,
        spec_dir=str(plan.spec_dir),
        identity=plan.identity,
        record=plan.record,
        token=plan.lease.holder["token"],
        generation=plan.lease.generation,
        retried=plan.retried,
        spent_usd=plan.budget.spent_usd,
    )


async def execute_on(client: Client, plan: RunPlan) -> None:
    """Execute every unfinished item of `plan` on the cluster, one task per shard, and wait for
    them; the progress counts each shard's items as it ends.

    Raises:
        LeaseLostError: a worker found that another process drives the run now.
    """
    threads = sum((await client.nthreads()).values())
    run = worker_run(plan)
    shards = shards_for(plan, threads)
    if not shards:  # every item was committed before this execution (a resume after the last batch)
        return
    futures = [
        client.submit(
            execute_shard,
            run,
            shard,
            {position: plan.items[position] for position, _ in shard.work},
            key=f"assay-shard-{plan.run_id}-g{plan.lease.generation}-{shard.index}",
            retries=TASK_RETRIES,
            pure=False,
        )
        for shard in shards
    ]
    cluster = ClusterCalls.of(client)
    reports = ShardReports(plan, cluster)
    try:
        async for future in as_completed(futures, loop=client.loop):
            await reports.take(await future)
        await reports.close()
        await finish_on_cluster(plan, cluster)
    finally:
        await client.cancel(futures)
        await _forget(cluster, plan)


@dataclass(frozen=True, slots=True)
class ClusterCalls:
    """The two calls a driver makes on its cluster beside submitting shards, awaitable whether
    its Dask client is asynchronous (this module's) or not (prefect-dask's, called off the loop).

    Args:
        on_workers: the client's `run`: a function on every worker.
        on_scheduler: the client's `run_on_scheduler`.
    """

    on_workers: Callable[..., Awaitable[Any]]
    on_scheduler: Callable[..., Awaitable[Any]]

    @classmethod
    def of(cls, client: Client) -> ClusterCalls:
        if client.asynchronous:
            return cls(client.run, client.run_on_scheduler)

        def off_the_loop(call: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
            return lambda *args, **kwargs: asyncio.to_thread(call, *args, **kwargs)

        return cls(off_the_loop(client.run), off_the_loop(client.run_on_scheduler))


async def finish_on_cluster(plan: RunPlan, cluster: ClusterCalls) -> None:
    """Every shard ended: close the run's targets on the workers — their rate-window members
    report their last answers as they close, so only then does the scheduler's controller count
    every call of the run — and take that controller and the run's spend from the scheduler."""
    await _forget(cluster, plan)
    plan.fleet_rate = await _fleet_rate(cluster, plan)
    await take_spend(plan, cluster)


async def _fleet_rate(cluster: ClusterCalls, plan: RunPlan) -> dict[str, Any] | None:
    """The rate controller the run's workers shared, as the scheduler hosts it (None for a target
    without one, or a scheduler that never hosted it)."""
    from assay.calls.fleet_dask import fleet_summary
    from assay.calls.rate import window_name

    name = window_name(plan.spec.target)
    if name is None:
        return None
    try:
        return await cluster.on_scheduler(fleet_summary, name)
    except OSError:  # the scheduler went away: the run still ends, without the fleet's history
        return None


class ShardReports:
    """The driver's side of each shard's report: the progress counts its items, and the run's
    sequential compare (`compare_to`) is fed its committed rows — the workers told to stop
    admitting items once it decides (`assay.orchestrate.worker.FollowedCompare`).

    Args:
        plan: the run.
        cluster: the driver's calls on its cluster.
    """

    def __init__(self, plan: RunPlan, cluster: ClusterCalls) -> None:
        self._plan = plan
        self._on_scheduler = cluster.on_scheduler
        self._event = stop_event(plan.run_id, plan.lease.generation)
        self._stopped = False

    async def take(self, report: ShardReport) -> None:
        for outcome, count in report.executed.items():
            for _ in range(count):
                progress.current().item_done(outcome)
        monitor = self._plan.monitor
        if monitor is None:
            return
        monitor.committed(report.compared_items, report.compared_scores)
        if monitor.stop and not self._stopped:
            from assay.calls.fleet_dask import set_event

            self._stopped = True
            await self._on_scheduler(set_event, self._event)

    async def close(self) -> None:
        """Every shard reported: the compare sees every committed row (those of a shard execution
        whose worker died after committing reached no report), and the event is forgotten."""
        monitor = self._plan.monitor
        if monitor is None:
            return
        from assay.analysis.monitor import feed_stored
        from assay.calls.fleet_dask import clear_event

        feed_stored(monitor, self._plan)
        if self._stopped:
            await self._on_scheduler(clear_event, self._event)


async def take_spend(plan: RunPlan, cluster: ClusterCalls) -> None:
    """The run's spend and what first met its closed budget, as the workers reported them to the
    scheduler (`assay.calls.budget_share`), into the driver's budget: what the run's record stores."""
    if plan.spec.budget_usd is None:
        return
    from assay.calls.budget_share import budget_key
    from assay.calls.fleet_dask import run_budget

    try:
        state = await cluster.on_scheduler(run_budget, budget_key(plan.run_id, plan.lease.generation))
    except OSError:  # the scheduler went away: the record keeps the spend known at planning
        return
    if state is not None:
        plan.budget.spent_usd = float(state["spent_usd"])
        if state["closed_by"] is not None:
            plan.budget.closed_by = BudgetClosedBy(state["closed_by"])


async def _forget(cluster: ClusterCalls, plan: RunPlan) -> Any:
    """Close the run's target on every worker (best effort: a worker that left has no target)."""
    try:
        return await cluster.on_workers(
            forget_run, plan.run_id, plan.lease.holder["token"], on_error="ignore"
        )
    except OSError:
        return None
