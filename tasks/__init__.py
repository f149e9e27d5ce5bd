"""Prefect tasks: where retries and caching attach to Assay's plain functions.

`orchestrated(task)` is how a flow calls a task: the task itself inside a Prefect flow run, its
plain function otherwise — the embedded path the terminal takes when no Prefect API is
configured (see docs/prefect.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect.context import FlowRunContext

from tasks.shards import run_shard

__all__ = ["orchestrated", "run_shard"]


def orchestrated(task: Any) -> Callable[..., Any]:
    """The task inside a Prefect flow run; its undecorated function outside one."""
    return task if FlowRunContext.get() is not None else task.fn
