"""The shard task on a Dask cluster: a shard executed by a Dask worker as a Prefect task run.

Submitted through prefect-dask's `DaskTaskRunner` (`flows/_dask.py`): the worker runs the task
run, which reports its states to the Prefect API (the worker's `PREFECT_API_URL`) and executes the
shard as `assay run --dask` does without Prefect (`assay.orchestrate.remote.execute_shard`).
"""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from assay.orchestrate.remote import RemoteRun, execute_shard
from assay.run.execute import ShardReport
from assay.run.plan import Shard
from assay.spec.dataset import Item
from tasks.shards import worth_retrying


# No cache: a resumed run's shards are cut from its unfinished items, so a shard never repeats
# (the commits are what a resume builds on, docs/prefect.md).
@task(
    name="run-shard",
    task_run_name="shard-{shard.index}",
    retries=2,
    retry_delay_seconds=2,
    retry_condition_fn=worth_retrying,
    cache_policy=NO_CACHE,
)
def run_remote_shard(run: RemoteRun, shard: Shard, items: dict[int, Item]) -> ShardReport:
    """Execute one shard on this Dask worker (a retry or a rescheduled task is a new attempt)."""
    return execute_shard(run, shard, items)
