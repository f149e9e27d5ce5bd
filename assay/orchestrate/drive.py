"""The skeleton every run and rescore follows, and the `Host` that runs it.

    drive(plans, host, title, execute, check)
    ├── host.name(title); progress started          what the host and the terminal show
    │   (a host that logs: each run's id and store, progress, then each summary in lines)
    ├── check()                                     (a run: the judges' gold check) -> unavailable
    ├── each plan, at once, holding its lease:
    │   execute(plan, host) -> finish_run           completed / failed its gate, cancelled, failed
    └── host.publish(summary)                       (under Prefect: an artifact)

`assay.orchestrate.run.drive_run` and `assay.orchestrate.rescore.drive_rescore` fill it in; the
Prefect flows (`flows/run.py`, `flows/rescore.py`) host them, the terminal's embedded path calls
them with the default `Host()` and so never imports Prefect.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from assay.analysis.lines import summary_lines
from assay.errors import TargetUnreachable
from assay.orchestrate.finish import finish_run
from assay.run import progress
from assay.run import record as run_record
from assay.run.execute import ShardExecutor, ShardReport
from assay.run.plan import RunPlan, Shard


async def _run_shard(executor: ShardExecutor, shard: Shard) -> ShardReport:
    return await executor.run_shard(shard)


def _name_nothing(name: str) -> None:
    return None


async def _publish_nothing(summary: dict[str, Any]) -> None:
    return None


@dataclass(frozen=True, slots=True)
class Host:
    """What runs the driver and what it adds: nothing (embedded, the default), or a Prefect flow
    run (`tasks/host.py`).

    Args:
        flow_run_id: the Prefect flow run's id, recorded on the run.
        default_run_id: the run id when none is given (under Prefect: derived from the flow run,
            so a retry of the flow run resumes the same run).
        shards: how many shards to cut a run into (one embedded: a shard exists to be a task).
        run_shard: executes one shard (under Prefect: the cached, retried shard task).
        name: names the host's record of the run (the flow run).
        publish: publishes a run's summary (a Prefect artifact).
        execute: executes one plan instead of the driver's own `execute` (on a Dask cluster:
            `assay/orchestrate/dask.py`, whose workers open the target themselves).
        log: where the host's log lines go (the flow run's logger, at INFO); None: no log (the
            terminal shows a bar and the summary instead).
    """

    flow_run_id: str | None = None
    default_run_id: str | None = None
    shards: int = 1
    run_shard: Callable[[ShardExecutor, Shard], Awaitable[ShardReport]] = _run_shard
    name: Callable[[str], None] = _name_nothing
    publish: Callable[[dict[str, Any]], Awaitable[None]] = _publish_nothing
    execute: Callable[[RunPlan, Host], Awaitable[None]] | None = None
    log: Callable[[str], None] | None = None

    async def run_shards(self, executor: ShardExecutor) -> None:
        """Execute every shard of the executor's plan, at once. Raises `TargetUnreachable` when
        the circuit breaker stopped them: raised by the shard embedded, a shard task's result
        under Prefect."""
        reports = await asyncio.gather(
            *(self.run_shard(executor, shard) for shard in executor.plan.shards(self.shards))
        )
        stopped = next((report.stopped for report in reports if report.stopped), None)
        if stopped is not None:
            raise TargetUnreachable(stopped)


# The terminal's host: no Prefect, one shard run as a plain coroutine.
EMBEDDED = Host()

Execute = Callable[[RunPlan, Host], Awaitable[None]]


async def drive(
    plans: list[RunPlan],
    *,
    host: Host,
    started: float,
    title: str,
    execute: Execute,
    check: Callable[[], Awaitable[list[str]]] | None = None,
) -> list[dict[str, Any]]:
    """Drive recorded plans to their end; returns each one's summary.

    Args:
        plans: the runs, recorded as running (a matrix's cells, or one).
        host: what runs this.
        started: when the command started (`time.perf_counter`), for each run's wall time.
        title: the host's name for it.
        execute: executes one plan (its lease is held meanwhile).
        check: finds why the runs cannot start (one line each); any makes them all `unavailable`
            and nothing runs.
    """
    if host.log is None:
        return await _drive(plans, host=host, started=started, title=title, execute=execute, check=check)
    for plan in plans:
        host.log(_opening_line(plan))
    with progress.also(progress.Logged(host.log)):
        summaries = await _drive(plans, host=host, started=started, title=title, execute=execute, check=check)
    for summary in summaries:
        for line in summary_lines(summary):
            host.log(line)
    return summaries


def _opening_line(plan: RunPlan) -> str:
    """`run 20261129T102824-dcedf3 of quickstart-arithmetic: 40 items to run (0 done) · store /data/assay-store`."""
    source = plan.record.get("source_run_id")
    cell = plan.record.get("cell")
    return (
        f"{'rescore' if source else 'run'} {plan.run_id} of {plan.spec.name}"
        + (f" (rescore of {source})" if source else "")
        + (f" cell {cell}" if cell else "")
        + f": {plan.total - len(plan.done)} of {plan.total} items to run · store {plan.store.root}"
    )


async def _drive(
    plans: list[RunPlan],
    *,
    host: Host,
    started: float,
    title: str,
    execute: Execute,
    check: Callable[[], Awaitable[list[str]]] | None,
) -> list[dict[str, Any]]:
    """`drive`, the host's log aside."""
    try:
        host.name(title)
        progress.current().started(sum(p.total for p in plans), sum(len(p.done) for p in plans))
        failures = await check() if check is not None else []
    except BaseException as stop:  # a cancellation, or a crash: each run says which
        for plan in plans:
            finish_run(plan, _ms_since(started), stop)
        raise
    execute = host.execute or execute
    if failures:
        summaries = [run_record.unavailable(plan.store, plan.run_id, plan.record, failures) for plan in plans]
        for plan in plans:
            plan.lease.release()
        return summaries

    # Execute every run at once, each holding its lease; each records how it ended (completed or
    # failed its gate, cancelled, failed with its error — or nothing, when another process took it over).
    held: set[str] = set()
    try:
        ends = await asyncio.gather(
            *(_hold(plan, host, started, execute, held) for plan in plans), return_exceptions=True
        )
    except BaseException as stop:
        # Cancelled before a run's task first ran (a SIGTERM just after the runs were recorded):
        # that coroutine never starts, so its run is recorded here rather than left `running`.
        for plan in plans:
            if plan.run_id not in held:
                finish_run(plan, _ms_since(started), stop)
        raise
    for end in ends:
        if isinstance(end, BaseException):
            raise end
    summaries = list(ends)
    for summary in summaries:
        await host.publish(summary)
    return summaries


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


async def _hold(
    plan: RunPlan, host: Host, started: float, execute: Execute, held: set[str]
) -> dict[str, Any]:
    """Execute one plan while holding its lease, and record how it ended; returns its summary.
    Adds the run's id to `held` as it starts: from then on, the ending is recorded here."""
    held.add(plan.run_id)
    try:
        async with plan.lease.holding():
            await execute(plan, host)
    except TargetUnreachable as stop:  # the circuit breaker: a failed run with a summary, no crash
        return finish_run(plan, _ms_since(started), stop)
    except BaseException as stop:
        finish_run(plan, _ms_since(started), stop)
        raise
    return finish_run(plan, _ms_since(started))
