"""The compare flow's body as plain code: `assay compare` runs it embedded (no Prefect imported),
`flows/compare.py` hosts it in a flow run."""

from __future__ import annotations

from typing import Any

from assay.analysis.compare import CompareOptions, compare, load_sides, write_comparison
from assay.store import Store


def compare_and_store(
    baseline: list[str], candidate: list[str], store: str | None = None, options: CompareOptions | None = None
) -> dict[str, Any]:
    """Compare candidate runs with baseline runs of the same dataset, store the comparison beside
    the runs and return it.

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
    # Stored beside the runs, for the report and for analysts.
    write_comparison(the_store, comparison)
    return comparison
