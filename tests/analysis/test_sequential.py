"""The sequential compare's guarantees, measured by simulation (issue 17, points 2, 4 and 5).

Each simulation draws 2,000 replications with a fixed seed and prints its figures (run with
`-s` to see them); docs/statistics.md quotes them. Binary scores are correlated pass/fail pairs;
continuous scores are skewed [0, 1] scores sharing an item difficulty.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from assay.analysis.compare import adjust_verdicts, human_line
from assay.analysis.intervals import (
    adjusted_p_values,
    mcnemar_exact_p,
    newcombe_paired,
    score_interval,
    wilson_interval,
)
from assay.analysis.sequential import ConfidenceSequence, excluded, stopping
from assay.analysis.stats import paired_estimates, verdict_of
from assay.outcomes import Adjustment, IntervalMethod, Verdict
from assay.testing.simulate import binary_pairs, continuous_pairs

REPLICATIONS = 2_000
ALPHA = 0.05
SIZES = (20, 50, 100, 300)


KINDS = {"binary": binary_pairs, "continuous": continuous_pairs}


# -- the confidence sequence itself -------------------------------------------------------------


def test_batches_and_one_go_give_the_same_sequence() -> None:
    rng = np.random.default_rng(1)
    base, cand = binary_pairs(rng, (900,), -0.05)
    whole = ConfidenceSequence(alpha=ALPHA, threshold=0.02)
    path = whole.update(cand - base)
    batched = ConfidenceSequence(alpha=ALPHA, threshold=0.02)
    pieces = [batched.update(chunk) for chunk in np.split(cand - base, [7, 300, 301, 850])]
    np.testing.assert_allclose([p for piece in pieces for p in piece], path, rtol=0, atol=1e-12)
    assert batched.state == whole.state
    lows, highs = zip(*path, strict=True)
    assert all(b >= a for a, b in itertools.pairwise(lows))  # running intersection
    assert all(b <= a for a, b in itertools.pairwise(highs))
    assert all(
        low <= m <= high
        for (low, high), m in zip(path, np.cumsum(cand - base) / np.arange(1, 901), strict=True)
    )


def test_the_grid_interval_excludes_a_value_exactly_when_the_point_test_does() -> None:
    """The interval a run stores and the exact point tests of the simulations agree (up to the
    grid's interpolation, which only widens the interval)."""
    rng = np.random.default_rng(2)
    for delta in (-0.06, 0.0, 0.04):
        base, cand = (
            continuous_pairs(rng, (600,), min(delta, 0.0)) if delta <= 0 else binary_pairs(rng, (600,), delta)
        )
        d = cand - base
        path = np.array(ConfidenceSequence(alpha=ALPHA).update(d))
        for value in (-0.05, -0.02, 0.0, 0.02):
            below, above = excluded(d, value, alpha=ALPHA)
            grid_below, grid_above = path[:, 1] < value, path[:, 0] > value
            assert not np.any(grid_below & ~below) and not np.any(grid_above & ~above)
            # …and it is not wider than the grid step: it agrees at all but a handful of items.
            assert np.sum(grid_below != below) + np.sum(grid_above != above) <= 3


def test_the_verdict_of_the_sequence_is_the_verdict_rule_on_its_interval() -> None:
    rng = np.random.default_rng(3)
    base, cand = binary_pairs(rng, (2000,), -0.05)
    d = cand - base
    sequence = ConfidenceSequence(alpha=ALPHA, threshold=0.02)
    items, verdicts = stopping(d[None, :], threshold=0.02, alpha=ALPHA)
    stop = int(items[0])
    sequence.update(d[:stop])
    state = sequence.state
    assert verdicts[0] == Verdict.REGRESSED and state.verdict == Verdict.REGRESSED
    assert state.verdict == verdict_of(state.low, state.high, state.mean, 0.02)
    before = ConfidenceSequence(alpha=ALPHA, threshold=0.02)
    before.update(d[: stop - 1])
    assert before.state.verdict == Verdict.INCONCLUSIVE  # it stopped at the first decided item


def test_bad_differences_and_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="in \\[-1, 1\\]"):
        ConfidenceSequence().update([0.5, 1.5])
    with pytest.raises(ValueError, match="alpha"):
        ConfidenceSequence(alpha=0)
    with pytest.raises(ValueError, match="threshold"):
        ConfidenceSequence(threshold=-0.1)
    assert math.isnan(ConfidenceSequence().state.low)


