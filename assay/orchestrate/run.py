"""Driving one `assay run`: plan, gold check, execute every cell, close — plain code, no Prefect.

`flows/run.py` hosts `drive_run` in the Prefect flow `assay-run`; the terminal's embedded path
(docs/prefect.md) calls it with the default host (`EMBEDDED`) — one shard, run as a plain coroutine — and so
never imports Prefect (its import cost: docs/performance.md).

It lives here rather than in `assay/run/` because closing a run summarises it (`assay.analysis`),
a layer above `assay.run`.
"""

from __future__ import annotations

import math
import time
from typing import Any

from pydantic import BaseModel, ConfigDict

from assay._lazy import warm_up
from assay.analysis.summary import matrix_summary
from assay.calls.batch import BatchCounts
from assay.calls.waits import Wait
from assay.errors import InputError
from assay.orchestrate.drive import EMBEDDED, Host, drive
from assay.orchestrate.target import close_plan_target, open_plan_target
from assay.outcomes import RunStatus
from assay.run import progress
from assay.run.execute import ShardExecutor
from assay.run.gold import gold_check_failures
from assay.run.plan import RunPlan, open_runs
from assay.settings import settings
from assay.store import Store
from assay.targets import kind_of


class RunRequest(BaseModel):
    """What to run: the parameters of `drive_run`, and of the Prefect flow `assay-run` (whose
    deployment form in the UI shows these fields and their descriptions)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    spec: str
    """Path to the eval spec (YAML)."""
    store: str | None = None
    """The store: a folder or `s3://bucket/prefix`; default `ASSAY_STORE`, else `./assay-store`."""
    run_id: str | None = None
    """The run's id (a matrix's id for a matrix spec); default a new one (under Prefect: derived
    from the flow run, so a retry of the flow run resumes the same run)."""
    resume: bool = False
    """Continue `run_id`, executing only its unfinished items."""
    cell: str | None = None
    """With `resume`, the one cell of a matrix spec that `run_id` is."""
    extra_tags: list[str] | None = None
    """Tags added to the spec's on the run (the nightly adds `nightly`)."""
    compare_to: str | None = None
    """A baseline run to compare with as items finish, stopping at the verdict (`--compare-to`;
    the spec's `compare_to` says how)."""
    retry_failed: list[str] | None = None
    """With `resume`, run again the failed items of these failure kinds too (empty: every kind);
    their failed rows stay as history (`assay resume --retry-failed`)."""
    check_keys: bool = False
    """Try each agent's provider key with one cheap request before anything starts."""
    dask: str | None = None
    """A Dask scheduler's address (`tcp://HOST:PORT`); default `ASSAY_DASK`. Its workers execute
    the shards (docs/scale.md; under Prefect each a task run `run-shard`, and the workers need the
    Prefect API too); checked before anything is written."""


async def drive_run(request: RunRequest, *, host: Host = EMBEDDED) -> dict[str, Any]:
    """Run an eval spec and return its summary (a matrix spec: every cell, and a matrix summary).

    Args:
        request: what to run.
        host: what runs this (see `Host`); its `default_run_id` is the run id when none is given.
    """
    dask = request.dask or settings().dask
    if dask is None or host.execute is not None:  # a host with its own `execute`: it has a cluster
        return await _drive_run(request, host)
    try:
        from assay.orchestrate.dask import dask_host  # distributed: imported only for a cluster
    except ModuleNotFoundError as exc:
        raise InputError(
            f"--dask {dask}: Dask is not installed ({exc}); `pip install 'assay[dask]'`"
        ) from None

    async with dask_host(dask, host) as on_cluster:
        return await _drive_run(request, on_cluster)


async def _drive_run(request: RunRequest, host: Host) -> dict[str, Any]:
    started = time.perf_counter()

    # Validate the spec, dataset and prompts, fix each run's identity, record it as running.
    plans = open_runs(
        request.spec,
        store=Store(request.store),
        run_id=request.run_id or host.default_run_id,
        resume=request.resume,
        flow_run_id=host.flow_run_id,
        cell=request.cell,
        extra_tags=request.extra_tags,
        compare_to=request.compare_to,
        retry_failed=request.retry_failed,
        check_keys=request.check_keys,
    )
    if any(plan.spec.compare_to is not None for plan in plans):
        from assay.analysis.monitor import monitor_for  # sequential statistics: compared runs only

        for plan in plans:
            plan.monitor = monitor_for(plan)
    # Polars summarises the runs at their end: it loads while their last items wait on the target.
    last_items = _WarmUpForClosing(
        sum(kind_of(plan.spec.target).in_flight(plan.spec.target, plan.spec.concurrency) for plan in plans)
    )

    async def gold_check() -> list[str]:
        # The judge self-check: a scorer that cannot pass the gold answer makes the eval unavailable.
        return [failure for plan in plans for failure in await gold_check_failures(plan)]

    # Execute every run (every cell of a matrix at once), each against its own target and limiter.
    first = plans[0]
    with progress.also(last_items):
        summaries = await drive(
            plans,
            host=host,
            started=started,
            title=f"{first.spec.name} · {first.record['matrix_id'] or first.run_id}",
            execute=_execute,
            check=gold_check,
        )
    if summaries[0]["status"] == RunStatus.UNAVAILABLE:
        return summaries[0] if len(summaries) == 1 else {**summaries[0], "cells": summaries}
    matrix_id = first.record["matrix_id"]
    if matrix_id is None or request.cell is not None:
        return summaries[0]

    # A matrix: rank its cells per scorer against the first cell, and store the leaderboard.
    from assay.analysis.leaderboard import build_leaderboard  # with compare's statistics: matrices only

    return {**matrix_summary(summaries), "leaderboard": build_leaderboard(first.store, matrix_id)}


async def _execute(plan: RunPlan, host: Host) -> None:
    """Every shard of one run against its own open target; what the run's containers left is removed."""
    target = open_plan_target(plan)
    try:
        await host.run_shards(ShardExecutor.for_target(plan, target))
    finally:
        await close_plan_target(plan, target)


class _WarmUpForClosing:
    """A progress reporter that starts importing Polars (`warm_up`), which closing a run needs,
    once only the last items in flight are left to finish: they wait on the target, and the
    import (holding the GIL) takes that idle time. Started with the run instead, it takes it from
    the loop running items whenever the loop is busy (docs/performance.md).

    Args:
        in_flight: how many items the runs keep in flight at once, all told.
    """

    def __init__(self, in_flight: int) -> None:
        self._in_flight = in_flight
        self._left = math.inf  # items not finished; unknown until `started`

    def started(self, total: int, already_done: int) -> None:
        self._left = total - already_done
        if self._left <= self._in_flight:
            warm_up("polars")

    def item_done(self, outcome: str, cost_usd: float | None = None, cached: bool = False) -> None:
        # Once per item: the count crosses `in_flight` once (when `started` did not warm up).
        self._left -= 1
        if self._left == self._in_flight:
            warm_up("polars")

    def batches(self, label: str, counts: BatchCounts) -> None:
        pass

    def waiting(self, wait: Wait, begun: bool) -> None:
        pass
