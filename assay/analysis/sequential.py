"""An anytime-valid confidence sequence on a paired difference of [0, 1] scores, and its verdicts.

Plain, typed numpy functions: no Prefect, no I/O. The method is the betting confidence sequence
of Waudby-Smith & Ramdas, "Estimating means of bounded random variables by betting" (JRSS-B 2024),
with the hedged capital process and predictable plug-in bets (their Theorem 3 and eq. 26), here
as two one-sided processes at ``alpha / 2`` each:

* A paired difference ``d = candidate - baseline`` lies in [-1, 1]; ``x = (d + 1) / 2`` lies in
  [0, 1] with mean ``mu = (delta + 1) / 2``.
* For a candidate mean ``m``, the capital ``K+_t(m) = prod_i (1 + lam_i (x_i - m))`` is a
  nonnegative supermartingale when ``mu <= m`` (and ``K-_t(m) = prod_i (1 - lam_i (x_i - m))``
  when ``mu >= m``), so by Ville's inequality it ever reaches ``2 / alpha`` with probability at
  most ``alpha / 2``. The confidence sequence at item t is every m neither capital has rejected.
* The bets are predictable (they use items before i only): ``lam_i = min(sqrt(2 log(2 / alpha) /
  (s2_{i-1} i log(1 + i))), 1/2)``, with ``s2`` the running variance of x, regularised by one
  pseudo-observation of mean 1/2 and variance 1/4. Because the bets do not depend on m, ``K+``
  falls and ``K-`` rises with m, so the set is an interval ``(low, high)``: found on a grid of m
  and refined by linear interpolation of the (concave) log capital, which only ever widens it.
* Running intersection: ``low`` never falls and ``high`` never rises as items arrive.

Guarantee: whatever the scores' distribution in [0, 1] and whenever the run stops (even on a
look at the data), the interval covers the true mean difference at every item at once with
probability at least ``1 - alpha``; `docs/statistics.md` states the simulated figures.

A library was preferred: `confseq` (the authors' package) ships as a source build of C++ code,
last released in 2023, and `expectation` needs Python 3.12; this is the same method in ~100 lines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from assay.analysis.stats import verdict_of
from assay.outcomes import Verdict

_TRUNCATION = 0.5  # the largest bet: keeps every capital factor >= 1/2 and monotone in m
_GRID = np.linspace(0.0, 1.0, 2001)  # candidate means of x (delta steps of 0.001)
_CHUNK = 1024  # items per step of a grid update (bounds memory to grid x chunk doubles)

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class SequenceState:
    """Where a confidence sequence stands after ``n`` paired items.

    ``low``/``high`` bound the mean paired difference (candidate - baseline); ``mean`` is its
    running mean; ``verdict`` is `verdict_of` on them against ``threshold``.
    """

    n: int
    mean: float
    low: float
    high: float
    verdict: Verdict
    alpha: float
    threshold: float


def bet_sizes(s2_prev: FloatArray, t: FloatArray, level: float) -> FloatArray:
    """Predictable plug-in bets: ``min(sqrt(2 level / (s2_{t-1} t log(1 + t))), 1/2)``.

    Args:
        s2_prev: the regularised variance of x over the items before each one.
        t: each item's position, from 1.
        level: ``log(2 / alpha)``.
    """
    return np.minimum(np.sqrt(2.0 * level / (s2_prev * t * np.log1p(t))), _TRUNCATION)


class ConfidenceSequence:
    """A betting confidence sequence fed paired differences a batch at a time.

    State is O(grid): a run updates it after each committed batch and reads `state`.

    Args:
        alpha: 1 - the confidence level, in (0, 1).
        threshold: the smallest change that matters (the verdict's band), >= 0.
    """

    def __init__(self, *, alpha: float = 0.05, threshold: float = 0.02) -> None:
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
        if not math.isfinite(threshold) or threshold < 0:
            raise ValueError(f"threshold must be a finite number >= 0, got {threshold!r}")
        self.alpha, self.threshold = alpha, threshold
        self._level = math.log(2.0 / alpha)
        self._n = 0
        self._sum = 0.0  # of x
        self._s2_sum = 0.25  # regularised sum of squared deviations
        self._up = np.zeros(_GRID.size)  # log K+(m) per grid m
        self._down = np.zeros(_GRID.size)
        self._low, self._high = -1.0, 1.0

    def update(self, deltas: NDArray[Any] | list[float]) -> list[tuple[float, float]]:
        """Feed paired differences in the run's order; returns ``(low, high)`` after each.

        Args:
            deltas: candidate - baseline per item, each in [-1, 1].

        Raises:
            ValueError: on a difference outside [-1, 1] (or not finite).
        """
        d = np.asarray(deltas, dtype=np.float64).ravel()
        if d.size and not (np.all(np.isfinite(d)) and np.all(np.abs(d) <= 1.0)):
            raise ValueError("paired differences must be finite and in [-1, 1] (scores in [0, 1])")
        path: list[tuple[float, float]] = []
        for start in range(0, d.size, _CHUNK):
            path.extend(self._chunk((d[start : start + _CHUNK] + 1.0) / 2.0))
        return path

    def _chunk(self, x: FloatArray) -> list[tuple[float, float]]:
        t = self._n + np.arange(1, x.size + 1, dtype=np.float64)
        mu = (0.5 + self._sum + np.cumsum(x)) / (t + 1)
        s2 = (self._s2_sum + np.cumsum((x - mu) ** 2)) / (t + 1)
        s2_prev = np.concatenate([[self._s2_sum / (self._n + 1)], s2[:-1]])
        lam = bet_sizes(s2_prev, t, self._level)
        step = lam[None, :] * (x[None, :] - _GRID[:, None])  # (grid, chunk)
        up = self._up[:, None] + np.cumsum(np.log1p(step), axis=1)
        down = self._down[:, None] + np.cumsum(np.log1p(-step), axis=1)
        self._up, self._down = up[:, -1].copy(), down[:, -1].copy()
        self._n += x.size
        self._sum += float(x.sum())
        self._s2_sum = float(s2[-1] * (t[-1] + 1))
        lows = _lower_ends(up - self._level)
        highs = _upper_ends(down - self._level)
        path = []
        for low, high in zip(lows, highs, strict=True):
            self._low, self._high = max(self._low, float(2 * low - 1)), min(self._high, float(2 * high - 1))
            path.append((self._low, self._high))
        return path

    @property
    def state(self) -> SequenceState:
        """The interval, running mean and verdict after the items fed so far."""
        mean = 2 * self._sum / self._n - 1 if self._n else math.nan
        low, high = (self._low, self._high) if self._n else (math.nan, math.nan)
        return SequenceState(
            n=self._n,
            mean=mean,
            low=low,
            high=high,
            verdict=verdict_of(low, high, mean, self.threshold),
            alpha=self.alpha,
            threshold=self.threshold,
        )


def _lower_ends(excess: FloatArray) -> FloatArray:
    """Per column, the lowest m (of x) not rejected by K+: excess = log K+ - level, falling in m."""
    rejected = excess >= 0
    k = rejected.sum(axis=0)  # grid points below the end (monotone, so a prefix)
    ends = np.zeros(excess.shape[1])
    inside = (k > 0) & (k < _GRID.size)
    cols = np.nonzero(inside)[0]
    a, b = excess[k[cols] - 1, cols], excess[k[cols], cols]
    ends[cols] = _GRID[k[cols] - 1] + (_GRID[k[cols]] - _GRID[k[cols] - 1]) * a / (a - b)
    ends[k == _GRID.size] = 1.0
    return ends


def _upper_ends(excess: FloatArray) -> FloatArray:
    """Per column, the highest m not rejected by K-: excess = log K- - level, rising in m."""
    return 1.0 - _lower_ends(excess[::-1])


def excluded(
    deltas: NDArray[Any], value: float, *, alpha: float = 0.05
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Whether the sequence has excluded ``value`` by each item, for many runs at once.

    The exact test of one point (no grid): ``below[..., t]`` says the upper end fell under
    ``value`` by item t, ``above[..., t]`` that the lower end rose over it. The grid interval of
    `ConfidenceSequence` is never narrower, so its errors are at most these.

    Args:
        deltas: paired differences, shape ``(..., n)`` (runs by items), in [-1, 1].
        value: a mean difference, in [-1, 1].
        alpha: 1 - the confidence level.
    """
    x = (np.asarray(deltas, dtype=np.float64) + 1.0) / 2.0
    m = (value + 1.0) / 2.0
    level = math.log(2.0 / alpha)
    t = np.arange(1, x.shape[-1] + 1, dtype=np.float64)
    mu = (0.5 + np.cumsum(x, axis=-1)) / (t + 1)
    s2 = (0.25 + np.cumsum((x - mu) ** 2, axis=-1)) / (t + 1)
    s2_prev = np.concatenate([np.full(x.shape[:-1] + (1,), 0.25), s2[..., :-1]], axis=-1)
    step = bet_sizes(s2_prev, t, level) * (x - m)
    above = np.logical_or.accumulate(np.cumsum(np.log1p(step), axis=-1) >= level, axis=-1)
    below = np.logical_or.accumulate(np.cumsum(np.log1p(-step), axis=-1) >= level, axis=-1)
    return below, above


def stopping(
    deltas: NDArray[Any], *, threshold: float, alpha: float = 0.05
) -> tuple[NDArray[np.int64], NDArray[Any]]:
    """When each of many runs would stop, and with which verdict (vectorised for simulations).

    The verdict at item t is `verdict_of` on the sequence's interval and the running mean,
    computed from exact point tests at 0 and ``±threshold`` (`excluded`).

    Args:
        deltas: paired differences, shape ``(runs, n)``.
        threshold: the verdict's band, > 0.
        alpha: 1 - the confidence level.

    Returns:
        ``(items, verdicts)``: items used (n + 1 when undecided after n) and the `Verdict` value.
    """
    d = np.asarray(deltas, dtype=np.float64)
    mean = np.cumsum(d, axis=-1) / np.arange(1, d.shape[-1] + 1)
    below_zero, above_zero = excluded(d, 0.0, alpha=alpha)
    _, above_low = excluded(d, -threshold, alpha=alpha)
    below_high, _ = excluded(d, threshold, alpha=alpha)
    decided = {
        Verdict.REGRESSED: below_zero & (mean < -threshold),
        Verdict.IMPROVED: above_zero & (mean > threshold),
        Verdict.UNCHANGED: above_low & below_high,
    }
    n = d.shape[-1]
    items = np.full(d.shape[:-1], n + 1, dtype=np.int64)
    verdicts = np.full(d.shape[:-1], Verdict.INCONCLUSIVE.value, dtype=object)
    for name, hit in decided.items():  # verdict_of's order: the first rule that holds wins
        when = np.where(hit.any(axis=-1), hit.argmax(axis=-1) + 1, n + 1)
        sooner = when < items
        items = np.where(sooner, when, items)
        verdicts = np.where(sooner, name.value, verdicts)
    return items, verdicts