# -- point 2: guarantees, simulated -------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.slow
def test_the_sequence_covers_the_true_delta_at_every_item_at_once(kind: str) -> None:
    rng = np.random.default_rng(20 + len(kind))
    n = 2000
    delta = -0.05
    base, cand = KINDS[kind](rng, (REPLICATIONS, n), delta)
    below, above = excluded(cand - base, delta, alpha=ALPHA)
    missed = below | above  # the interval has excluded the true delta by item t
    figures = {size: 1 - missed[:, size - 1].mean() for size in (*SIZES, n)}
    print(
        f"\n{kind}: P(covers the true delta at every item up to n): "
        + ", ".join(f"n={size} {value:.4f}" for size, value in figures.items())
    )
    assert figures[n] >= 1 - ALPHA


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.slow
def test_wrong_verdicts_stay_under_alpha_whenever_the_run_stops(kind: str) -> None:
    """Stopping at the first decided item is the most aggressive stopping time: a wrong verdict
    there, or at any later look, counts."""
    rng = np.random.default_rng(30 + len(kind))
    n = 2000
    base, cand = KINDS[kind](rng, (REPLICATIONS, n), 0.0)
    items, verdicts = stopping(cand - base, threshold=0.02, alpha=ALPHA)
    null_regressed = np.mean(verdicts == Verdict.REGRESSED)
    null_improved = np.mean(verdicts == Verdict.IMPROVED)
    ever_below, ever_above = excluded(cand - base, 0.0, alpha=ALPHA)
    base, cand = KINDS[kind](rng, (REPLICATIONS, n), -0.03)
    _, worse = stopping(cand - base, threshold=0.02, alpha=ALPHA)
    wrong_improved = np.mean(worse == Verdict.IMPROVED)
    print(
        f"\n{kind}: true delta 0 -> regressed {null_regressed:.4f}, improved {null_improved:.4f}; "
        f"0 ever excluded (any look, any rule) {np.mean(ever_below[:, -1] | ever_above[:, -1]):.4f}; "
        f"true delta -0.03 -> improved {wrong_improved:.4f}; "
        f"median items at delta 0: {np.median(items):.0f} of {n}"
    )
    assert null_regressed <= ALPHA and null_improved <= ALPHA and wrong_improved <= ALPHA
    assert np.mean(ever_below[:, -1] | ever_above[:, -1]) <= ALPHA


# -- point 4: small evals ------------------------------------------------------------------------


