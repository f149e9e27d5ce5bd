"""Prefect tasks: where retries and caching attach to Assay's plain functions.

`current_flow_run()` is the one place that asks "are we inside a Prefect flow run?" — the flows
and tasks ask it, the plain code below them never does. `orchestrated(task)` is how a flow calls
a task: the task itself inside a flow run, its plain function outside one (the embedded path the
terminal takes when no Prefect API is configured, docs/prefect.md).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from prefect.client.schemas.objects import FlowRun, State
from prefect.context import FlowRunContext

from assay.tasks.shards import run_shard

__all__ = ["current_flow_run", "flow_result", "orchestrated", "run_shard"]


def current_flow_run() -> FlowRun | None:
    """The Prefect flow run this code runs in, or None outside one."""
    context = FlowRunContext.get()
    return context.flow_run if context is not None else None


def orchestrated(task: Any) -> Callable[..., Any]:
    """The task inside a Prefect flow run; its undecorated function outside one."""
    return task if current_flow_run() is not None else task.fn


async def flow_result(state: State) -> Any:
    """What a (sub)flow run returned, failed or not: a failed gate fails the flow run, and its
    state still carries the result. The exception of a flow run that raised is raised here.

    Args:
        state: the flow run's final state (called with `return_state=True`).
    """
    result = state.result(raise_on_failure=False)
    if inspect.isawaitable(result):  # in an async flow Prefect hands the result back as an awaitable
        result = await result
    if isinstance(result, BaseException):
        raise result
    return result
