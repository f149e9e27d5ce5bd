"""The nightly flow: `assay.orchestrate.nightly.drive_nightly` with each spec's run and each
comparison a subflow run (`assay-run`, `assay-compare`) of its own in the UI; the night's flow run
named after its date (`nightly-2026-12-02`), with each run's report written and the night as a
markdown artifact: each spec's verdict, regressions first, and a link to its report."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from prefect import flow
from prefect.artifacts import acreate_markdown_artifact
from prefect.client.schemas.objects import State
from prefect.logging import get_run_logger
from prefect.states import Failed

from assay.errors import AssayError
from assay.flows.compare import compare_runs
from assay.flows.run import run_eval
from assay.orchestrate.compare import CompareRequest
from assay.orchestrate.nightly import NightlyRequest, drive_nightly, nightly_markdown
from assay.orchestrate.run import RunRequest
from assay.report.render import write_report
from assay.store import Store
from assay.tasks import current_flow_run, flow_result
from assay.tasks.publish import name_flow_run


async def _run_subflow(request: RunRequest) -> dict[str, Any]:
    # A run that failed its gate fails its subflow run; the state still carries the summary.
    return await flow_result(await run_eval(request, return_state=True))


async def _compare_subflow(request: CompareRequest) -> dict[str, Any]:
    # A failed gate fails the compare subflow; its state still carries the comparison.
    return await flow_result(compare_runs(request, return_state=True))


def _night() -> str:
    """`nightly-2026-12-02`: the day the flow run was due (a scheduled run's, though it started late)."""
    flow_run = current_flow_run()
    due = (flow_run.expected_start_time if flow_run is not None else None) or datetime.now(UTC)
    return f"nightly-{due.astimezone(UTC):%Y-%m-%d}"


async def _reports(request: NightlyRequest, document: dict[str, Any]) -> dict[str, str]:
    """Each compared spec's run's HTML report (against its baseline), written into the store: its
    path or URL by run id. A report that cannot be written is logged and left out: the night's
    verdict stands without it."""
    store, written = Store(request.store), {}
    for spec in document["specs"]:
        if "baseline" not in spec:  # a matrix spec: its id names no one run
            continue
        try:
            where = await asyncio.to_thread(write_report, store, spec["run_id"], baseline=spec["baseline"])
        except (AssayError, OSError) as exc:
            get_run_logger().warning("no report of %s: %s", spec["run_id"], exc)
            continue
        written[spec["run_id"]] = str(where)
    return written


@flow(name="assay-nightly", log_prints=False)
async def nightly(request: NightlyRequest) -> dict[str, Any] | State:
    """Run each spec, compare it with its last successful nightly run, keep the last `retention`;
    a failed night fails the flow run (its state still carries the report), its message leading
    with the regressions.

    Args:
        request: what the nightly runs: the specs, the store, the retention, the comparison's options.
    """
    title = _night()
    name_flow_run(title)
    document = await drive_nightly(request, run=_run_subflow, compare=_compare_subflow)
    if current_flow_run() is None:
        return document
    await acreate_markdown_artifact(
        nightly_markdown(document, title, await _reports(request, document)),
        key="assay-nightly",
        description=f"{title}: " + ("passed" if document["passed"] else document["failures"][0]),
    )
    if document["failures"]:
        return Failed(message="; ".join(document["failures"]), data=document)
    return document
