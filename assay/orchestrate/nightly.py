"""Driving one `assay nightly`: every configured spec run, compared with its last good night, old
nights pruned — plain code, no Prefect.

`drive_nightly` takes how a spec is run and how two runs are compared: the plain drivers on the
terminal's embedded path (the defaults: `drive_run`, `compare_and_store`), subflow runs in the
Prefect flow `assay-nightly` (`flows/nightly.py`), so each night's runs and comparisons are flow
runs of their own in the UI.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from assay.analysis.compare import CompareOptions
from assay.analysis.nightly import NIGHTLY_TAG, last_successful_nightly, mark_passed, prune_nightly
from assay.orchestrate.compare import CompareRequest, compare_and_store
from assay.orchestrate.run import RunRequest, drive_run
from assay.outcomes import RunStatus
from assay.store import Store

RunSpec = Callable[[RunRequest], Awaitable[dict[str, Any]]]
CompareRuns = Callable[[CompareRequest], Awaitable[dict[str, Any]]]


class NightlyRequest(BaseModel):
    """What the nightly runs: the parameters of `drive_nightly`, and of the Prefect flow
    `assay-nightly` (its deployment form in the UI shows these fields)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    specs: list[str]
    """Eval spec paths (matrix specs are run, not compared night to night)."""
    store: str | None = None
    """The store: a folder or `s3://bucket/prefix`; default `ASSAY_STORE`, else `./assay-store`."""
    retention: int = Field(default=30, ge=1)
    """Nightly runs kept per spec name; older ones are removed from every dataset."""
    options: CompareOptions | None = None
    """How each night is compared with its baseline and gated; default: the error-rate gates of
    each spec (`fail_on_item_error_rate`, `fail_on_scorer_error_rate`), as its run applied them."""


def _spec_gates(summary: dict[str, Any]) -> CompareOptions:
    """The comparison's error-rate gates as tonight's run applied them: one gate, the same limits."""
    limits = {"max_item_error_rate": summary["fail_on_item_error_rate"]}
    if summary.get("fail_on_scorer_error_rate") is not None:
        limits["max_scorer_error_rate"] = summary["fail_on_scorer_error_rate"]
    return CompareOptions(**limits)


async def _run_embedded(request: RunRequest) -> dict[str, Any]:
    return await drive_run(request)


async def _compare_embedded(request: CompareRequest) -> dict[str, Any]:
    return compare_and_store(request)


async def drive_nightly(
    request: NightlyRequest, *, run: RunSpec = _run_embedded, compare: CompareRuns = _compare_embedded
) -> dict[str, Any]:
    """Run each spec, compare it with its last successful nightly run, keep the last `retention`;
    returns the night's report (`passed`, `failures`, one entry per spec).

    Args:
        request: what to run.
        run: runs one spec and returns its summary, failed gate or not.
        compare: compares two runs and returns the comparison, failed gate or not.
    """
    the_store = Store(request.store)
    reports = []
    for spec in request.specs:
        # Tonight's run of the spec, tagged `nightly`.
        summary = await run(RunRequest(spec=spec, store=request.store, extra_tags=[NIGHTLY_TAG]))
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
            comparison = await compare(
                CompareRequest(
                    baseline=[baseline],
                    candidate=[summary["run_id"]],
                    store=request.store,
                    options=request.options or _spec_gates(summary),
                )
            )
            report.update(baseline=baseline, comparison=comparison)

        # A night that passed becomes a baseline; then retention keeps the last `retention` nights.
        if not _failures(report):
            mark_passed(the_store, summary["run_id"])
        report["removed"] = prune_nightly(the_store, summary["name"], keep=request.retention)
        reports.append(report)

    failures = [f"{r['name']} {r['run_id']}: {message}" for r in reports for message in _failures(r)]
    return {"passed": not failures, "failures": failures, "specs": reports}


def _failures(report: dict[str, Any]) -> list[str]:
    if report["status"] != RunStatus.COMPLETED:
        return [f"the run ended {report['status']}"]
    comparison = report.get("comparison")
    return list(comparison["failed_gates"]) if comparison else []
