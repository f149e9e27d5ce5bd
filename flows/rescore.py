"""The rescore flow: new scorers over a stored run's outputs, the target never called.

The flow is `assay.orchestrate.rescore.drive_rescore` — the same plain code the terminal runs
embedded, on the same skeleton as a run — hosted by a Prefect flow run (`assay.tasks.host`).
"""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.client.schemas.objects import State

from assay.orchestrate.rescore import RescoreRequest, drive_rescore
from assay.tasks.host import ending_cleanly, prefect_host


@flow(name="assay-rescore", log_prints=False)
async def rescore_run(request: RescoreRequest) -> dict[str, Any] | State:
    """Score a stored run again with new scorers and return the rescore's summary. Bad input fails
    the flow run with the message alone (`ending_cleanly`).

    Args:
        request: what to rescore: the source run, the new scorers, the store.
    """
    return await ending_cleanly(
        drive_rescore(request, host=prefect_host()), title=lambda: f"rescore {request.source_run_id}"
    )
