"""The nightly flow: `assay.orchestrate.nightly.drive_nightly` with each spec's run and each
comparison a subflow run (`assay-run`, `assay-compare`) of its own in the UI."""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.client.schemas.objects import State
from prefect.states import Failed

from assay.flows.compare import compare_runs
from assay.flows.run import run_eval
from assay.orchestrate.compare import CompareRequest
from assay.orchestrate.nightly import NightlyRequest, drive_nightly
from assay.orchestrate.run import RunRequest
from assay.tasks import current_flow_run, flow_result


async def _run_subflow(request: RunRequest) -> dict[str, Any]:
    # A run that failed its gate fails its subflow run; the state still carries the summary.
    return await flow_result(await run_eval(request, return_state=True))


async def _compare_subflow(request: CompareRequest) -> dict[str, Any]:
    # A failed gate fails the compare subflow; its state still carries the comparison.
    return await flow_result(compare_runs(request, return_state=True))


@flow(name="assay-nightly", log_prints=False)
async def nightly(request: NightlyRequest) -> dict[str, Any] | State:
    """Run each spec, compare it with its last successful nightly run, keep the last `retention`;
    a failed night fails the flow run (its state still carries the report).

    Args:
        request: what the nightly runs: the specs, the store, the retention, the comparison's options.
    """
    document = await drive_nightly(request, run=_run_subflow, compare=_compare_subflow)
    if document["failures"] and current_flow_run() is not None:
        return Failed(message="; ".join(document["failures"]), data=document)
    return document
