"""The compare flow's body as plain code: `assay compare` runs it embedded (no Prefect imported),
`flows/compare.py` hosts it in a flow run."""

from __future__ import annotations

from typing import Any, cast

from pydantic import BaseModel, ConfigDict

from assay.analysis.compare import CompareOptions, Comparison, compare, load_sides, write_comparison
from assay.store import Store


class CompareRequest(BaseModel):
    """What to compare: the parameters of `compare_and_store`, and of the Prefect flow
    `assay-compare` (its deployment form in the UI shows these fields)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    baseline: list[str]
    """The baseline's run ids (several = repeats, averaged per item)."""
    candidate: list[str]
    """The candidate's run ids."""
    store: str | None = None
    """The store: a folder or `s3://bucket/prefix`; default `ASSAY_STORE`, else `./assay-store`."""
    options: CompareOptions | None = None
    """Thresholds, gate limits, bootstrap settings (default: `CompareOptions()`)."""


def compare_and_store(request: CompareRequest) -> dict[str, Any]:
    """Compare candidate runs with baseline runs of the same dataset, store the comparison beside
    the runs and return it.

    Args:
        request: what to compare.
    """
    # Read both sides; runs of different datasets or unknown runs stop here.
    the_store = Store(request.store)
    base, cand = load_sides(the_store, request.baseline, request.candidate)
    # Per scorer: paired statistics and a verdict; then the gates, timing and cost deltas.
    options = request.options or CompareOptions()
    comparison = compare(base, cand, options)
    if options.labels:
        # People's labels on both runs: each labelled scorer gated on its corrected delta.
        from assay.analysis.judge_trust import with_labels

        comparison = cast(Comparison, with_labels(the_store, dict(comparison), fail_on=list(options.fail_on)))
    # Stored beside the runs, for the report and for analysts.
    write_comparison(the_store, comparison)
    return comparison
