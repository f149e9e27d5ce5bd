"""The shard tasks: one slice of a run's items, executed and committed to the store — in the flow
run's process (`run_shard`, cached) or on a Dask worker (`run_worker_shard`, tasks/dask.py)."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.context import TaskRunContext
from prefect.transactions import get_transaction

from assay.errors import LeaseLostError, TargetUnreachable
from assay.orchestrate.worker import WorkerRun, execute_shard
from assay.run.execute import ShardExecutor, ShardReport
from assay.run.plan import Shard
from assay.spec.dataset import Item

# Bump when shard execution changes what it writes, so old cached shard results stop matching.
CODE_VERSION = "1"


def shard_cache_key(context: TaskRunContext, parameters: dict[str, Any]) -> str:
    """(task, code version, run, identity, shard contents, retried items): a resumed run skips
    finished shards, unless `--retry-failed` runs some of their items again; a new run of the same
    spec, having its own run id, never inherits another run's results."""
    plan = parameters["executor"].plan
    shard = parameters["shard"]
    retry = f"-r{plan.retry_digest}" if plan.retry_digest else ""
    return f"assay-run-shard-v{CODE_VERSION}-{plan.run_id}-{plan.identity.digest}-{shard.digest}{retry}"


def worth_retrying(task: Any, task_run: Any, state: Any) -> bool:
    """Retry a failed shard, unless another process took its run over (`LeaseLostError`): a retry
    would only find the lease lost again; nor when the circuit breaker stopped it
    (`TargetUnreachable`, a Dask worker's shard): a retry would send more items to a dead endpoint."""
    return not isinstance(state.data, LeaseLostError | TargetUnreachable)


# How a shard's task run is named and retried, in the flow run's process and on a Dask worker.
SHARD_TASK: dict[str, Any] = {
    "name": "run-shard",
    "task_run_name": "shard-{shard.index}",
    "retries": 2,
    "retry_delay_seconds": 2,
    "retry_condition_fn": worth_retrying,
}


@task(
    **SHARD_TASK,
    cache_key_fn=shard_cache_key,
    persist_result=True,
)
async def run_shard(executor: ShardExecutor, shard: Shard) -> ShardReport:
    """Execute one shard. A retry re-runs only its items not yet committed.

    The circuit breaker's stop (a dead endpoint) is the shard's result, not a task failure: the
    stop is deliberate, so it is not retried, logs no traceback, and the flow ends the run
    `failed` with its message (`assay.orchestrate.drive.Host.run_shards`). Nor is it cached: a
    resume of the run runs the shard's items again."""
    try:
        return await executor.run_shard(shard)
    except TargetUnreachable as stop:
        if (transaction := get_transaction()) is not None:
            transaction.write_on_commit = False
        return ShardReport(shard=shard.index, stopped=str(stop))


# No cache: a resumed run cuts its shards from its unfinished items, so a shard never repeats
# (the commits are what a resume builds on, docs/prefect.md).
@task(**SHARD_TASK, cache_policy=NO_CACHE)
def run_worker_shard(run: WorkerRun, shard: Shard, items: dict[int, Item]) -> ShardReport:
    """Execute one shard on the Dask worker running this task run (a Prefect retry, or Dask
    running it again after its worker died, is a new execution: assay/store/executions.py)."""
    return execute_shard(run, shard, items)
