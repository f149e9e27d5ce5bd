"""Small-sample intervals for binary scores, and multiple-comparison adjustments.

Plain, typed numpy/scipy functions: no Prefect, no I/O. Methods and measured coverage are in
`docs/statistics.md` ("Small evals", "Many comparisons at once").

* **Wilson score interval** of one proportion (Wilson 1927): a run's mean of a binary scorer.
* **Newcombe's hybrid score interval for paired proportions** (Newcombe 1998, "Improved confidence
  intervals for the difference between binomial proportions based on paired data", Statistics in
  Medicine 17, method 10): the difference of two binary runs scored on the same items. Below
  `SMALL_SAMPLE_PAIRS` pairs the paired bootstrap and the t interval are too narrow (Bowyer,
  Aitchison & Ivanova, ICML 2025); Newcombe's holds its level down to a few dozen pairs.
* **Exact McNemar test**: the two-sided binomial test of the discordant pairs, the p-value that
  goes with Newcombe's interval.
* **Holm** (1979) step-down adjusted p-values control the family-wise error rate;
  **Benjamini–Hochberg** (1995) step-up adjusted p-values control the false discovery rate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import NDArray

from assay.outcomes import Adjustment, IntervalMethod

# Below this many pairs (or scores) a binary scorer's interval is Newcombe's (or Wilson's); at and
# above it the bootstrap (or t) interval's coverage is within a point of nominal (docs/statistics.md).
SMALL_SAMPLE_PAIRS = 300


def is_binary(values: NDArray[Any]) -> bool:
    """Whether every value is exactly 0 or 1 (a pass/fail scorer)."""
    return bool(values.size) and bool(np.all((values == 0.0) | (values == 1.0)))


def wilson_interval(successes: Any, n: Any, *, confidence: float = 0.95) -> tuple[Any, Any]:
    """Wilson score interval of a proportion ``successes / n`` (NaN when n == 0).

    Args:
        successes: how many of the n scores are 1 (an int, or an array for many at once).
        n: how many scores.
        confidence: the interval's confidence level, in (0, 1).
    """
    k, m = np.asarray(successes, dtype=np.float64), np.asarray(n, dtype=np.float64)
    z = NormalDist().inv_cdf((1.0 + confidence) / 2.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / m
        centre = (p + z * z / (2 * m)) / (1 + z * z / m)
        half = z / (1 + z * z / m) * np.sqrt(p * (1 - p) / m + z * z / (4 * m * m))
    # The ends are exact at 0 and n successes; rounding must not push them past [0, 1].
    low = np.where(k == 0, 0.0, np.maximum(0.0, centre - half))
    high = np.where(k == m, 1.0, np.minimum(1.0, centre + half))
    low, high = np.where(m == 0, np.nan, low), np.where(m == 0, np.nan, high)
    return (float(low), float(high)) if low.ndim == 0 else (low, high)


def score_interval(values: NDArray[Any], *, confidence: float = 0.95) -> tuple[float, float, IntervalMethod]:
    """A confidence interval of a mean score, and the method that gave it.

    Binary scores below `SMALL_SAMPLE_PAIRS` values: Wilson. Otherwise Student t
    (``mean ± t_{n-1} · sd / sqrt(n)``, clipped to [0, 1]). NaN below two values (t) or none (Wilson).

    Args:
        values: the scores; non-finite values are dropped.
        confidence: the interval's confidence level.
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    n = int(v.size)
    return moments_interval(
        n,
        float(v.mean()) if n else math.nan,
        float(v.std(ddof=1)) if n > 1 else math.nan,
        int(v.sum()) if is_binary(v) else None,
        confidence=confidence,
    )


def moments_interval(
    n: int, mean: float, sd: float, successes: int | None, *, confidence: float = 0.95
) -> tuple[float, float, IntervalMethod]:
    """`score_interval` from the scores' moments, for a caller that aggregated them itself (a
    million scores summed by Polars rather than handed over as an array).

    Args:
        n: how many finite scores.
        mean: their mean.
        sd: their standard deviation (ddof 1).
        successes: the number of 1s when every score is 0 or 1; None otherwise.
        confidence: the interval's confidence level.
    """
    if successes is not None and n < SMALL_SAMPLE_PAIRS:
        low, high = wilson_interval(successes, n, confidence=confidence)
        return low, high, IntervalMethod.WILSON
    if n < 2:
        return math.nan, math.nan, IntervalMethod.T
    # Lazily, and scipy.special, not scipy.stats: ~0.35 s to import here against ~1.2 s.
    from scipy import special

    half = float(special.stdtrit(n - 1, (1 + confidence) / 2)) * sd / math.sqrt(n)
    return max(0.0, mean - half), min(1.0, mean + half), IntervalMethod.T


def pair_counts(baseline: NDArray[Any], candidate: NDArray[Any]) -> tuple[Any, Any, Any, Any]:
    """The 2x2 table of binary pairs along the last axis: (both 1, candidate only, baseline only,
    both 0)."""
    b = np.asarray(baseline, dtype=np.float64)
    c = np.asarray(candidate, dtype=np.float64)
    e = np.sum((c == 1) & (b == 1), axis=-1)
    f = np.sum((c == 1) & (b == 0), axis=-1)
    g = np.sum((c == 0) & (b == 1), axis=-1)
    return e, f, g, b.shape[-1] - e - f - g


