"""The run flow: a target over a dataset, every output scored, everything stored as Parquet."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from prefect import flow
from prefect.context import FlowRunContext

from assay.analysis.leaderboard import build_leaderboard
from assay.analysis.summary import mark_unavailable, matrix_summary
from assay.orchestrate.finish import finish_run
from assay.run import progress
from assay.run.execute import Executor
from assay.run.gold import gold_check_failures
from assay.run.plan import RunPlan, new_run_id, open_runs
from assay.sandbox.hygiene import clean_after
from assay.store import Store
from assay.targets import makes_containers, open_target
from tasks import orchestrated, run_shard, shard_limit
from tasks.publish import name_flow_run, publish_run_summary


@flow(name="assay-run", log_prints=False)
async def run_eval(
    spec: str,
    store: str | None = None,
    run_id: str | None = None,
    resume: bool = False,
    cell: str | None = None,
    extra_tags: list[str] | None = None,
) -> dict[str, Any]:
    """Run an eval spec and return its summary (a matrix spec: every cell, and a matrix summary).

    Args:
        spec: path to the eval spec (YAML).
        store: the store's root folder; default `ASSAY_STORE` or `./assay-store`.
        run_id: the run's id (a matrix's id for a matrix spec); default a new one (under Prefect:
            derived from the flow run, so a retry of the flow run resumes the same run).
        resume: continue `run_id`, executing only its unfinished items.
        cell: with `resume`, the one cell of a matrix spec that `run_id` is.
        extra_tags: tags added to the spec's on the run (the nightly flow adds `nightly`).
    """
    started = time.perf_counter()
    flow_run = FlowRunContext.get().flow_run if FlowRunContext.get() else None
    if run_id is None and flow_run is not None:
        run_id = new_run_id(flow_run.created, suffix=flow_run.id.hex[:6])

    # Validate the spec, dataset and prompts, fix each run's identity, record it as running.
    plans = open_runs(
        spec,
        store=Store(store),
        run_id=run_id,
        resume=resume,
        flow_run_id=flow_run and str(flow_run.id),
        cell=cell,
        extra_tags=extra_tags,
    )
    try:
        name_flow_run(f"{plans[0].spec.name} · {plans[0].record['matrix_id'] or plans[0].run_id}")
        progress.current().started(sum(p.total for p in plans), sum(len(p.done) for p in plans))
        # The judge self-check: a scorer that cannot pass the gold answer makes the eval unavailable.
        failures = [failure for plan in plans for failure in await gold_check_failures(plan)]
    except BaseException as stop:  # a cancellation, or a crash: each run says which
        for plan in plans:
            finish_run(plan, _ms_since(started), stop)
        raise
    if failures:
        summaries = [mark_unavailable(plan.store, plan.run_id, failures) for plan in plans]
        for plan in plans:
            plan.lease.release()
        return summaries[0] if len(summaries) == 1 else {**summaries[0], "cells": summaries}

    # Execute every run (every cell of a matrix at once), each against its own target and limiter,
    # each holding its lease; each records how it ended (completed or failed its gate, cancelled,
    # failed with its error — or nothing, when another process took it over).
    ends = await asyncio.gather(*(_run(plan, started) for plan in plans), return_exceptions=True)
    for end in ends:
        if isinstance(end, BaseException):
            raise end
    summaries = list(ends)
    for summary in summaries:
        await publish_run_summary(summary)
    matrix_id = plans[0].record["matrix_id"]
    if matrix_id is None or cell is not None:
        return summaries[0]

    # A matrix: rank its cells per scorer against the first cell, and store the leaderboard.
    return {**matrix_summary(summaries), "leaderboard": build_leaderboard(plans[0].store, matrix_id)}


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


async def _run(plan: RunPlan, started: float) -> dict[str, Any]:
    """Execute one run while holding its lease, and record how it ended; returns its summary."""
    try:
        async with plan.lease.holding():
            await _execute(plan)
    except BaseException as stop:
        finish_run(plan, _ms_since(started), stop)
        raise
    return finish_run(plan, _ms_since(started))


async def _execute(plan: RunPlan) -> None:
    target = open_target(
        plan.spec.target,
        concurrency=plan.spec.concurrency,
        seed=plan.spec.seed,
        search_path=str(plan.spec_dir),
        run_id=plan.run_id,
        capabilities=json.loads(plan.record["target_snapshot"])
        if plan.record.get("target_snapshot")
        else None,
        store=plan.store,
        redact=plan.spec.redact,
    )
    try:
        executor = Executor(plan, target)
        await asyncio.gather(
            *(orchestrated(run_shard)(executor, shard) for shard in plan.shards(shard_limit()))
        )
    finally:
        await target.aclose()
        if makes_containers(plan.spec):
            await clean_after(plan.run_id)
