"""How far a judge agrees with people: the figures of `assay agreement`, each with its interval and n.

Plain NumPy/SciPy functions over paired arrays (`judge[i]` and `human[i]` judge the same output),
no I/O. Which figures depend on the scale (`scale_of`):

* **binary** (every value 0 or 1): accuracy (Wilson interval), Cohen's kappa (Cohen 1960; its
  large-sample standard error, Fleiss, Cohen & Everitt 1969) and the confusion matrix;
* **ordinal** (a few distinct levels, such as a 1-5 rubric mapped onto [0, 1]): quadratic-weighted
  kappa (Cohen 1968) with a seeded bootstrap interval, and the exact-match rate;
* **continuous**: Spearman's rho (interval by Fisher's z with Bonett & Wright's 2000 standard
  error) and the mean absolute error (t interval);
* always the judge's **bias**, judge mean - human mean over the labelled items (paired t interval).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import NDArray

from assay.analysis.intervals import is_binary, wilson_interval

FloatArray = NDArray[np.float64]
BINARY, ORDINAL, CONTINUOUS = "binary", "ordinal", "continuous"
SCALES = (BINARY, ORDINAL, CONTINUOUS)
# At most this many distinct values (judge's and people's together): an ordinal scale.
_ORDINAL_LEVELS = 11
_RESAMPLES = 2000


def scale_of(judge: FloatArray, human: FloatArray) -> str:
    """`binary`, `ordinal` or `continuous`: what the two arrays' values look like together."""
    both = np.concatenate([judge, human])
    if is_binary(both):
        return BINARY
    return ORDINAL if np.unique(both).size <= _ORDINAL_LEVELS else CONTINUOUS


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf((1.0 + confidence) / 2.0)


def _figure(value: float, low: float, high: float, n: int) -> dict[str, Any]:
    return {"value": value, "ci_low": low, "ci_high": high, "n": n}


def bias(judge: FloatArray, human: FloatArray, *, confidence: float = 0.95) -> dict[str, Any]:
    """Judge mean - human mean over the paired items, with its paired t interval."""
    from scipy import stats

    d = judge - human
    n = d.size
    mean = float(d.mean()) if n else math.nan
    if n < 2:
        return _figure(mean, math.nan, math.nan, n)
    se = float(d.std(ddof=1)) / math.sqrt(n)
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * se
    return _figure(mean, mean - half, mean + half, n)


def confusion(judge: FloatArray, human: FloatArray) -> dict[str, int]:
    """Counts of a binary judge against people: `tp` (both 1), `fp` (judge 1, people 0), `fn`, `tn`."""
    j, h = judge == 1.0, human == 1.0
    return {
        "tp": int(np.sum(j & h)),
        "fp": int(np.sum(j & ~h)),
        "fn": int(np.sum(~j & h)),
        "tn": int(np.sum(~j & ~h)),
    }


def cohen_kappa(judge: FloatArray, human: FloatArray, *, confidence: float = 0.95) -> dict[str, Any]:
    """Cohen's kappa of two binary raters, `(po - pe) / (1 - pe)`, with the interval
    `kappa ± z * sqrt(po (1 - po) / (n (1 - pe)^2))`; NaN where chance agreement is total."""
    n = judge.size
    po = float(np.mean(judge == human)) if n else math.nan
    pe = float(judge.mean() * human.mean() + (1 - judge.mean()) * (1 - human.mean())) if n else math.nan
    if n == 0 or pe == 1.0:
        return _figure(math.nan, math.nan, math.nan, n)
    kappa = (po - pe) / (1 - pe)
    half = _z(confidence) * math.sqrt(po * (1 - po) / (n * (1 - pe) ** 2))
    return _figure(kappa, kappa - half, kappa + half, n)


def weighted_kappa(judge: FloatArray, human: FloatArray) -> float:
    """Quadratic-weighted kappa over the levels the two arrays use: `1 - sum(w O) / sum(w E)`,
    `w = (i - j)^2` between level positions, `E` the outer product of the margins."""
    levels = np.unique(np.concatenate([judge, human]))
    if levels.size < 2:
        return math.nan
    position = {float(v): i for i, v in enumerate(levels)}
    k = levels.size
    observed = np.zeros((k, k))
    for a, b in zip(judge, human, strict=True):
        observed[position[float(a)], position[float(b)]] += 1
    observed /= observed.sum()
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    i, j = np.indices((k, k))
    weights = (i - j) ** 2
    denominator = float((weights * expected).sum())
    return math.nan if denominator == 0 else 1.0 - float((weights * observed).sum()) / denominator


