"""How a run's execution ends in its record: closed, cancelled, failed — or left to the process
that took it over.

Every way an execution can end goes through `finish_run`, so a run whose record exists never
stays `running` once its process stopped driving it (short of the process being killed, which
`assay resume` recovers).
"""

from __future__ import annotations

import asyncio
from typing import Any

from assay.analysis.summary import close_run
from assay.calls.rate import rate_history
from assay.errors import LeaseLostError, describe
from assay.outcomes import RunStatus
from assay.run import progress
from assay.run import record as run_record
from assay.run.plan import RunPlan
from assay.store.executions import sweep_executions


def is_cancellation(stop: BaseException) -> bool:
    """Ctrl-C, SIGTERM (which the CLI delivers as Ctrl-C), a Prefect cancel, or the event loop
    closing the flow's coroutine as the process goes down (`GeneratorExit`)."""
    return isinstance(stop, asyncio.CancelledError | KeyboardInterrupt | GeneratorExit)


def finish_run(plan: RunPlan, wall_ms: float, stop: BaseException | None = None) -> dict[str, Any]:
    """Record how the execution of `plan` ended, release its lease and return its summary.

    Args:
        plan: the run.
        wall_ms: how long this execution took.
        stop: None when it ran to the end; else what stopped it: a cancellation (recorded as
            `cancelled`), `LeaseLostError` (nothing recorded: the run is another process's now)
            or anything else (a crash, recorded as `failed` with its error).

    Raises:
        LeaseLostError: another process drives the run now; its record is that process's.
    """
    lease = plan.lease
    if isinstance(stop, LeaseLostError):
        raise stop
    # The record is the holder's to write: renewing first also gives the writes below a whole
    # time to live in which no other process can take the run over.
    lease.renew()
    try:
        sweep_executions(plan.store, plan.run_id)  # shards that Dask workers ran more than once
        lease.sweep()
        if stop is None:
            status, error = None, None
        elif is_cancellation(stop):
            status, error = RunStatus.CANCELLED, None
            progress.cancelled(plan.run_id)
        else:
            status, error = RunStatus.FAILED, describe(stop)
            stop.add_note(
                f"run {plan.run_id} is recorded as failed; `assay resume {plan.run_id}` continues it"
            )
        try:
            return close_run(
                plan.store,
                plan.run_id,
                plan.record,
                wall_ms=wall_ms,
                budget=plan.budget,
                capture=plan.capture,
                stopped=status,
                error=error,
                compared=plan.monitor.columns() if plan.monitor is not None else None,
                stopped_early=plan.monitor is not None and plan.monitor.stop,
                rate_control=plan.fleet_rate or rate_history(plan.spec.target),
            )
        except Exception as exc:
            # Even summarising failed (the store itself, most likely): say so, if that can be written.
            run_record.fail(plan.store, plan.run_id, plan.record, describe(stop or exc))
            raise
    finally:
        lease.release()
