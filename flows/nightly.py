"""The nightly flow: every configured spec run, compared with its last good night, old nights pruned."""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.client.schemas.objects import State
from prefect.states import Failed

from assay.analysis.compare import CompareOptions
from assay.analysis.nightly import NIGHTLY_TAG, last_successful_nightly, mark_passed, prune_nightly
from assay.flows.compare import compare_runs
from assay.flows.run import run_eval
from assay.outcomes import RunStatus
from assay.store import Store
from assay.tasks import current_flow_run, flow_result


@flow(name="assay-nightly", log_prints=False)
async def nightly(
    specs: list[str],
    store: str | None = None,
    retention: int = 30,
    options: CompareOptions | None = None,
) -> dict[str, Any] | State:
    """Run each spec, compare it with its last successful nightly run, keep the last `retention`.

    Args:
        specs: eval spec paths (matrix specs are not compared night to night).
        store: the store's root folder; default `ASSAY_STORE` or `./assay-store`.
        retention: nightly runs kept per spec name; older ones are removed from every dataset.
        options: how comparisons are made and gated.
    """
    the_store = Store(store)
    reports = []
    for spec in specs:
        # Tonight's run of the spec, tagged `nightly`.
        params = {"spec": spec, "store": store, "extra_tags": [NIGHTLY_TAG]}
        if current_flow_run() is None:
            summary = await run_eval.fn(**params)
        else:  # a run that failed its gate fails its subflow run; the state still carries the summary
            summary = await flow_result(await run_eval(**params, return_state=True))
        report: dict[str, Any] = {"spec": spec, "name": summary["name"], "run_id": summary.get("run_id")}
        if "cells" in summary:
            report.update(status=summary["status"], note="a matrix spec: run, not compared night to night")
            reports.append(report)
            continue
        report["status"] = summary["status"]

        # Its baseline: the latest earlier nightly run of the same spec that completed.
        baseline = last_successful_nightly(the_store, summary["name"], before=summary["run_id"])
        if baseline is None:
            report.update(
                baseline=None, note="first night: no earlier successful nightly run to compare with"
            )
        else:
            comparison = await _compare(baseline, summary["run_id"], store, options)
            report.update(baseline=baseline, comparison=comparison)

        # A night that passed becomes a baseline; then retention keeps the last `retention` nights.
        if not _failures(report):
            mark_passed(the_store, summary["run_id"])
        report["removed"] = prune_nightly(the_store, summary["name"], keep=retention)
        reports.append(report)

    failures = [f"{r['name']} {r['run_id']}: {message}" for r in reports for message in _failures(r)]
    document = {"passed": not failures, "failures": failures, "specs": reports}
    if failures and current_flow_run() is not None:
        return Failed(message="; ".join(failures), data=document)
    return document


async def _compare(
    baseline: str, candidate: str, store: str | None, options: CompareOptions | None
) -> dict[str, Any]:
    params = {"baseline": [baseline], "candidate": [candidate], "store": store, "options": options}
    if current_flow_run() is None:
        return compare_runs.fn(**params)
    # A failed gate fails the compare subflow; its state still carries the comparison.
    return await flow_result(compare_runs(**params, return_state=True))


def _failures(report: dict[str, Any]) -> list[str]:
    if report["status"] != RunStatus.COMPLETED:
        return [f"the run ended {report['status']}"]
    comparison = report.get("comparison")
    return list(comparison["failed_gates"]) if comparison else []
