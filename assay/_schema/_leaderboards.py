"""`leaderboards`: one row per cell x scorer of a matrix run, and per revision."""

from datetime import datetime
from typing import Annotated, TypedDict

import pyarrow as pa

from assay._schema._columns import TIMESTAMP, Column, schema_of, words
from assay.outcomes import Adjustment, Verdict


class LeaderboardRow(TypedDict, total=False):
    """A row of `leaderboards`, as `assay.analysis.leaderboard` ranks the cells (`revision` is the
    store's: `Store.write_leaderboard` adds it)."""

    revision: Annotated[
        int,
        Column(
            pa.int64(),
            "which computation of the matrix's leaderboard the row belongs to, from 1 (a rebuild"
            " adds rows, in a file of their own); the current leaderboard is the highest revision",
        ),
    ]
    created_at: Annotated[datetime, Column(TIMESTAMP, "when the leaderboard was computed (UTC)")]
    cell: Annotated[str, Column(pa.string(), "the matrix cell")]
    run_id: Annotated[str, Column(pa.string(), "the cell's run")]
    scorer: Annotated[str, Column(pa.string(), "the scorer")]
    rank: Annotated[
        int | None,
        Column(pa.int32(), "the cell's rank on this scorer by mean, 1 = best (ties share a rank)"),
    ]
    n_scored: Annotated[int, Column(pa.int64(), "scored item x trials")]
    mean: Annotated[float | None, Column(pa.float64(), "mean score")]
    ci_low: Annotated[float | None, Column(pa.float64(), "CI of the mean, low end (ci_method says which)")]
    ci_high: Annotated[float | None, Column(pa.float64(), "CI of the mean, high end")]
    ci_method: Annotated[str | None, Column(pa.string(), "wilson (binary scorer, under 300 scores) or t")]
    item_error_rate: Annotated[float | None, Column(pa.float64(), "the cell's failed / attempted")]
    cost_per_item_usd: Annotated[
        float | None,
        Column(
            pa.float64(), "measured cost per completed item; null unless every item's accounting is complete"
        ),
    ]
    latency_p50_ms: Annotated[float | None, Column(pa.float64(), "median duration of completed items")]
    latency_p95_ms: Annotated[
        float | None, Column(pa.float64(), "95th percentile duration of completed items")
    ]
    baseline_cell: Annotated[str | None, Column(pa.string(), "the cell the paired comparison is against")]
    delta_vs_baseline: Annotated[
        float | None,
        Column(pa.float64(), "paired delta against the baseline cell (null for the baseline)"),
    ]
    delta_ci_low: Annotated[
        float | None,
        Column(pa.float64(), "paired CI of that delta, low end (delta_ci_method says which)"),
    ]
    delta_ci_high: Annotated[float | None, Column(pa.float64(), "paired CI of that delta, high end")]
    delta_ci_method: Annotated[
        str | None, Column(pa.string(), "bootstrap, or newcombe for a binary scorer under 300 pairs")
    ]
    verdict_vs_baseline: Annotated[str | None, Column(pa.string(), f"{words(Verdict)} against the baseline")]
    adjustment: Annotated[
        str | None,
        Column(
            pa.string(), f"{words(Adjustment)}: how verdicts were adjusted for the cells compared at once"
        ),
    ]
    p_adjusted: Annotated[
        float | None,
        Column(pa.float64(), "the delta's p-value adjusted over the scorer's cells; null with none"),
    ]


LEADERBOARDS = schema_of(LeaderboardRow)
