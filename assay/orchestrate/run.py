"""Driving one `assay run`: plan, gold check, execute every cell, close — plain code, no Prefect.

`flows/run.py` wraps `drive_run` in the Prefect flow `assay-run` and hands it a `Host` that
names the flow run, runs each shard as a task and publishes the summary as an artifact. The
terminal's embedded path (docs/prefect.md) calls it with the default `Host()` — one shard, run as
a plain coroutine — and so never imports Prefect, which is ~2 s of a whole `assay run` process.

It lives here rather than in `assay/run/` because closing a run summarises it (`assay.analysis`),
a layer above `assay.run`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from assay.analysis.summary import mark_unavailable, matrix_summary
from assay.orchestrate.finish import finish_run
from assay.run import progress
from assay.run.execute import Executor, ShardExecutor, ShardReport
from assay.run.gold import gold_check_failures
from assay.run.plan import RunPlan, Shard, open_runs
from assay.sandbox.hygiene import clean_after
from assay.store import Store
from assay.targets import makes_containers, open_target


async def _run_shard(executor: ShardExecutor, shard: Shard) -> ShardReport:
    return await executor.run_shard(shard)


def _name_nothing(name: str) -> None:
    return None


async def _publish_nothing(summary: dict[str, Any]) -> None:
    return None


@dataclass(frozen=True, slots=True)
class Host:
    """What runs the driver and what it adds: nothing (embedded, the default), or a Prefect flow
    run (`flows/run.py`).

    Args:
        flow_run_id: the Prefect flow run's id, recorded on the run.
        default_run_id: the run id when none is given (under Prefect: derived from the flow run,
            so a retry of the flow run resumes the same run).
        shards: how many shards to cut a run into (one embedded: a shard exists to be a task).
        run_shard: executes one shard (under Prefect: the cached, retried shard task).
        name: names the host's record of the run (the flow run).
        publish: publishes a run's summary (a Prefect artifact).
    """

    flow_run_id: str | None = None
    default_run_id: str | None = None
    shards: int = 1
    run_shard: Callable[[ShardExecutor, Shard], Awaitable[ShardReport]] = _run_shard
    name: Callable[[str], None] = _name_nothing
    publish: Callable[[dict[str, Any]], Awaitable[None]] = _publish_nothing


async def drive_run(
    spec: str,
    store: str | None = None,
    run_id: str | None = None,
    resume: bool = False,
    cell: str | None = None,
    extra_tags: list[str] | None = None,
    *,
    retry_failed: list[str] | None = None,
    check_keys: bool = False,
    host: Host = Host(),
) -> dict[str, Any]:
    """Run an eval spec and return its summary (a matrix spec: every cell, and a matrix summary).

    Args:
        spec: path to the eval spec (YAML).
        store: the store's root folder; default `ASSAY_STORE` or `./assay-store`.
        run_id: the run's id (a matrix's id for a matrix spec); default `host.default_run_id`,
            else a new one.
        resume: continue `run_id`, executing only its unfinished items.
        cell: with `resume`, the one cell of a matrix spec that `run_id` is.
        extra_tags: tags added to the spec's on the run (the nightly flow adds `nightly`).
        retry_failed: with `resume`, run again the failed items of these failure kinds too (empty:
            every kind), keeping their failed rows as history (`open_runs`).
        check_keys: try each agent's provider key with one cheap request before anything starts.
        host: what runs this (see `Host`).
    """
    started = time.perf_counter()

    # Validate the spec, dataset and prompts, fix each run's identity, record it as running.
    plans = open_runs(
        spec,
        store=Store(store),
        run_id=run_id or host.default_run_id,
        resume=resume,
        flow_run_id=host.flow_run_id,
        cell=cell,
        extra_tags=extra_tags,
        retry_failed=retry_failed,
        check_keys=check_keys,
    )
    try:
        host.name(f"{plans[0].spec.name} · {plans[0].record['matrix_id'] or plans[0].run_id}")
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
    begun: set[str] = set()
    try:
        ends = await asyncio.gather(
            *(_run(plan, host, started, begun) for plan in plans), return_exceptions=True
        )
    except BaseException as stop:
        # Cancelled before a run's task took its first step: that task never runs, so its run
        # is finished here (the others finish themselves as they unwind).
        for plan in plans:
            if plan.run_id not in begun:
                finish_run(plan, _ms_since(started), stop)
        raise
    for end in ends:
        if isinstance(end, BaseException):
            raise end
    summaries = list(ends)
    for summary in summaries:
        await host.publish(summary)
    matrix_id = plans[0].record["matrix_id"]
    if matrix_id is None or cell is not None:
        return summaries[0]

    # A matrix: rank its cells per scorer against the first cell, and store the leaderboard.
    from assay.analysis.leaderboard import build_leaderboard  # with compare's statistics: matrices only

    return {**matrix_summary(summaries), "leaderboard": build_leaderboard(plans[0].store, matrix_id)}


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


async def _run(plan: RunPlan, host: Host, started: float, begun: set[str]) -> dict[str, Any]:
    """Execute one run while holding its lease, and record how it ended; returns its summary.
    Adds the run's id to `begun` once it is this task's to finish."""
    begun.add(plan.run_id)
    try:
        async with plan.lease.holding():
            await _execute(plan, host)
    except BaseException as stop:
        finish_run(plan, _ms_since(started), stop)
        raise
    return finish_run(plan, _ms_since(started))


async def _execute(plan: RunPlan, host: Host) -> None:
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
        await asyncio.gather(*(host.run_shard(executor, shard) for shard in plan.shards(host.shards)))
    finally:
        await target.aclose()
        if makes_containers(plan.spec):
            await clean_after(plan.run_id)
