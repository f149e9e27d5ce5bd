"""The Prefect flow run as the plain drivers' host (`assay.orchestrate.drive.Host`)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from prefect.client.schemas.objects import State
from prefect.logging import get_run_logger
from prefect.states import Failed

from assay.errors import InputError
from assay.orchestrate.drive import Host
from assay.run.plan import MAX_SHARDS, new_run_id
from tasks import current_flow_run, run_shard
from tasks.publish import name_flow_run, publish_run_summary


def prefect_host() -> Host:
    """The current flow run as the driver's host: the run id derives from it (a retry of the flow
    run resumes the same run), a run is cut into up to `MAX_SHARDS` shards, each a cached, retried
    task visible in the UI, its id, store, progress and summary are logged at INFO (the flow
    run's Logs tab) and the summary becomes an artifact. Outside a flow run (a flow's `.fn`
    called directly) the embedded host: one shard, a plain coroutine — fewer, larger Parquet parts
    make that path ~20 % faster (docs/performance.md)."""
    flow_run = current_flow_run()
    if flow_run is None:
        return Host()
    return Host(
        flow_run_id=str(flow_run.id),
        default_run_id=new_run_id(flow_run.created, suffix=flow_run.id.hex[:6]),
        shards=MAX_SHARDS,
        run_shard=run_shard,
        name=name_flow_run,
        publish=publish_run_summary,
        # The flow run's own logger, taken here: lines logged from inside a shard task then still
        # belong to the flow run rather than to that task run.
        log=get_run_logger().info,
    )


async def failing_cleanly(
    driven: Coroutine[Any, Any, dict[str, Any]], *, title: Callable[[], str]
) -> dict[str, Any] | State:
    """What a driver returns; on bad input (`InputError`: the spec, its dataset, a run id) a
    failed state whose message is the one the terminal prints, with no traceback in the flow
    run's logs, and the flow run named `<title> · bad input`. Outside a flow run it raises.

    Args:
        driven: the driver's call, e.g. `drive_run(...)`.
        title: what the flow run is named after (the spec), asked only on bad input.
    """
    try:
        return await driven
    except InputError as bad:
        if current_flow_run() is None:
            raise
        name_flow_run(f"{title()} · bad input")
        # The exception rides along as the state's data: a caller awaiting the flow (the nightly,
        # `assay run`) gets it raised, as it would be embedded.
        return Failed(message=str(bad), data=bad)