def newcombe_paired(
    baseline: NDArray[Any], candidate: NDArray[Any], *, confidence: float = 0.95
) -> tuple[Any, Any]:
    """Newcombe's (1998, method 10) interval for ``mean(candidate) - mean(baseline)``, binary pairs.

    From the 2x2 table of pairs (e: both 1, f: candidate 1 only, g: baseline 1 only, h: both 0), the
    Wilson intervals ``(l1, u1)`` of the candidate's and ``(l2, u2)`` of the baseline's proportion
    are combined with a correction ``phi`` for their correlation::

        low  = theta - sqrt((p1 - l1)^2 - 2 phi (p1 - l1)(u2 - p2) + (u2 - p2)^2)
        high = theta + sqrt((u1 - p1)^2 - 2 phi (u1 - p1)(p2 - l2) + (p2 - l2)^2)

    Args:
        baseline: the baseline's 0/1 scores, aligned pair by pair with ``candidate`` (the last
            axis: shape ``(..., n)`` gives an interval per row).
        candidate: the candidate's 0/1 scores.
        confidence: the interval's confidence level.
    """
    e, f, g, h = (np.asarray(v, dtype=np.float64) for v in pair_counts(baseline, candidate))
    n = e + f + g + h
    with np.errstate(invalid="ignore", divide="ignore"):
        p1, p2 = (e + f) / n, (e + g) / n
        l1, u1 = wilson_interval(e + f, n, confidence=confidence)
        l2, u2 = wilson_interval(e + g, n, confidence=confidence)
        a = (e + f) * (g + h) * (e + g) * (f + h)
        cross = e * h - f * g
        # Newcombe's continuity-corrected numerator: positive products are shrunk by n/2.
        corrected = np.where(cross > n / 2, cross - n / 2, np.where(cross >= 0, 0.0, cross))
        phi = np.where(a > 0, corrected / np.sqrt(np.where(a > 0, a, 1.0)), 0.0)
        below = np.sqrt(np.maximum(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
        above = np.sqrt(np.maximum(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    low, high = np.maximum(-1.0, p1 - p2 - below), np.minimum(1.0, p1 - p2 + above)
    return (float(low), float(high)) if low.ndim == 0 else (low, high)


def mcnemar_exact_p(baseline: NDArray[Any], candidate: NDArray[Any]) -> Any:
    """Two-sided exact McNemar p-value: a binomial test of the discordant pairs at 1/2 (1.0 with
    none), ``min(1, 2 * P(Binomial(f + g, 1/2) <= min(f, g)))``.

    Args:
        baseline: the baseline's 0/1 scores, aligned with ``candidate`` (last axis, as
            `newcombe_paired`).
        candidate: the candidate's 0/1 scores.
    """
    # Lazily, and scipy.special, not scipy.stats: ~0.35 s to import here against ~1.2 s.
    from scipy import special

    _, f, g, _ = pair_counts(baseline, candidate)
    p = np.minimum(1.0, 2.0 * special.bdtr(np.minimum(f, g), f + g, 0.5))
    p = np.where(f + g == 0, 1.0, p)
    return float(p) if p.ndim == 0 else p


def adjusted_p_values(p_values: NDArray[Any] | Sequence[float], method: Adjustment) -> NDArray[np.float64]:
    """Adjusted p-values along the last axis: reject hypothesis i at level alpha iff ``adjusted[i] <= alpha``.

    NaN p-values (a test that could not be made) stay NaN and do not count in the family.

    Args:
        p_values: p-values, shape ``(k,)`` or ``(..., k)`` (a family per row, for simulations).
        method: `Adjustment.HOLM` (family-wise error), `Adjustment.BH` (false discovery rate) or
            `Adjustment.NONE`.
    """
    p = np.array(p_values, dtype=np.float64)
    if method == Adjustment.NONE or p.size == 0:
        return p
    missing = np.isnan(p)
    m = np.sum(~missing, axis=-1, keepdims=True)
    filled = np.where(missing, np.inf, p)  # sorted last, never adjusted into the others
    order = np.argsort(filled, axis=-1, kind="stable")
    ranked = np.take_along_axis(filled, order, axis=-1)
    rank = np.arange(1, p.shape[-1] + 1)
    with np.errstate(invalid="ignore"):  # missing tests rank last as inf; they are put back as NaN
        scaled = _step(ranked, rank, m, method)
    adjusted = np.empty_like(p)
    np.put_along_axis(adjusted, order, np.minimum(scaled, 1.0), axis=-1)
    return np.where(missing, np.nan, adjusted)


def _step(
    ranked: NDArray[np.float64], rank: NDArray[Any], m: NDArray[Any], method: Adjustment
) -> NDArray[np.float64]:
    """Holm's step-down or BH's step-up adjustment of p-values sorted along the last axis."""
    if method == Adjustment.HOLM:
        return np.maximum.accumulate(np.maximum(m - rank + 1, 1) * ranked, axis=-1)
    if method == Adjustment.BH:
        return np.flip(np.minimum.accumulate(np.flip(m * ranked / rank, -1), axis=-1), -1)
    raise ValueError(f"unknown adjustment {method!r}")
