"""Judge-corrected means: prediction-powered inference over a judge's scores and human labels.

Plain NumPy functions, no I/O. A judge scores every item (`f`); people label some of them (`y`,
on the same scale). The judge's mean is biased wherever the judge is; the labels alone are
unbiased but few. These estimators use both and stay unbiased for the human-scale mean, with an
interval that holds its level (docs/statistics.md, "Scores a model graded"):

* **PPI** (Angelopoulos, Bates, Fannjiang, Jordan & Zrnic 2023, "Prediction-powered
  inference", Science 382): the judge's mean over the unlabelled items plus the mean of the
  rectifier `y - f` over the labelled ones; variance the sum of the two means' variances.
* **PPI++** (Angelopoulos, Duchi & Zrnic 2023, "PPI++: Efficient prediction-powered inference"):
  the judge's scores weighted by a power-tuning `lam` estimated from the data (clipped to
  [0, 1]: 0 is the labels alone, 1 is PPI), so a poor judge never makes the interval wider
  than the labels' own.
* **Inverse-probability weighting** (Zrnic & Candès 2024, "Active statistical inference", ICML):
  for labels drawn with unequal, known chances `pi` (each item independently), each item's term
  is `lam * f + (y - lam * f) * labelled / pi`; its mean is unbiased and its variance is the
  terms' variance over all items.

Each returns a `Corrected`: the estimate, its normal interval, its standard error, `lam` and the
counts. The paired delta of two runs is the same estimator over per-item differences
(`ppi_mean` of `y_b - y_a` on the items labelled in both, `f_b - f_a` on the rest).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Corrected:
    """A judge-corrected mean and its interval.

    Attributes:
        estimate: the human-scale mean.
        ci_low: the interval's low end.
        ci_high: its high end.
        se: the estimate's standard error.
        lam: the weight of the judge's scores (1: PPI; 0: the labels alone).
        n_labelled: items with a label.
        n_items: items in all (labelled or not).
        method: `ppi++`, `ppi` or `ipw-ppi++` (the unequal-chance labels' estimator).
    """

    estimate: float
    ci_low: float
    ci_high: float
    se: float
    lam: float
    n_labelled: int
    n_items: int
    method: str

    def as_dict(self) -> dict[str, Any]:
        """The fields, JSON-able."""
        return {
            "estimate": self.estimate,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "se": self.se,
            "lam": self.lam,
            "n_labelled": self.n_labelled,
            "n_items": self.n_items,
            "method": self.method,
        }


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return NormalDist().inv_cdf((1.0 + confidence) / 2.0)


def _as_array(values: Any, name: str) -> FloatArray:
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite numbers")
    return array


def power_tuning(y: FloatArray, f_labelled: FloatArray, f_unlabelled: FloatArray) -> float:
    """PPI++'s `lam` for a mean: `cov(y, f) / ((1 + n / N) var(f))` over the labelled `y`, `f`
    and all `f` (Angelopoulos, Duchi & Zrnic 2023, Example 6.1), clipped to [0, 1]; 0 when the
    judge's scores do not vary (nothing to learn from them)."""
    n, big_n = y.size, f_unlabelled.size
    every = np.concatenate([f_labelled, f_unlabelled])
    variance = float(np.var(every, ddof=1)) if every.size > 1 else 0.0
    if n < 2 or variance == 0.0:
        return 0.0
    covariance = float(np.mean((y - y.mean()) * (f_labelled - f_labelled.mean())))
    return float(np.clip(covariance / ((1.0 + n / big_n) * variance), 0.0, 1.0))


def ppi_mean(
    y: Any, f_labelled: Any, f_unlabelled: Any, *, lam: float | None = None, confidence: float = 0.95
) -> Corrected:
    """The prediction-powered mean of the labels' scale (PPI++ unless `lam` is given).

    `estimate = lam * mean(f_unlabelled) + mean(y - lam * f_labelled)`, its variance
    `var(lam * f_unlabelled) / N + var(y - lam * f_labelled) / n` (population variances, as the
    paper's), the interval `estimate ± z * se`.

    Args:
        y: the labels (n of them), a uniform random sample of the items.
        f_labelled: the judge's scores of the same n items, in the same order.
        f_unlabelled: the judge's scores of the N items without a label.
        lam: the judge's weight; None tunes it (`power_tuning`); 1 is plain PPI.
        confidence: the interval's level.

    Raises:
        ValueError: fewer than two labels or one unlabelled item, lengths that differ, or a
            value that is not finite.
    """
    labels = _as_array(y, "labels")
    judged = _as_array(f_labelled, "the labelled items' judge scores")
    rest = _as_array(f_unlabelled, "the unlabelled items' judge scores")
    if labels.size != judged.size:
        raise ValueError(f"{labels.size} labels but {judged.size} judge scores of the labelled items")
    if labels.size < 2 or rest.size < 1:
        raise ValueError(f"need at least 2 labels and 1 unlabelled item, got {labels.size} and {rest.size}")
    tuned = power_tuning(labels, judged, rest) if lam is None else float(lam)
    rectifier = labels - tuned * judged
    estimate = float(tuned * rest.mean() + rectifier.mean())
    se = math.sqrt(float(np.var(tuned * rest)) / rest.size + float(np.var(rectifier)) / labels.size)
    half = _z(confidence) * se
    return Corrected(
        estimate=estimate,
        ci_low=estimate - half,
        ci_high=estimate + half,
        se=se,
        lam=tuned,
        n_labelled=int(labels.size),
        n_items=int(labels.size + rest.size),
        method="ppi++" if lam is None else "ppi",
    )


def ipw_ppi_mean(f: Any, y: Any, pi: Any, *, lam: float | None = None, confidence: float = 0.95) -> Corrected:
    """The prediction-powered mean when each item was labelled with its own known chance.

    Each of the N items has the term `z_i = lam * f_i + (y_i - lam * f_i) * ξ_i / pi_i` (ξ_i = 1
    where labelled); `estimate = mean(z)`, `se = sd(z) / sqrt(N)` (Zrnic & Candès 2024, for
    items drawn independently, a Poisson sample). `lam`, tuned, minimises that variance:
    `-cov(a, b) / var(b)` with `a = y ξ / pi` and `b = f (1 - ξ / pi)`, clipped to [0, 1].

    Args:
        f: the judge's score of every item.
        y: the label of every item, NaN where it has none.
        pi: every item's chance of being labelled, in (0, 1].
        lam: the judge's weight; None tunes it.
        confidence: the interval's level.

    Raises:
        ValueError: lengths that differ, a chance outside (0, 1], fewer than two labels.
    """
    judged = _as_array(f, "judge scores")
    labels = np.asarray(y, dtype=np.float64).reshape(-1)
    chances = _as_array(pi, "inclusion probabilities")
    if not judged.size == labels.size == chances.size:
        raise ValueError(f"{judged.size} judge scores, {labels.size} labels and {chances.size} chances")
    if np.any(chances <= 0.0) or np.any(chances > 1.0):
        raise ValueError("every inclusion probability must be in (0, 1]")
    labelled = ~np.isnan(labels)
    if labelled.sum() < 2:
        raise ValueError(f"need at least 2 labels, got {int(labelled.sum())}")
    weight = np.where(labelled, 1.0 / chances, 0.0)
    a = np.where(labelled, labels, 0.0) * weight
    b = judged * (1.0 - weight)
    if lam is None:
        var_b = float(np.var(b, ddof=1))
        tuned = 0.0 if var_b == 0.0 else float(np.clip(-np.cov(a, b)[0, 1] / var_b, 0.0, 1.0))
    else:
        tuned = float(lam)
    terms = a + tuned * b
    estimate = float(terms.mean())
    se = float(np.std(terms, ddof=1)) / math.sqrt(terms.size)
    half = _z(confidence) * se
    return Corrected(
        estimate=estimate,
        ci_low=estimate - half,
        ci_high=estimate + half,
        se=se,
        lam=tuned,
        n_labelled=int(labelled.sum()),
        n_items=int(judged.size),
        method="ipw-ppi++" if lam is None else "ipw-ppi",
    )


def labels_only_mean(y: Any, *, confidence: float = 0.95) -> Corrected:
    """The classical mean of the labels alone with its normal interval: what the corrected
    estimate is measured against (`lam = 0`)."""
    labels = _as_array(y, "labels")
    if labels.size < 2:
        raise ValueError(f"need at least 2 labels, got {labels.size}")
    estimate = float(labels.mean())
    se = float(np.std(labels)) / math.sqrt(labels.size)
    half = _z(confidence) * se
    return Corrected(estimate, estimate - half, estimate + half, se, 0.0, labels.size, labels.size, "labels")


def judge_only_mean(f: Any, *, confidence: float = 0.95) -> Corrected:
    """The judge's raw mean and its normal interval, as if the judge were the truth: what a run
    reports without labels (the interval the corrected one stands beside)."""
    judged = _as_array(f, "judge scores")
    if judged.size < 2:
        raise ValueError(f"need at least 2 judge scores, got {judged.size}")
    estimate = float(judged.mean())
    se = float(np.std(judged, ddof=1)) / math.sqrt(judged.size)
    half = _z(confidence) * se
    return Corrected(estimate, estimate - half, estimate + half, se, 1.0, 0, judged.size, "judge")
