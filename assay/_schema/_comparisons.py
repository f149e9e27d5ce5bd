"""`comparisons`: one row per scorer compared, as `assay.analysis.compare` writes it."""

from datetime import datetime
from typing import Annotated, NotRequired, TypedDict

import pyarrow as pa

from assay._schema._columns import TIMESTAMP, Column, schema_of, words
from assay.outcomes import Adjustment, IntervalMethod, Verdict


class _PerComparison(TypedDict):
    """The columns of a `comparisons` row that are the whole comparison's, not one scorer's."""

    created_at: Annotated[datetime, Column(TIMESTAMP, "when the comparison was made (UTC)")]
    baseline_run_ids: Annotated[
        list[str], Column(pa.list_(pa.string()), "the baseline side's runs (averaged per item when several)")
    ]
    candidate_run_ids: Annotated[list[str], Column(pa.list_(pa.string()), "the candidate side's runs")]


class ScorerComparison(TypedDict):
    """One scorer compared: an entry of a comparison's `scorers` (`comparison.json`), and with
    the comparison's own columns a row of `comparisons` (`ComparisonRow`).

    The keys without `NotRequired` every entry has. With pairs it also has the fields of its
    `PairedEstimate` (`n` as `n_pairs`; `assay.analysis.compare.estimate_columns`); without pairs
    the verdict is `inconclusive`.
    """

    scorer: Annotated[str, Column(pa.string(), "the scorer compared")]
    scorer_kind: Annotated[str, Column(pa.string(), "its kind")]
    n_pairs: Annotated[int, Column(pa.int64(), "(item_id, trial) pairs scored on both sides")]
    baseline_mean: NotRequired[Annotated[float, Column(pa.float64(), "baseline mean over the pairs")]]
    candidate_mean: NotRequired[Annotated[float, Column(pa.float64(), "candidate mean over the pairs")]]
    delta: NotRequired[Annotated[float, Column(pa.float64(), "candidate_mean - baseline_mean")]]
    ci_low: NotRequired[
        Annotated[float, Column(pa.float64(), "the CI the verdict read, low end (ci_method says which)")]
    ]
    ci_high: NotRequired[Annotated[float, Column(pa.float64(), "the CI the verdict read, high end")]]
    se: NotRequired[Annotated[float, Column(pa.float64(), "analytic paired standard error of the delta")]]
    se_ci_low: NotRequired[Annotated[float, Column(pa.float64(), "delta - t * se")]]
    se_ci_high: NotRequired[Annotated[float, Column(pa.float64(), "delta + t * se")]]
    p_value: NotRequired[
        Annotated[
            float,
            Column(
                pa.float64(), "two-sided p-value: paired t-test, or exact McNemar where ci_method is newcombe"
            ),
        ]
    ]
    clustered_se: NotRequired[
        Annotated[
            float | None,
            Column(pa.float64(), "cluster-robust SE when items carry a cluster annotation, else null"),
        ]
    ]
    clustered_ci_low: NotRequired[Annotated[float | None, Column(pa.float64(), "delta - z * clustered_se")]]
    clustered_ci_high: NotRequired[Annotated[float | None, Column(pa.float64(), "delta + z * clustered_se")]]
    n_clusters: NotRequired[Annotated[int | None, Column(pa.int64(), "clusters among the pairs, else null")]]
    threshold: Annotated[float, Column(pa.float64(), "the practical-significance threshold the verdict used")]
    verdict: Annotated[str, Column(pa.string(), words(Verdict))]
    unpaired_baseline: Annotated[int, Column(pa.int64(), "items scored on the baseline side only")]
    unpaired_candidate: Annotated[int, Column(pa.int64(), "items scored on the candidate side only")]
    unscored_baseline: Annotated[
        int,
        Column(pa.int64(), "baseline items without a score from this scorer (failed, skipped)"),
    ]
    unscored_candidate: Annotated[int, Column(pa.int64(), "candidate items without a score from this scorer")]
    confidence: NotRequired[Annotated[float, Column(pa.float64(), "the CIs' confidence level")]]
    resamples: NotRequired[Annotated[int, Column(pa.int64(), "bootstrap resamples")]]
    seed: NotRequired[Annotated[int, Column(pa.int64(), "bootstrap seed")]]
    ci_method: NotRequired[
        Annotated[str, Column(pa.string(), f"{words(IntervalMethod)}: the method of ci_low / ci_high")]
    ]
    adjustment: Annotated[
        str,
        Column(
            pa.string(), f"{words(Adjustment)}: how the verdict was adjusted for the scorers compared at once"
        ),
    ]
    p_adjusted: Annotated[
        float | None,
        Column(pa.float64(), "p_value adjusted for the family (Holm or Benjamini-Hochberg); null with none"),
    ]
    judge_noise_se: Annotated[
        float | None,
        Column(
            pa.float64(),
            "both runs' judges asked K times per item (`judge_samples`): the judge-noise standard "
            "error of the delta: its share of the interval, which already carries it (each item's "
            "score is a mean of K asks); null otherwise",
        ),
    ]
    sequential_pairs: Annotated[
        int | None,
        Column(
            pa.int64(),
            "a candidate run's sequential compare against this baseline: the pairs its confidence "
            "sequence used (ci_method betting_cs); null otherwise",
        ),
    ]


class ComparisonRow(_PerComparison, ScorerComparison):
    """A row of `comparisons`: the comparison's columns first, then its scorer's."""


COMPARISONS = schema_of(ComparisonRow)
