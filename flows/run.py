"""The run flow: a target over a dataset, every output scored, everything stored as Parquet.

The flow is `assay.orchestrate.run.drive_run` — the same plain code the terminal runs embedded —
hosted by a Prefect flow run (`assay.tasks.host`): the run id derives from the flow run (a retry
resumes it), each shard is a cached, retried task, and the summary becomes an artifact.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from prefect import flow
from prefect.client.schemas.objects import State
from prefect.states import Failed

from assay.analysis.summary import failure_message
from assay.orchestrate.run import RunRequest, drive_run
from assay.settings import settings
from assay.spec import spec_title
from assay.tasks import current_flow_run
from assay.tasks.host import ending_cleanly, prefect_host


@flow(name="assay-run", log_prints=False)
async def run_eval(request: RunRequest) -> dict[str, Any] | State:
    """Run an eval spec and return its summary (a matrix spec: every cell, and a matrix summary).

    Bad input (the spec, its dataset, a run to resume) fails the flow run with the message alone,
    as the terminal prints it, and names the flow run after the spec.

    Args:
        request: what to run: the spec, the store, a run to resume, a Dask cluster.
    """
    host = prefect_host()
    dask = request.dask or settings().dask
    title = lambda: spec_title(request.spec)
    if dask is None or host.flow_run_id is None:  # outside a flow run: no task runs to make
        ended = await ending_cleanly(drive_run(request, host=host), title=title)
    else:
        from assay.tasks.dask import dask_task_runner  # prefect-dask: imported only for a cluster

        async with dask_task_runner(dask) as execute:
            ended = await ending_cleanly(drive_run(request, host=replace(host, execute=execute)), title=title)
    return _failed_if_it_failed(ended)


def _failed_if_it_failed(ended: dict[str, Any] | State) -> dict[str, Any] | State:
    """Under Prefect a run that failed its gate, failed (the circuit breaker) or could not start
    fails the flow run — as `assay run` exits non-zero — so schedules and automations see it;
    the state still carries the summary."""
    if isinstance(ended, dict) and current_flow_run() is not None:
        why = failure_message(ended)
        if why is not None:
            return Failed(message=why, data=ended)
    return ended
