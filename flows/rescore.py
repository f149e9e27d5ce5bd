"""The rescore flow: new scorers over a stored run's outputs, the target never called."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.context import FlowRunContext

from assay.orchestrate.finish import finish_run
from assay.run import progress
from assay.run.plan import new_run_id
from assay.run.rescore import RescoreExecutor, RescoreSettings, open_rescore, parse_scorers
from assay.sandbox.hygiene import clean_after
from assay.store import Store
from tasks import orchestrated, run_shard, shard_limit
from tasks.publish import name_flow_run, publish_run_summary


@flow(name="assay-rescore", log_prints=False)
async def rescore_run(
    source_run_id: str,
    spec: str | None = None,
    scorers: list[str] | None = None,
    store: str | None = None,
    run_id: str | None = None,
    resume: bool = False,
    budget: str | None = None,
    concurrency: int | None = None,
    capture_requests: bool | None = None,
) -> dict[str, Any]:
    """Score a stored run again with new scorers and return the rescore's summary.

    Args:
        source_run_id: the run whose outputs are scored.
        spec: a YAML file whose `scorers` list is used (an eval spec will do).
        scorers: inline scorers instead, each YAML (`{kind: regex, pattern: "\\d"}`) or a bare kind.
        store: the store's root folder; default `ASSAY_STORE` or `./assay-store`.
        run_id: the rescore's id; default a new one (under Prefect: derived from the flow run).
        resume: continue `run_id` with its stored scorers and settings.
        budget: the rescore's own USD budget for its judging (default: the source's).
        concurrency: items scored at once (default: the source's).
        capture_requests: capture the judges' requests and carry the source's forward (default:
            as the source did).
    """
    started = time.perf_counter()
    flow_run = FlowRunContext.get().flow_run if FlowRunContext.get() else None
    if run_id is None and flow_run is not None:
        run_id = new_run_id(flow_run.created, suffix=flow_run.id.hex[:6])

    # The new scorers (from the rescore's own record when resuming), then the plan over the source's items.
    spec_path = Path(spec).resolve() if spec else None
    new_scorers = None if resume else parse_scorers(spec_path=spec_path, inline=scorers or [])
    plan, source_rows = open_rescore(
        source_run_id,
        new_scorers,
        store=Store(store),
        spec_dir=spec_path.parent if spec_path else Path.cwd(),
        spec_path=spec_path,
        run_id=run_id,
        resume=resume,
        flow_run_id=flow_run and str(flow_run.id),
        settings=RescoreSettings(budget=budget, concurrency=concurrency, capture_requests=capture_requests),
    )
    try:
        name_flow_run(f"rescore {source_run_id} · {plan.run_id}")
        progress.current().started(plan.total, len(plan.done))
        # Score every completed source item in shards; failed ones pass through unscored.
        executor = RescoreExecutor(plan, source_rows)
        async with plan.lease.holding():
            try:
                await asyncio.gather(
                    *(orchestrated(run_shard)(executor, shard) for shard in plan.shards(shard_limit()))
                )
            finally:
                if any(scorer.makes_containers for scorer in plan.spec.scorers):
                    await clean_after(plan.run_id)  # a cancelled scorer's fresh sandbox
    except BaseException as stop:
        # Ctrl-C, SIGTERM or a Prefect cancel: what finished is kept, the rest recorded as
        # cancelled; a crash: recorded as failed with its error; a lost lease: nothing recorded.
        finish_run(plan, (time.perf_counter() - started) * 1000, stop)
        raise

    # Summarise, apply the item-error-rate gate (carried from the source), record the status.
    summary = finish_run(plan, (time.perf_counter() - started) * 1000)
    await publish_run_summary(summary)
    return summary