def _bootstrap_and_t(
    base: np.ndarray, cand: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Per replication (rows): does the paired bootstrap percentile CI (exact multinomial over
    the three differences, 1,000 resamples) / the paired t CI cover the true delta?"""
    from scipy import stats as scipy_stats

    d = cand - base
    n = d.shape[1]
    counts = np.stack([(d == v).sum(axis=1) for v in (-1.0, 0.0, 1.0)], axis=1)
    draws = rng.multinomial(n, counts / n, size=(1000, d.shape[0]))  # (resamples, runs, 3)
    means = (draws @ np.array([-1.0, 0.0, 1.0])) / n
    low, high = np.quantile(means, [0.025, 0.975], axis=0)
    mean, sd = d.mean(axis=1), d.std(axis=1, ddof=1)
    half = scipy_stats.t.ppf(0.975, n - 1) * sd / np.sqrt(n)
    return low, high, mean - half, mean + half


@pytest.mark.slow
def test_small_sample_coverage_of_each_method_for_binary_pairs() -> None:
    rng = np.random.default_rng(40)
    delta = -0.05
    rows = []
    for n in SIZES:
        base, cand = binary_pairs(rng, (REPLICATIONS, n), delta)
        boot_low, boot_high, t_low, t_high = _bootstrap_and_t(base, cand, rng)
        newcombe = np.column_stack(newcombe_paired(base, cand))
        covered = {
            "bootstrap": np.mean((boot_low <= delta) & (delta <= boot_high)),
            "t": np.mean((t_low <= delta) & (delta <= t_high)),
            "newcombe": np.mean((newcombe[:, 0] <= delta) & (delta <= newcombe[:, 1])),
        }
        rows.append((n, covered))
        print(f"\nn={n}: 95 % CI coverage " + ", ".join(f"{k} {v:.4f}" for k, v in covered.items()))
    for n, covered in rows:
        assert covered["newcombe"] >= 0.935, (n, covered)  # within 1.5 points of 95 % at every n
    # Below a few dozen pairs the bootstrap is too narrow: that is why compare switches.
    assert rows[0][1]["bootstrap"] < rows[0][1]["newcombe"]


def test_compare_uses_newcombe_below_300_binary_pairs_and_says_so() -> None:
    rng = np.random.default_rng(41)
    base, cand = binary_pairs(rng, (299,), -0.05)
    (small,) = paired_estimates(base, cand, resamples=200)
    assert small.ci_method == IntervalMethod.NEWCOMBE
    assert (small.ci_low, small.ci_high) == newcombe_paired(base, cand)
    assert small.p_value == mcnemar_exact_p(base, cand)
    from scipy import stats as scipy_stats

    up, down = int(np.sum(cand > base)), int(np.sum(cand < base))
    assert small.p_value == pytest.approx(scipy_stats.binomtest(up, up + down, 0.5).pvalue)
    base, cand = binary_pairs(rng, (300,), -0.05)
    (large,) = paired_estimates(base, cand, resamples=200)
    assert large.ci_method == IntervalMethod.BOOTSTRAP
    (graded,) = paired_estimates(base[:50] * 0.5, cand[:50], resamples=200)
    assert graded.ci_method == IntervalMethod.BOOTSTRAP  # not a pass/fail scorer


def test_newcombe_and_wilson_match_the_published_examples() -> None:
    # Fagerland, Lydersen & Laake, "Statistical Analysis of Contingency Tables" (2017), ch. 8:
    # Cavo et al. (2012), 59 both, 6 candidate only, 16 baseline only, 80 neither:
    # estimate -0.0621, 95 % CI -0.1186 to -0.0046.
    base = np.array([1] * 59 + [0] * 6 + [1] * 16 + [0] * 80, dtype=float)
    cand = np.array([1] * 59 + [1] * 6 + [0] * 16 + [0] * 80, dtype=float)
    assert newcombe_paired(base, cand) == pytest.approx((-0.1186, -0.0046), abs=5e-5)
    # Wilson (Newcombe 1998, single proportion example): 81 of 263.
    assert wilson_interval(81, 263) == pytest.approx((0.2553, 0.3662), abs=5e-4)
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
    low, high, method = score_interval(np.array([1.0, 0.0, 1.0, 1.0]))
    assert method == IntervalMethod.WILSON and 0 < low < 0.75 < high <= 1
    assert score_interval(np.linspace(0, 1, 40))[2] == IntervalMethod.T


# -- point 5: many comparisons at once ----------------------------------------------------------


def test_holm_and_bh_adjust_as_published() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    assert adjusted_p_values(p, Adjustment.HOLM) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert adjusted_p_values(p, Adjustment.BH) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert adjusted_p_values(p, Adjustment.NONE) == pytest.approx(p)
    with_missing = adjusted_p_values([0.01, math.nan, 0.04], Adjustment.HOLM)
    assert with_missing[0] == pytest.approx(0.02) and math.isnan(with_missing[1])


def test_family_wise_false_alarms_with_ten_null_cells() -> None:
    rng = np.random.default_rng(50)
    cells, n = 10, 200
    base, cand = binary_pairs(rng, (REPLICATIONS, cells, n), 0.0)
    p = mcnemar_exact_p(base, cand)  # (replications, cells)
    rates = {method: np.mean((adjusted_p_values(p, method) <= ALPHA).any(axis=1)) for method in Adjustment}
    print(
        "\nfamily-wise false-alarm rate, 10 null cells of 200 binary pairs: "
        + ", ".join(f"{method} {rate:.4f}" for method, rate in rates.items())
    )
    assert rates[Adjustment.HOLM] <= ALPHA and rates[Adjustment.BH] <= ALPHA
    assert rates[Adjustment.NONE] > 2 * ALPHA  # unadjusted, ten looks raise the alarm far more often


def test_an_adjusted_family_keeps_only_the_verdicts_that_survive() -> None:
    rows = [
        {
            "scorer": "a",
            "n_pairs": 100,
            "delta": -0.1,
            "ci_low": -0.2,
            "ci_high": -0.05,
            "p_value": 0.01,
            "verdict": "regressed",
        },
        {
            "scorer": "b",
            "n_pairs": 100,
            "delta": -0.1,
            "ci_low": -0.2,
            "ci_high": -0.01,
            "p_value": 0.04,
            "verdict": "regressed",
        },
        {
            "scorer": "c",
            "n_pairs": 100,
            "delta": 0.1,
            "ci_low": 0.01,
            "ci_high": 0.2,
            "p_value": 0.03,
            "verdict": "improved",
        },
        {"scorer": "d", "n_pairs": 0, "verdict": "inconclusive"},
    ]
    adjust_verdicts(rows, Adjustment.HOLM, 0.05)
    assert [row["verdict"] for row in rows] == ["regressed", "inconclusive", "inconclusive", "inconclusive"]
    assert [row["p_adjusted"] for row in rows[:3]] == pytest.approx([0.03, 0.06, 0.06])
    assert rows[3]["p_adjusted"] is None and rows[0]["adjustment"] == "holm"
    assert human_line(rows[0]).endswith("regressed (Holm-adjusted)")
