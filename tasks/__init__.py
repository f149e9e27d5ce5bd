"""Prefect's side of Assay below the flows: where retries, caching and the UI attach to the plain
drivers of `assay.orchestrate`. Everything that imports Prefect is here or in `assay.flows`.

    shards.py   the shard tasks: `run_shard` (cached, retried) and `run_worker_shard` (Dask)
    host.py     the flow run as the drivers' `Host` (`prefect_host`), and how a flow run ends
                (`ending_cleanly`)
    dask.py     a run's shards as task runs on a Dask cluster (prefect-dask)
    publish.py  what the UI shows: the flow run's name, its log lines, artifacts

`current_flow_run()` is the one place that asks "are we inside a Prefect flow run?" — the flows
and tasks ask it, the plain code below them never does. `flow_result` is the one way a finished
flow run's state becomes what it returned.
"""

from __future__ import annotations

import inspect
from typing import Any

from prefect.client.schemas.objects import FlowRun, State
from prefect.context import FlowRunContext

from assay.tasks.shards import run_shard

__all__ = ["current_flow_run", "flow_result", "run_shard"]


def current_flow_run() -> FlowRun | None:
    """The Prefect flow run this code runs in, or None outside one."""
    context = FlowRunContext.get()
    return context.flow_run if context is not None else None


async def flow_result(state: State) -> Any:
    """What a (sub)flow run returned, failed or not: a failed gate fails the flow run, and its
    state still carries the result. The exception of a flow run that raised (bad input, say) is
    raised here.

    Args:
        state: the flow run's final state (the flow called with `return_state=True`).
    """
    result = state.result(raise_on_failure=False)
    if inspect.isawaitable(result):  # asked from async code, Prefect hands the result back to await
        result = await result
    if isinstance(result, BaseException):
        raise result
    return result
