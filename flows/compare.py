"""The compare flow: baseline vs candidate runs, paired statistics, verdicts and gates."""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.client.schemas.objects import State
from prefect.states import Failed

from assay.analysis.compare import CompareOptions, compare, load_sides, write_comparison
from assay.store import Store
from tasks import current_flow_run
from tasks.publish import name_flow_run, publish_comparison


@flow(name="assay-compare", log_prints=False)
def compare_runs(
    baseline: list[str],
    candidate: list[str],
    store: str | None = None,
    options: CompareOptions | None = None,
) -> dict[str, Any] | State:
    """Compare candidate runs with baseline runs of the same dataset; returns the comparison.

    Args:
        baseline: the baseline's run ids (several = repeats, averaged per item).
        candidate: the candidate's run ids.
        store: the store's root folder; default `ASSAY_STORE` or `./assay-store`.
        options: thresholds, gate limits, bootstrap settings.
    """
    # Read both sides; runs of different datasets or unknown runs stop here.
    the_store = Store(store)
    base, cand = load_sides(the_store, baseline, candidate)

    # Per scorer: paired statistics and a verdict; then the gates, timing and cost deltas.
    comparison = compare(base, cand, options or CompareOptions())

    # Store it beside the runs, for the report and for analysts; show it in the Prefect UI.
    write_comparison(the_store, comparison)
    name_flow_run(f"compare {'+'.join(baseline)} → {'+'.join(candidate)}")
    publish_comparison(comparison)

    # Under Prefect a failed gate fails the flow run, so schedules and automations see it.
    if not comparison["passed"] and current_flow_run() is not None:
        return Failed(message="; ".join(comparison["failed_gates"]), data=comparison)
    return comparison
