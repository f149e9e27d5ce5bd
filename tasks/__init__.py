"""Prefect tasks: where retries and caching attach to Assay's plain functions.

`orchestrated(task)` is how a flow calls a task: the task itself inside a Prefect flow run, its
plain function otherwise — the embedded path the terminal takes when no Prefect API is
configured (see docs/prefect.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect.context import FlowRunContext

from assay.run.plan import MAX_SHARDS
from tasks.shards import run_shard

__all__ = ["orchestrated", "run_shard", "shard_limit"]


def orchestrated(task: Any) -> Callable[..., Any]:
    """The task inside a Prefect flow run; its undecorated function outside one."""
    return task if FlowRunContext.get() is not None else task.fn


def shard_limit() -> int:
    """How many shards to cut a run into: up to 8 tasks inside a Prefect flow run (each cached and
    retried on its own, visible in the UI); one outside, where a shard is no task — and fewer,
    larger Parquet parts make the embedded path ~20 % faster (docs/performance.md)."""
    return MAX_SHARDS if FlowRunContext.get() is not None else 1
