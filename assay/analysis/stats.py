"""Paired statistics behind `assay compare`: a baseline run and a candidate run of the same items.

Plain, typed numpy functions: no Prefect, no I/O. The caller aligns the two runs item by item;
everything here works on the per-item paired difference ``d_i = candidate_i - baseline_i``.

Methods (details, defaults and figures in `docs/statistics.md`):

* **Point estimate.** ``delta = mean(d)``, the mean paired difference (equal, up to rounding, to
  ``candidate_mean - baseline_mean`` over the same pairs).
* **Paired bootstrap percentile CI** (Efron & Tibshirani, *An Introduction to the Bootstrap*,
  1993, ch. 13). Items are resampled with replacement, ``resamples`` times; the CI is the
  ``(1-c)/2`` and ``(1+c)/2`` quantiles (``np.quantile``, linear interpolation) of the resampled
  mean differences. Resampling *pairs* keeps the per-item correlation between the two runs, which is
  what makes a paired comparison tighter than two independent error bars. This is the interval
  `verdict` reads — except for a pass/fail scorer under `SMALL_SAMPLE_PAIRS` pairs, where it is
  Newcombe's paired score interval and the p-value the exact McNemar test (`intervals.py`).
* **Analytic paired SE, t-interval and t-test.** ``se = sd(d, ddof=1) / sqrt(n)``;
  ``delta +- t_{n-1, (1+c)/2} * se``; two-sided p-value ``2 * (1 - F_{t, n-1}(|delta| / se))``
  (Student's paired t-test). With ``sd == 0`` the p-value is 1.0 when ``delta == 0`` and 0.0
  otherwise.
* **Clustered SE** (Miller 2024, "Adding Error Bars to Evals: A Statistical Approach to Language
  Model Evaluations", arXiv:2411.00640: its clustered standard error, applied to the paired
  differences as the paper recommends for comparing two models). With residuals
  ``e_i = d_i - mean(d)``::

      se_C^2 = se^2 + (1/n^2) * sum_c sum_{i in c} sum_{j in c, j != i} e_i e_j
             = (1/n^2) * ( sum_c (sum_{i in c} e_i)^2 + sum_i e_i^2 / (n - 1) )

  The only small-sample factor is the one inside ``se`` (``ddof=1``, i.e. ``n/(n-1)`` on the
  diagonal); none is applied to the cross terms. Hence with singleton clusters ``se_C == se``
  exactly, and with G perfectly correlated clusters of equal size m, ``se_C ~= sqrt(m) * se``.
  The clustered interval is ``delta +- t_{G-1, (1+c)/2} * se_C`` (G - 1 degrees of freedom, the
  usual choice for cluster-robust inference with few clusters; Cameron & Miller 2015, "A
  Practitioner's Guide to Cluster-Robust Inference"). Fewer than two clusters: NaN.
* **Power.** ``n = ceil(((z_{1-alpha/2} + z_{power}) * sd_d / mde)^2)`` paired items detect a
  true mean difference ``mde`` with the given power in a two-sided test at level ``alpha``
  (normal approximation, as in Miller 2024's power analysis).

How the bootstrap is computed, exactly and fast: `assay.analysis.resampling`.

Non-finite values (NaN: "not scored on this side") are dropped per scorer column: only rows where
both sides are finite enter that column's estimate, so ``n`` may differ between scorers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import NDArray

from assay.analysis.intervals import SMALL_SAMPLE_PAIRS, is_binary, mcnemar_exact_p, newcombe_paired
from assay.analysis.resampling import index_bootstrap_means, multinomial_means
from assay.outcomes import IntervalMethod, Verdict

__all__ = [
    "DEFAULT_CONFIDENCE",
    "DEFAULT_RESAMPLES",
    "PairedEstimate",
    "items_needed",
    "items_needed_for_sd",
    "paired_estimates",
    "sd_for_power_from_single_run",
    "verdict",
    "verdict_of",
]

DEFAULT_RESAMPLES = 10_000
DEFAULT_CONFIDENCE = 0.95

# A column takes the multinomial-over-distinct-values path when it has at most n / 16 distinct
# differences: one binomial draw per distinct value (~50 ns) against ~3.5 ns per item draw.
_DISTINCT_FACTOR = 16
FloatArray = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class PairedEstimate:
    """One scorer's paired comparison of a candidate run with a baseline run.

    ``delta`` and every interval are candidate minus baseline: positive means the candidate scored
    higher. Fields that cannot be computed (no pairs; one pair; fewer than two clusters) are NaN.
    """

    n: int
    """Pairs that entered: rows where both sides are finite for this scorer."""
    baseline_mean: float
    candidate_mean: float
    delta: float
    """Mean paired difference, candidate - baseline."""
    ci_low: float
    """The CI `verdict` reads, lower end: paired bootstrap percentile, or Newcombe's paired score
    interval for a binary scorer with fewer than `SMALL_SAMPLE_PAIRS` pairs (``ci_method`` says)."""
    ci_high: float
    se: float
    """Analytic paired standard error, ``sd(d, ddof=1) / sqrt(n)``."""
    se_ci_low: float
    """``delta - t_{n-1} * se``."""
    se_ci_high: float
    p_value: float
    """Two-sided p-value: paired t-test, or the exact McNemar test where ``ci_method`` is Newcombe's."""
    clustered_se: float | None
    """Miller (2024) clustered SE of the mean difference; None when no clusters were given."""
    clustered_ci_low: float | None
    clustered_ci_high: float | None
    n_clusters: int | None
    resamples: int
    confidence: float
    seed: int
    ci_method: str = IntervalMethod.BOOTSTRAP.value
    """`IntervalMethod` of ``ci_low``/``ci_high``: `bootstrap` or `newcombe`."""


