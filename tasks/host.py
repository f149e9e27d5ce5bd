"""The Prefect flow run as the plain drivers' host (`assay.orchestrate.drive.Host`)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from prefect.client.schemas.objects import State
from prefect.exceptions import TerminationSignal
from prefect.logging import get_run_logger
from prefect.states import Cancelled, Failed

from assay.errors import InputError
from assay.orchestrate.drive import Host
from assay.run import progress
from assay.run.plan import MAX_SHARDS, new_run_id
from assay.tasks import current_flow_run, run_shard
from assay.tasks.publish import name_flow_run, publish_run_summary


def prefect_host() -> Host:
    """The current flow run as the driver's host: the run id derives from it (a retry of the flow
    run resumes the same run), a run is cut into up to `MAX_SHARDS` shards, each a cached, retried
    task visible in the UI, its id, store, progress and summary are logged at INFO (the flow
    run's Logs tab) and the summary becomes an artifact. Outside a flow run (a flow's `.fn`
    called directly) the embedded host: one shard, a plain coroutine — fewer, larger Parquet parts
    make that path faster (docs/performance.md)."""
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


def _worker_owned() -> bool:
    """Whether this process was started (by a worker or runner) for the current flow run, which
    then owns its cancellation: it stops the process with SIGTERM."""
    flow_run = current_flow_run()
    return flow_run is not None and os.environ.get("PREFECT__FLOW_RUN_ID") == str(flow_run.id)


@contextmanager
def _sigterm_cancels() -> Iterator[None]:
    """Within the block, SIGTERM cancels the current task at its next `await`, as Ctrl-C does at
    a terminal (`assay.cli._flows`), so the runs are recorded `cancelled` and the flow run ends
    in a state. Prefect's own handler raises `TerminationSignal` at whatever bytecode runs —
    between a batch's commit and its bookkeeping, say, or inside the engine where nothing of
    ours sees it. Outside the main thread (no signals there) it changes nothing."""
    task, loop = asyncio.current_task(), asyncio.get_running_loop()

    def cancel(signum: int, frame: object) -> None:
        if task is not None:
            loop.call_soon_threadsafe(task.cancel)

    try:
        previous = signal.signal(signal.SIGTERM, cancel)
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


async def ending_cleanly(
    driven: Coroutine[Any, Any, dict[str, Any]], *, title: Callable[[], str]
) -> dict[str, Any] | State:
    """What a driver returns; or the flow run's end as a state, where Prefect would otherwise say
    less (outside a flow run, these raise):

    - bad input (`InputError`: the spec, its dataset, a run id): failed, the message the terminal
      prints and no traceback in the logs, the flow run named `<title> · bad input`;
    - in a process a worker started for this flow run, a cancellation (the UI's Cancel, which
      reaches the process as SIGTERM): cancelled, naming the runs it stopped and how to resume
      them. Let through, a cancellation that the worker owns leaves Prefect's engine logging
      "Finished in state Running()". (`assay run` under Prefect handles its own Ctrl-C and
      SIGTERM, as embedded.)

    Args:
        driven: the driver's call, e.g. `drive_run(...)`.
        title: what the flow run is named after (the spec), asked only on bad input.
    """
    worker_owned = _worker_owned()
    try:
        with _sigterm_cancels() if worker_owned else nullcontext():
            return await driven
    except (asyncio.CancelledError, TerminationSignal):
        if not worker_owned:
            raise
        if (task := asyncio.current_task()) is not None:
            task.uncancel()  # handled here: the engine's own awaits that follow must not see it
        stopped = progress.cancelled_so_far()
        resume = ", ".join(f"`assay resume {run_id}`" for run_id in stopped)
        return Cancelled(
            message="cancelled: finished items are stored" + (f"; {resume} continues" if resume else "")
        )
    except InputError as bad:
        if current_flow_run() is None:
            raise
        name_flow_run(f"{title()} · bad input")
        # The exception rides along as the state's data: a caller awaiting the flow (the nightly,
        # `assay run`) gets it raised, as it would be embedded.
        return Failed(message=str(bad), data=bad)
