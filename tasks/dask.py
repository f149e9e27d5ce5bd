"""A run's shards on a Dask cluster as Prefect task runs, through prefect-dask's `DaskTaskRunner`.

The flow run drives the run (plans, holds the lease, summarises) as `assay/orchestrate/dask.py`
does without Prefect; each shard is the task `run-shard` (`run_worker_shard`, tasks/shards.py)
submitted to the cluster, so it is a task run in the UI with Prefect's retries. docs/scale.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from prefect.futures import as_completed
from prefect_dask import DaskTaskRunner

from assay.errors import InputError
from assay.orchestrate.dask import (
    ClusterCalls,
    ShardReports,
    connect_timeout,
    finish_on_cluster,
    shards_for,
    worker_run,
)
from assay.orchestrate.drive import Host
from assay.run.plan import RunPlan
from assay.tasks.shards import run_worker_shard


@asynccontextmanager
async def dask_task_runner(address: str) -> AsyncIterator[Callable[[RunPlan, Host], Awaitable[None]]]:
    """A host's `execute` that submits each shard to the cluster at `address` as a task run.

    Raises:
        InputError: no Dask scheduler answers at `address` (before anything is written).
    """
    runner = DaskTaskRunner(address=address, client_kwargs={"timeout": connect_timeout()})
    runner.__enter__()
    try:
        try:
            # The client connects on first use; a sync client, so off the flow's event loop.
            await asyncio.to_thread(lambda: runner.client)
        except (OSError, TimeoutError, ValueError, TypeError) as exc:
            raise InputError(
                f"--dask {address}: no Dask scheduler answered there ({type(exc).__name__}: {exc}); "
                "start one with `dask scheduler`, or check the address (tcp://HOST:PORT)"
            ) from None

        async def execute(plan: RunPlan, host: Host) -> None:
            await _execute(runner, plan)

        yield execute
    finally:
        await asyncio.to_thread(runner.__exit__, None, None, None)


async def _execute(runner: DaskTaskRunner, plan: RunPlan) -> None:
    threads = sum((await asyncio.to_thread(runner.client.nthreads)).values())
    run = worker_run(plan)
    futures: list[Any] = [
        runner.submit(
            run_worker_shard,
            {
                "run": run,
                "shard": shard,
                "items": {position: plan.items[position] for position, _ in shard.work},
            },
        )
        for shard in shards_for(plan, threads)
    ]
    cluster = ClusterCalls.of(runner.client)
    reports = ShardReports(plan, cluster)
    try:
        # As they end, waited for off the event loop: the lease's renewals run on it meanwhile.
        ending = as_completed(futures)
        while (future := await asyncio.to_thread(next, ending, None)) is not None:
            await reports.take(await asyncio.to_thread(future.result))
        await reports.close()
        await finish_on_cluster(plan, cluster)
    finally:
        for future in futures:
            future.wrapped_future.cancel()
