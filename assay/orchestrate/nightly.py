"""Driving one `assay nightly`: every configured spec run, compared with its last good night, old
nights pruned — plain code, no Prefect.

`drive_nightly` takes how a spec is run and how two runs are compared: the plain drivers on the
terminal's embedded path (the defaults: `drive_run`, `compare_and_store`), subflow runs in the
Prefect flow `assay-nightly` (`flows/nightly.py`), so each night's runs and comparisons are flow
runs of their own in the UI.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from assay.analysis.compare import CompareOptions
from assay.analysis.nightly import NIGHTLY_TAG, last_successful_nightly, mark_passed, prune_nightly
from assay.analysis.summary import failure_message
from assay.links import view_compare, view_run
from assay.orchestrate.compare import CompareRequest, compare_and_store
from assay.orchestrate.run import RunRequest, drive_run
from assay.outcomes import Gate, RunStatus
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
    returns the night's report (`passed`, `failures` — regressions first, then failed gates and
    runs — and one entry per spec, with its own `regressions` and `gates_failed`).

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
            report.update(
                status=summary["status"],
                note="a matrix spec: run, not compared night to night",
                regressions=[],
                gates_failed=[]
                if summary["status"] == RunStatus.COMPLETED
                else [failure_message(summary) or f"the run ended {summary['status']}"],
            )
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
        report["regressions"], report["gates_failed"] = _failures(report, summary)
        if not report["regressions"] and not report["gates_failed"]:
            mark_passed(the_store, summary["run_id"])
        report["removed"] = prune_nightly(the_store, summary["name"], keep=request.retention)
        reports.append(report)

    # Regressions lead, every spec's, then the gates and runs that failed.
    failures = [
        f"{r['name']} {r['run_id']}: {message}"
        for regressions in (True, False)
        for r in reports
        for message in (r["regressions"] if regressions else r["gates_failed"])
    ]
    return {"passed": not failures, "failures": failures, "specs": reports}


def _failures(report: dict[str, Any], summary: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Why the night of one spec failed: its comparison's regressions, then its failed gates —
    the run's own when the run did not complete (its comparison's candidate gates say the same
    again), else the comparison's."""
    comparison = report.get("comparison")
    failed = [gate for gate in (comparison["gates"] if comparison else []) if not gate["passed"]]
    regressions = [gate["message"] for gate in failed if gate["gate"] == Gate.VERDICT]
    if report["status"] != RunStatus.COMPLETED:
        return regressions, [failure_message(summary) or f"the run ended {report['status']}"]
    return regressions, [gate["message"] for gate in failed if gate["gate"] != Gate.VERDICT]


def verdict(report: dict[str, Any]) -> str:
    """One spec's night in a phrase: what failed (regressions first), else how it compared."""
    failed = "; ".join([*report["regressions"], *report["gates_failed"]])
    if "baseline" not in report:  # a matrix spec: not compared
        return f"FAILED: {failed}" if failed else report["note"]
    if report["baseline"] is None:
        return f"FAILED: {failed} · no baseline yet" if failed else "no baseline yet: this night becomes it"
    return f"FAILED: {failed}" if failed else "passed: " + " · ".join(report["comparison"]["lines"])


def nightly_markdown(document: dict[str, Any], title: str, reports: dict[str, str]) -> str:
    """The night for people (the nightly flow run's artifact): passed or why not, regressions
    first, then a row per spec with its verdict, its baseline, a link to its run's report and,
    when `ASSAY_VIEW_URL` is set, links to its run and its comparison in `assay view`.

    Args:
        document: what `drive_nightly` returned.
        title: the night's name (`nightly-2026-12-02`).
        reports: each run's report (its path or URL), by run id.
    """
    lines = [f"# {title}: {'passed' if document['passed'] else 'FAILED'}", ""]
    if document["failures"]:
        lines += ["Why it failed (regressions first, then gates):", ""]
        lines += [f"- {failure}" for failure in document["failures"]]
        lines.append("")
    lines += ["| spec | run | status | verdict | baseline | report | view |", "|---|---|---|---|---|---|---|"]
    for report in document["specs"]:
        link = reports.get(report["run_id"] or "")
        cells = [
            report["name"],
            f"`{report['run_id']}`",
            str(report["status"]),
            verdict(report),
            f"`{report['baseline']}`" if report.get("baseline") else "—",
            f"[report]({_href(link)}) `{link}`" if link else "—",
            _view_links(report),
        ]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    removed = [run_id for report in document["specs"] for run_id in report.get("removed", [])]
    if removed:
        lines += ["", f"Removed {len(removed)} old nightly run(s) (retention): {', '.join(removed)}"]
    return "\n".join(lines) + "\n"


def _view_links(report: dict[str, Any]) -> str:
    """The spec's run, and its comparison with its baseline, in `assay view` (`ASSAY_VIEW_URL`);
    a dash when no view URL is set or the spec made no run."""
    if not report.get("run_id"):
        return "—"
    links = []
    if run_url := view_run(report["run_id"]):
        links.append(f"[run]({run_url})")
    if report.get("baseline") and (compare_url := view_compare(report["baseline"], report["run_id"])):
        links.append(f"[compare]({compare_url})")
    return " · ".join(links) or "—"


def _href(where: str) -> str:
    """A report's link: a URL as it is, a local path as a `file://` URL."""
    return where if "://" in where else Path(where).resolve().as_uri()
