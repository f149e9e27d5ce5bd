"""The run flow: a target over a dataset, every output scored, everything stored as Parquet."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from prefect import flow
from prefect.context import FlowRunContext

from assay import progress
from assay.execute import Executor
from assay.plan import new_run_id, open_run
from assay.store import Store
from assay.summary import close_run
from assay.targets import open_target
from tasks import orchestrated, run_shard


@flow(name="assay-run", log_prints=False)
async def run_eval(
    spec: str,
    store: str | None = None,
    run_id: str | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """Run an eval spec and return its summary.

    Args:
        spec: path to the eval spec (YAML).
        store: the store's root folder; default `ASSAY_STORE` or `./assay-store`.
        run_id: the run's id; default a new one (under Prefect: derived from the flow run, so a
            retry of the flow run resumes the same run).
        resume: continue `run_id`, executing only its unfinished items.
    """
    started = time.perf_counter()
    flow_run = FlowRunContext.get().flow_run if FlowRunContext.get() else None
    if run_id is None and flow_run is not None:
        run_id = new_run_id(flow_run.created, suffix=flow_run.id.hex[:6])

    # Validate the spec, dataset and prompts, fix the run's identity, record it as running.
    plan = open_run(spec, store=Store(store), run_id=run_id, resume=resume, flow_run_id=flow_run and str(flow_run.id))
    progress.current().started(plan.total, len(plan.done))

    # Execute every shard against one target and one concurrency limiter.
    target = open_target(
        plan.spec.target, concurrency=plan.spec.concurrency, seed=plan.spec.seed, search_path=str(plan.spec_dir)
    )
    try:
        executor = Executor(plan, target)
        await asyncio.gather(*(orchestrated(run_shard)(executor, shard) for shard in plan.shards()))
    finally:
        await target.aclose()

    # Summarise what the store holds, apply the item-error-rate gate, record the final status.
    return close_run(plan.store, plan.run_id, wall_ms=(time.perf_counter() - started) * 1000)