def _bootstrap(
    statistic: Any, judge: FloatArray, human: FloatArray, confidence: float, seed: int
) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    n = judge.size
    draws = np.array([statistic(judge[idx], human[idx]) for idx in rng.integers(0, n, size=(_RESAMPLES, n))])
    draws = draws[np.isfinite(draws)]
    if draws.size == 0:
        return math.nan, math.nan
    tail = (1 - confidence) / 2
    return float(np.quantile(draws, tail)), float(np.quantile(draws, 1 - tail))


def spearman(judge: FloatArray, human: FloatArray, *, confidence: float = 0.95) -> dict[str, Any]:
    """Spearman's rho with the Fisher-z interval, standard error `sqrt((1 + rho^2 / 2) / (n - 3))`
    (Bonett & Wright 2000)."""
    from scipy import stats

    n = judge.size
    if n < 4 or np.ptp(judge) == 0 or np.ptp(human) == 0:
        return _figure(math.nan, math.nan, math.nan, n)
    rho = float(stats.spearmanr(judge, human).statistic)
    se = math.sqrt((1 + rho * rho / 2) / (n - 3))
    centre = math.atanh(max(min(rho, 1 - 1e-12), -1 + 1e-12))
    half = _z(confidence) * se
    return _figure(rho, math.tanh(centre - half), math.tanh(centre + half), n)


def mean_absolute_error(judge: FloatArray, human: FloatArray, *, confidence: float = 0.95) -> dict[str, Any]:
    """Mean |judge - human| with its t interval."""
    from scipy import stats

    errors = np.abs(judge - human)
    n = errors.size
    mae = float(errors.mean()) if n else math.nan
    if n < 2:
        return _figure(mae, math.nan, math.nan, n)
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * float(errors.std(ddof=1)) / math.sqrt(n)
    return _figure(mae, max(0.0, mae - half), mae + half, n)


def agreement(
    judge: Any, human: Any, *, scale: str | None = None, confidence: float = 0.95, seed: int = 0
) -> dict[str, Any]:
    """Every figure of a judge's agreement with people, for the scale the values have.

    Args:
        judge: the judge's scores of the labelled items.
        human: the people's values of the same items, in the same order.
        scale: `binary`, `ordinal` or `continuous`; None reads it from the values (`scale_of`).
        confidence: the intervals' level.
        seed: the bootstrap's seed (weighted kappa).

    Returns:
        `scale`, `n`, `judge_mean`, `human_mean`, `bias` and the scale's figures (each a dict of
        `value`, `ci_low`, `ci_high`, `n`; `confusion` a dict of counts).

    Raises:
        ValueError: lengths that differ, or a scale that is none of `SCALES`.
    """
    j = np.asarray(judge, dtype=np.float64).reshape(-1)
    h = np.asarray(human, dtype=np.float64).reshape(-1)
    if j.size != h.size:
        raise ValueError(f"{j.size} judge scores but {h.size} labels")
    chosen = scale or scale_of(j, h)
    if chosen not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(SCALES)}, got {chosen!r}")
    n = int(j.size)
    result: dict[str, Any] = {
        "scale": chosen,
        "n": n,
        "judge_mean": float(j.mean()) if n else math.nan,
        "human_mean": float(h.mean()) if n else math.nan,
        "bias": bias(j, h, confidence=confidence),
    }
    if chosen == BINARY:
        hits = int(np.sum(j == h))
        low, high = wilson_interval(hits, n, confidence=confidence) if n else (math.nan, math.nan)
        result["accuracy"] = _figure(hits / n if n else math.nan, low, high, n)
        result["kappa"] = cohen_kappa(j, h, confidence=confidence)
        result["confusion"] = confusion(j, h)
    elif chosen == ORDINAL:
        hits = int(np.sum(j == h))
        low, high = wilson_interval(hits, n, confidence=confidence) if n else (math.nan, math.nan)
        result["exact_agreement"] = _figure(hits / n if n else math.nan, low, high, n)
        value = weighted_kappa(j, h)
        low, high = _bootstrap(weighted_kappa, j, h, confidence, seed) if n > 1 else (math.nan, math.nan)
        result["weighted_kappa"] = _figure(value, low, high, n)
    else:
        result["spearman"] = spearman(j, h, confidence=confidence)
        result["mae"] = mean_absolute_error(j, h, confidence=confidence)
    return result
