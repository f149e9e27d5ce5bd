"""The run flow: a target over a dataset, every output scored, everything stored as Parquet.

The flow is `assay.orchestrate.run.drive_run` — the same plain code the terminal runs embedded —
hosted by a Prefect flow run (`flows/_host.py`): the run id derives from the flow run (a retry
resumes it), each shard is a cached, retried task, and the summary becomes an artifact.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from prefect import flow
from prefect.client.schemas.objects import State
from prefect.states import Failed

from assay.analysis.summary import failure_message
from assay.flows._host import ending_cleanly, prefect_host
from assay.orchestrate.run import drive_run
from assay.spec import spec_title
from assay.tasks import current_flow_run


@flow(name="assay-run", log_prints=False)
async def run_eval(
    spec: str,
    store: str | None = None,
    run_id: str | None = None,
    resume: bool = False,
    cell: str | None = None,
    extra_tags: list[str] | None = None,
    compare_to: str | None = None,
    retry_failed: list[str] | None = None,
    check_keys: bool = False,
    dask: str | None = None,
) -> dict[str, Any] | State:
    """Run an eval spec and return its summary (a matrix spec: every cell, and a matrix summary).

    Bad input (the spec, its dataset, a run to resume) fails the flow run with the message alone,
    as the terminal prints it, and names the flow run after the spec.

    Args:
        spec: path to the eval spec (YAML).
        store: the store's root folder; default `ASSAY_STORE` or `./assay-store`.
        run_id: the run's id (a matrix's id for a matrix spec); default a new one (under Prefect:
            derived from the flow run, so a retry of the flow run resumes the same run).
        resume: continue `run_id`, executing only its unfinished items.
        cell: with `resume`, the one cell of a matrix spec that `run_id` is.
        extra_tags: tags added to the spec's on the run (the nightly flow adds `nightly`).
        compare_to: a baseline run to compare with sequentially (`--compare-to`).
        retry_failed: with `resume`, run again the failed items of these failure kinds too (empty:
            every kind); their failed rows stay as history (`assay resume --retry-failed`).
        check_keys: try each agent's provider key with one cheap request before anything starts.
        dask: a Dask scheduler's address (`tcp://HOST:PORT`); default `ASSAY_DASK`. Its workers
            execute the shards, each a task run `run-shard` (prefect-dask's `DaskTaskRunner`;
            the workers need the Prefect API too: docs/scale.md).
    """
    params = {"retry_failed": retry_failed, "check_keys": check_keys}
    host = prefect_host()
    dask = dask or os.environ.get("ASSAY_DASK") or None
    title = lambda: spec_title(spec)
    if dask is None or host.flow_run_id is None:  # outside a flow run: no task runs to make
        ended = await ending_cleanly(
            drive_run(
                spec, store, run_id, resume, cell, extra_tags, compare_to, **params, dask=dask, host=host
            ),
            title=title,
        )
    else:
        from assay.flows._dask import dask_task_runner  # prefect-dask: imported only for a cluster

        async with dask_task_runner(dask) as execute:
            ended = await ending_cleanly(
                drive_run(
                    spec,
                    store,
                    run_id,
                    resume,
                    cell,
                    extra_tags,
                    compare_to,
                    **params,
                    host=replace(host, execute=execute),
                ),
                title=title,
            )
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