def paired_estimates(
    baseline: NDArray[Any] | Sequence[Any],
    candidate: NDArray[Any] | Sequence[Any],
    *,
    clusters: NDArray[Any] | Sequence[Any] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> list[PairedEstimate]:
    """Paired estimates of candidate - baseline, one per scorer column.

    Args:
        baseline: Scores of the baseline run, shape ``(n,)`` (one scorer) or ``(n, k)`` (k scorers),
            rows aligned item by item with ``candidate``. NaN (any non-finite value) means "not
            scored"; for each scorer only rows finite on both sides enter.
        candidate: Scores of the candidate run, same shape as ``baseline``.
        clusters: Optional cluster label of each row, shape ``(n,)``; any labels ``np.unique``
            can sort (ints, strings). Adds the clustered SE and interval to every estimate.
        resamples: Bootstrap resamples (default 10,000).
        confidence: Confidence level of every interval, in (0, 1) (default 0.95).
        seed: Non-negative seed of the bootstrap; the same inputs and seed give the same result,
            whatever the number of threads.

    Returns:
        One `PairedEstimate` per scorer column, in column order.

    Raises:
        ValueError: on mismatched shapes, ``resamples < 1``, a confidence outside (0, 1), a
            negative seed, or ``clusters`` of the wrong length.
    """
    base = _as_columns(baseline, "baseline")
    cand = _as_columns(candidate, "candidate")
    if base.shape != cand.shape:
        raise ValueError(f"baseline and candidate differ in shape: {base.shape} vs {cand.shape}")
    if isinstance(resamples, bool) or not isinstance(resamples, int | np.integer) or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    labels = None
    if clusters is not None:
        labels = np.asarray(clusters)
        if labels.ndim != 1 or labels.shape[0] != base.shape[0]:
            raise ValueError(f"clusters must have shape ({base.shape[0]},), got {labels.shape}")
    resamples = int(resamples)
    seed = int(seed)

    k = base.shape[1]
    valid = np.isfinite(base) & np.isfinite(cand)
    column_seeds = np.random.SeedSequence(seed).spawn(k)
    diffs: list[FloatArray] = []
    for j in range(k):
        diffs.append(cand[valid[:, j], j] - base[valid[:, j], j])

    boot: list[FloatArray | None] = [None] * k
    general: dict[bytes, list[int]] = {}  # columns needing index draws, grouped by their rows
    for j, d in enumerate(diffs):
        if d.size < 2 or _constant(d):
            continue  # no bootstrap: NaN interval (n < 2) or the degenerate [d, d]
        values, counts = np.unique(d, return_counts=True)
        if values.size * _DISTINCT_FACTOR <= d.size:
            boot[j] = multinomial_means(values, counts, resamples, column_seeds[j])
        else:
            general.setdefault(np.packbits(valid[:, j]).tobytes(), []).append(j)
    for columns in general.values():
        means = index_bootstrap_means([diffs[j] for j in columns], resamples, column_seeds[columns[0]])
        for j, m in zip(columns, means, strict=True):
            boot[j] = m

    estimates = []
    for j in range(k):
        rows = valid[:, j]
        estimates.append(
            _estimate(
                base[rows, j],
                cand[rows, j],
                diffs[j],
                boot[j],
                None if labels is None else labels[rows],
                resamples=resamples,
                confidence=confidence,
                seed=seed,
            )
        )
    return estimates


def verdict(estimate: PairedEstimate, threshold: float) -> Verdict:
    """The conclusion for one scorer, read from the bootstrap CI and the point estimate.

    The checks run in this order; the first that holds wins:

    1. the CI is NaN (fewer than two pairs) -> ``inconclusive``;
    2. ``ci_high < 0`` and ``delta < -threshold`` (the CI lies entirely below zero and
       ``|delta| > threshold``) -> ``regressed``;
    3. ``ci_low > 0`` and ``delta > threshold`` -> ``improved``;
    4. ``-threshold <= ci_low`` and ``ci_high <= threshold`` (the CI lies inside the closed
       band ``[-threshold, +threshold]``) -> ``unchanged``;
    5. otherwise -> ``inconclusive``.

    With ``threshold == 0``, ``unchanged`` needs the CI to be exactly ``[0, 0]``. Checks 2-3 come
    before 4 so that a significant change larger than the threshold is never reported as
    unchanged (they can only both hold if the point estimate lies outside its own CI).

    Args:
        estimate: The scorer's estimate.
        threshold: The smallest change that matters, in score units; finite and >= 0.

    Raises:
        ValueError: if ``threshold`` is negative or not finite.
    """
    return verdict_of(estimate.ci_low, estimate.ci_high, estimate.delta, threshold)


def verdict_of(low: float, high: float, delta: float, threshold: float) -> Verdict:
    """`verdict`'s rule on a bare interval and point estimate (a confidence sequence's too).

    Args:
        low: the interval's lower end.
        high: its upper end.
        delta: the point estimate.
        threshold: the smallest change that matters, finite and >= 0.

    Raises:
        ValueError: if ``threshold`` is negative or not finite.
    """
    if not math.isfinite(threshold) or threshold < 0:
        raise ValueError(f"threshold must be a finite number >= 0, got {threshold!r}")
    if math.isnan(low) or math.isnan(high) or math.isnan(delta):
        return Verdict.INCONCLUSIVE
    if high < 0 and delta < -threshold:
        return Verdict.REGRESSED
    if low > 0 and delta > threshold:
        return Verdict.IMPROVED
    if -threshold <= low and high <= threshold:
        return Verdict.UNCHANGED
    return Verdict.INCONCLUSIVE


def items_needed(
    deltas: NDArray[Any] | Sequence[float], mde: float, *, power: float = 0.8, alpha: float = 0.05
) -> int:
    """Paired items a comparison needs to detect a true mean difference ``mde``.

    ``n = ceil(((z_{1-alpha/2} + z_{power}) * sd / mde)^2)`` with ``sd`` the sample SD
    (``ddof=1``) of the observed per-item paired differences; see `items_needed_for_sd`.

    Args:
        deltas: Observed per-item paired differences (candidate - baseline); non-finite values are
            dropped. At least two are needed.
        mde: The minimum detectable (true) mean difference, > 0, in score units.
        power: Probability of detecting a true difference of ``mde``, in (0, 1) (default 0.8).
        alpha: Two-sided significance level, in (0, 1) (default 0.05).

    Raises:
        ValueError: on fewer than two finite differences or an out-of-range argument.
    """
    d = np.asarray(deltas, dtype=np.float64).ravel()
    d = d[np.isfinite(d)]
    if d.size < 2:
        raise ValueError(f"items_needed needs at least two finite paired differences, got {d.size}")
    return items_needed_for_sd(float(np.std(d, ddof=1)), mde, power=power, alpha=alpha)


def items_needed_for_sd(sd: float, mde: float, *, power: float = 0.8, alpha: float = 0.05) -> int:
    """Paired items needed, from the SD of the per-item paired differences.

    ``n = ceil(((z_{1-alpha/2} + z_{power}) * sd / mde)^2)``, at least 2 (an SD needs two pairs).
    Normal approximation to the two-sided paired test; e.g. ``sd=0.5, mde=0.1`` -> 197.

    Args:
        sd: SD of the per-item paired differences (finite, >= 0).
        mde: The minimum detectable (true) mean difference, > 0.
        power: In (0, 1) (default 0.8).
        alpha: Two-sided significance level, in (0, 1) (default 0.05).

    Raises:
        ValueError: on an out-of-range argument.
    """
    if not math.isfinite(sd) or sd < 0:
        raise ValueError(f"sd must be a finite number >= 0, got {sd!r}")
    if not math.isfinite(mde) or mde <= 0:
        raise ValueError(f"mde must be a finite number > 0, got {mde!r}")
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), got {power!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    normal = NormalDist()
    z = normal.inv_cdf(1.0 - alpha / 2.0) + normal.inv_cdf(power)
    exact = (z * sd / mde) ** 2
    # A relative 1e-12 slack keeps a product that should be an integer from rounding up by one.
    return max(2, math.ceil(exact * (1.0 - 1e-12)))


def sd_for_power_from_single_run(scores: NDArray[Any] | Sequence[float]) -> float:
    """SD of paired differences between two runs of equal quality, guessed from one run.

    ``sqrt(2 * var(scores, ddof=1))``: the SD of ``x - y`` when ``x`` and ``y`` are independent
    runs with this run's variance. This is **conservative**: real paired runs of the same items are
    positively correlated (the same items are hard for both), so the true SD of the differences is
    ``sqrt(2 * var * (1 - rho))``, smaller; feeding this value to `items_needed_for_sd`
    over-states the items needed. Use `items_needed` on a real baseline/candidate pair when one
    exists.

    Args:
        scores: One run's per-item scores; non-finite values are dropped. At least two are needed.

    Raises:
        ValueError: on fewer than two finite scores.
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    s = s[np.isfinite(s)]
    if s.size < 2:
        raise ValueError(f"sd_for_power_from_single_run needs at least two finite scores, got {s.size}")
    return math.sqrt(2.0 * float(np.var(s, ddof=1)))


# --- private helpers ---------------------------------------------------------------------------


def _as_columns(scores: NDArray[Any] | Sequence[Any], name: str) -> FloatArray:
    array = np.asarray(scores, dtype=np.float64)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise ValueError(f"{name} must have shape (n,) or (n, k), got {array.shape}")
    return array


def _constant(d: FloatArray) -> bool:
    return bool(np.all(d == d[0]))


def _estimate(
    base: FloatArray,
    cand: FloatArray,
    d: FloatArray,
    boot: FloatArray | None,
    labels: NDArray[Any] | None,
    *,
    resamples: int,
    confidence: float,
    seed: int,
) -> PairedEstimate:
    n = int(d.size)
    nan = math.nan
    n_clusters: int | None = None
    clustered: tuple[float, float, float] | tuple[None, None, None] = (None, None, None)
    constant = n > 0 and _constant(d)
    if n == 0:
        delta = baseline_mean = candidate_mean = nan
    else:
        # The mean of identical values can be off by an ulp; a constant difference is taken exactly.
        delta = float(d[0]) if constant else float(np.mean(d))
        baseline_mean, candidate_mean = float(np.mean(base)), float(np.mean(cand))
    upper_q = (1.0 + confidence) / 2.0

    if n < 2:
        ci_low = ci_high = se = se_ci_low = se_ci_high = p_value = nan
    elif constant:
        ci_low = ci_high = se_ci_low = se_ci_high = delta
        se = 0.0
        p_value = 1.0 if delta == 0.0 else 0.0
    else:
        # Lazily, and scipy.special, not scipy.stats: ~0.35 s to import here against ~1.2 s.
        from scipy import special

        assert boot is not None
        ci_low, ci_high = (float(q) for q in np.quantile(boot, [1.0 - upper_q, upper_q]))
        se = float(np.std(d, ddof=1)) / math.sqrt(n)
        half = float(special.stdtrit(n - 1, upper_q)) * se
        se_ci_low, se_ci_high = delta - half, delta + half
        p_value = float(min(1.0, 2.0 * special.stdtr(n - 1, -abs(delta) / se)))
    ci_method = IntervalMethod.BOOTSTRAP
    if 2 <= n < SMALL_SAMPLE_PAIRS and not constant and is_binary(base) and is_binary(cand):
        # Below a few hundred pairs the bootstrap is too narrow for binary scores (docs/statistics.md);
        # identical differences keep their exact [v, v] (the runs agree on every pair).
        ci_method = IntervalMethod.NEWCOMBE
        ci_low, ci_high = newcombe_paired(base, cand, confidence=confidence)
        p_value = mcnemar_exact_p(base, cand)

    if labels is not None:
        n_clusters, clustered = _clustered(d, delta, labels, upper_q)
    return PairedEstimate(
        n=n,
        baseline_mean=baseline_mean,
        candidate_mean=candidate_mean,
        delta=delta,
        ci_low=ci_low,
        ci_high=ci_high,
        se=se,
        se_ci_low=se_ci_low,
        se_ci_high=se_ci_high,
        p_value=p_value,
        clustered_se=clustered[0],
        clustered_ci_low=clustered[1],
        clustered_ci_high=clustered[2],
        n_clusters=n_clusters,
        resamples=resamples,
        confidence=confidence,
        seed=seed,
        ci_method=ci_method.value,
    )


def _clustered(
    d: FloatArray, delta: float, labels: NDArray[Any], upper_q: float
) -> tuple[int, tuple[float, float, float]]:
    """Miller (2024) clustered SE of mean(d) and its t_{G-1} interval: (G, (se, low, high))."""
    _, inverse = np.unique(labels, return_inverse=True)
    g = int(inverse.max()) + 1 if inverse.size else 0
    n = d.size
    if g < 2:
        return g, (math.nan, math.nan, math.nan)
    e = d - delta
    cluster_sums = np.bincount(inverse.ravel(), weights=e, minlength=g)
    variance = (float(cluster_sums @ cluster_sums) + float(e @ e) / (n - 1)) / (n * n)
    se = math.sqrt(max(variance, 0.0))
    if se == 0.0:
        return g, (0.0, delta, delta)
    from scipy import special

    half = float(special.stdtrit(g - 1, upper_q)) * se
    return g, (se, delta - half, delta + half)
