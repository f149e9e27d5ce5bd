"""The paired statistics behind `assay compare` (`assay.analysis.stats`).

Simulations use fixed seeds, so every figure below is deterministic; the tolerances are set from
the Monte-Carlo error of each check, not tuned to the seeds.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from assay.analysis import resampling
from assay.analysis.stats import (
    PairedEstimate,
    items_needed,
    items_needed_for_sd,
    paired_estimates,
    sd_for_power_from_single_run,
    verdict,
)
from assay.outcomes import IntervalMethod, Verdict

# Coverage simulations: 1,000 datasets of 200 pairs. 1,000 resamples (not the default 10,000)
# keep them to a few seconds: the Monte-Carlo error of a 2.5 % quantile from 1,000 resamples
# (~0.05 bootstrap SEs) moves the coverage of an interval by well under a percentage point, while
# the coverage figure's own sampling error over 1,000 datasets is ~0.7 points.
SIMULATIONS = 1_000
ITEMS = 200
SIM_RESAMPLES = 1_000


def _binary_pairs(
    rng: np.random.Generator, p_base: float, p_cand: float, share: float
) -> tuple[np.ndarray, np.ndarray]:
    """Correlated Bernoulli pairs: the candidate reuses the baseline's uniform with probability `share`.

    Marginals are exactly Bernoulli(p_base) and Bernoulli(p_cand), so the true delta is their difference.
    """
    u = rng.random(ITEMS)
    v = np.where(rng.random(ITEMS) < share, u, rng.random(ITEMS))
    return (u < p_base).astype(float), (v < p_cand).astype(float)


def _continuous_pairs(rng: np.random.Generator, true_delta: float) -> tuple[np.ndarray, np.ndarray]:
    """Continuous scores: candidate = 0.7 * baseline + 0.3 * skewed noise + shift; E[c - b] = true_delta."""
    base = rng.random(ITEMS)
    noise = rng.gamma(2.0, 0.25, ITEMS)  # mean 0.5, right-skewed
    cand = 0.7 * base + 0.3 * noise + true_delta  # E[c] = 0.35 + 0.15 + true_delta = E[b] + true_delta
    return base, cand


@pytest.mark.parametrize("kind", ["binary", "continuous"])
@pytest.mark.slow
def test_bootstrap_ci_covers_true_delta_about_95_percent(kind: str) -> None:
    rng = np.random.default_rng(20241101)
    covered = 0
    for sim in range(SIMULATIONS):
        if kind == "binary":
            base, cand = _binary_pairs(rng, 0.60, 0.66, share=0.7)
            true_delta = 0.06
        else:
            base, cand = _continuous_pairs(rng, 0.03)
            true_delta = 0.03
        (est,) = paired_estimates(base, cand, resamples=SIM_RESAMPLES, seed=sim)
        covered += est.ci_low <= true_delta <= est.ci_high
    assert 0.93 <= covered / SIMULATIONS <= 0.97, f"{kind}: coverage {covered / SIMULATIONS:.3f}"


@pytest.mark.parametrize("kind", ["binary", "continuous"])
@pytest.mark.slow
def test_regressed_rarely_fires_under_the_null(kind: str) -> None:
    rng = np.random.default_rng(7)
    counts = dict.fromkeys(Verdict, 0)
    for sim in range(SIMULATIONS):
        if kind == "binary":
            base, cand = _binary_pairs(rng, 0.6, 0.6, share=0.5)
        else:
            base, cand = _continuous_pairs(rng, 0.0)
        (est,) = paired_estimates(base, cand, resamples=SIM_RESAMPLES, seed=sim)
        counts[verdict(est, 0.0)] += 1  # threshold 0: the most trigger-happy setting
    # A 95 % two-sided interval below zero is a one-sided 2.5 % event; allow up to 5 %.
    assert counts[Verdict.REGRESSED] <= 0.05 * SIMULATIONS, counts
    assert counts[Verdict.IMPROVED] <= 0.05 * SIMULATIONS, counts


@pytest.mark.parametrize("kind", ["binary", "continuous"])
def test_bootstrap_ci_agrees_with_scipy(kind: str) -> None:
    from scipy.stats import bootstrap

    rng = np.random.default_rng(3)
    n = 150
    if kind == "binary":  # the multinomial-over-distinct-values path
        base = (rng.random(n) < 0.5).astype(float)
        cand = np.where(rng.random(n) < 0.6, base, (rng.random(n) < 0.6).astype(float))
    else:  # the index-draw path
        base = rng.random(n)
        cand = base + rng.normal(0.02, 0.1, n)
    (est,) = paired_estimates(base, cand, resamples=20_000, seed=11)
    ref = bootstrap(
        (base, cand),
        lambda b, c, axis: np.mean(c - b, axis=axis),
        paired=True,
        vectorized=True,
        method="percentile",
        n_resamples=20_000,
        confidence_level=0.95,
        rng=np.random.default_rng(12),
    )
    # The MC error of each endpoint (20,000 resamples) is ~0.02 bootstrap SEs; of the difference
    # of two independent runs ~0.03. Allow 0.12 SEs (4 sigma).
    tolerance = 0.12 * ref.standard_error
    assert est.ci_low == pytest.approx(ref.confidence_interval.low, abs=tolerance)
    assert est.ci_high == pytest.approx(ref.confidence_interval.high, abs=tolerance)
    assert est.ci_low < est.delta < est.ci_high


def test_analytic_se_t_interval_and_p_value_by_hand() -> None:
    base = [0.2, 0.5, 0.1]
    cand = [0.6, 0.4, 0.9]
    d = [c - b for b, c in zip(base, cand, strict=True)]  # 0.4, -0.1, 0.8
    mean = sum(d) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 2)
    se = sd / math.sqrt(3)
    # Student t with 2 df has closed forms: F(t) = 1/2 + t / (2 sqrt(t^2 + 2)), so the two-sided
    # p-value is 1 - |t| / sqrt(t^2 + 2) and the 0.975 quantile is 0.95 * sqrt(2 / (1 - 0.95^2)).
    t = mean / se
    p = 1 - abs(t) / math.sqrt(t * t + 2)
    t975 = 0.95 * math.sqrt(2 / (1 - 0.95**2))
    assert t975 == pytest.approx(4.3027, abs=5e-5)  # the printed table value

    (est,) = paired_estimates(np.array(base), np.array(cand), resamples=2_000)
    assert est.n == 3
    assert est.delta == pytest.approx(1.1 / 3, rel=1e-12)
    assert est.baseline_mean == pytest.approx(0.8 / 3, rel=1e-12)
    assert est.candidate_mean == pytest.approx(1.9 / 3, rel=1e-12)
    assert est.se == pytest.approx(se, rel=1e-12)
    assert se == pytest.approx(0.2603416558, rel=1e-9)
    assert est.se_ci_low == pytest.approx(mean - t975 * se, rel=1e-9)
    assert est.se_ci_high == pytest.approx(mean + t975 * se, rel=1e-9)
    assert est.p_value == pytest.approx(p, rel=1e-9)
    assert est.p_value == pytest.approx(0.29435, abs=1e-4)


def test_p_value_with_one_degree_of_freedom_is_cauchy() -> None:
    (est,) = paired_estimates(np.array([0.0, 0.0]), np.array([2.0, 0.0]))  # d = [2, 0]: se 1, t 1
    assert est.se == pytest.approx(1.0)
    assert est.p_value == pytest.approx(1 - 2 * math.atan(1.0) / math.pi, rel=1e-12)  # = 0.5
    assert est.se_ci_high - est.delta == pytest.approx(math.tan(math.pi * (0.975 - 0.5)), rel=1e-9)


def _miller_clustered_se_by_loops(d: list[float], clusters: list[int]) -> float:
    """Miller (2024): se_C^2 = se^2 + (1/n^2) sum_c sum_{i != j in c} e_i e_j, in plain Python."""
    n = len(d)
    mean = sum(d) / n
    e = [x - mean for x in d]
    se2 = sum(x * x for x in e) / (n - 1) / n
    cross = sum(e[i] * e[j] for i in range(n) for j in range(n) if i != j and clusters[i] == clusters[j])
    return math.sqrt(se2 + cross / n**2)


def test_clustered_se_matches_millers_formula() -> None:
    rng = np.random.default_rng(5)
    n = 60
    labels = rng.integers(0, 9, n)
    base, cand = rng.random(n), rng.random(n)
    (est,) = paired_estimates(base, cand, clusters=labels, resamples=500)
    expected = _miller_clustered_se_by_loops(list(cand - base), list(labels))
    assert est.clustered_se == pytest.approx(expected, rel=1e-10)
    assert est.n_clusters == len(set(labels.tolist()))
    from scipy.stats import t

    half = t.ppf(0.975, est.n_clusters - 1) * expected
    assert est.clustered_ci_low == pytest.approx(est.delta - half, rel=1e-9)
    assert est.clustered_ci_high == pytest.approx(est.delta + half, rel=1e-9)


@pytest.mark.parametrize("size", [4, 16])
def test_clustered_se_of_perfectly_correlated_blocks_grows_by_sqrt_cluster_size(size: int) -> None:
    rng = np.random.default_rng(size)
    clusters = 50
    per_cluster = rng.normal(0.0, 1.0, clusters)
    d = np.repeat(per_cluster, size)  # every item in a cluster has the same difference
    labels = np.repeat([f"passage-{c}" for c in range(clusters)], size)  # string labels work too
    (est,) = paired_estimates(np.zeros(d.size), d, clusters=labels, resamples=500)
    n = d.size
    # By hand: with e the same within a block, se_C^2 / se^2 = (m (n - 1) + 1) / n = m - (m - 1) / n.
    assert est.clustered_se / est.se == pytest.approx(math.sqrt(size - (size - 1) / n), rel=1e-10)
    assert est.clustered_se / est.se == pytest.approx(math.sqrt(size), rel=0.01)
    assert est.n_clusters == clusters


def test_singleton_clusters_give_the_unclustered_se_exactly() -> None:
    rng = np.random.default_rng(9)
    base, cand = rng.random(40), rng.random(40)
    (est,) = paired_estimates(base, cand, clusters=np.arange(40), resamples=500)
    # The only small-sample factor is ddof=1 inside se; none on the cross terms (there are none here).
    assert est.clustered_se == pytest.approx(est.se, rel=1e-12)
    assert est.n_clusters == 40
    assert est.clustered_ci_low == pytest.approx(est.se_ci_low, rel=1e-12)
    assert est.clustered_ci_high == pytest.approx(est.se_ci_high, rel=1e-12)


def test_one_cluster_and_no_clusters() -> None:
    base, cand = np.array([0.1, 0.5, 0.3]), np.array([0.2, 0.4, 0.9])
    (est,) = paired_estimates(base, cand, clusters=["a", "a", "a"], resamples=100)
    assert est.n_clusters == 1 and math.isnan(est.clustered_se) and math.isnan(est.clustered_ci_low)
    (est,) = paired_estimates(base, cand, resamples=100)
    assert est.clustered_se is None and est.clustered_ci_low is None and est.n_clusters is None


def test_nan_rows_are_dropped_per_scorer_and_n_differs() -> None:
    rng = np.random.default_rng(2)
    n = 300
    base = rng.random((n, 4))
    cand = rng.random((n, 4))
    base[:10, 0] = np.nan  # scorer 0: 10 rows unscored on the baseline side
    cand[5:25, 0] = np.nan  # ... and 20 on the candidate side, 5 of them overlapping
    cand[::3, 1] = np.nan  # scorer 1: every third row
    base[:, 3] = np.nan  # scorer 3: never scored on the baseline side
    labels = np.arange(n) % 30
    est = paired_estimates(base, cand, clusters=labels, resamples=1_000)
    assert [e.n for e in est] == [275, 200, 300, 0]
    for j in range(3):
        rows = np.isfinite(base[:, j]) & np.isfinite(cand[:, j])
        assert est[j].delta == pytest.approx(np.mean(cand[rows, j] - base[rows, j]), rel=1e-12)
        assert est[j].baseline_mean == pytest.approx(np.mean(base[rows, j]), rel=1e-12)
        assert est[j].se == pytest.approx(
            np.std(cand[rows, j] - base[rows, j], ddof=1) / math.sqrt(rows.sum())
        )
        assert est[j].ci_low < est[j].delta < est[j].ci_high
        assert not math.isnan(est[j].clustered_se)
    assert est[3].n == 0 and est[3].n_clusters == 0
    for field in ("baseline_mean", "delta", "ci_low", "ci_high", "se", "p_value", "clustered_se"):
        assert math.isnan(getattr(est[3], field)), field
    assert verdict(est[3], 0.1) is Verdict.INCONCLUSIVE


def test_one_pair_gives_no_interval() -> None:
    (est,) = paired_estimates(np.array([0.0, np.nan]), np.array([1.0, 1.0]))
    assert est.n == 1 and est.delta == 1.0
    assert math.isnan(est.ci_low) and math.isnan(est.se) and math.isnan(est.p_value)
    assert verdict(est, 0.0) is Verdict.INCONCLUSIVE


@pytest.mark.parametrize(
    ("base", "cand", "delta", "p_value", "expected"),
    [
        ([1.0] * 20, [1.0] * 20, 0.0, 1.0, Verdict.UNCHANGED),  # identical runs
        ([0.3] * 8, [0.3] * 8, 0.0, 1.0, Verdict.UNCHANGED),
        ([1.0] * 20, [0.0] * 20, -1.0, 0.0, Verdict.REGRESSED),  # every item lost
        ([0.2, 0.4, 0.6, 0.8], [0.3, 0.5, 0.7, 0.9], 0.1, 0.0, Verdict.IMPROVED),  # a constant +0.1
    ],
)
def test_zero_variance(
    base: list[float], cand: list[float], delta: float, p_value: float, expected: Verdict
) -> None:
    (est,) = paired_estimates(np.array(base), np.array(cand), clusters=np.arange(len(base)) // 2)
    assert est.delta == pytest.approx(delta, abs=1e-12)
    assert est.se == 0.0
    assert est.ci_low == est.ci_high == est.delta == est.se_ci_low == est.se_ci_high
    assert est.p_value == p_value
    assert est.clustered_se == 0.0 and est.clustered_ci_low == est.delta
    threshold = 0.0 if expected is Verdict.UNCHANGED else 0.05
    assert verdict(est, threshold) is expected


def test_a_small_binary_eval_gets_newcombe_and_mcnemar() -> None:
    """Twenty pass/fail pairs, 3 won and 1 lost: Newcombe's interval and the exact McNemar p."""
    base = np.array([0.0] * 3 + [1.0] + [1.0] * 16)
    cand = np.array([1.0] * 3 + [0.0] + [1.0] * 16)
    (est,) = paired_estimates(base, cand)
    assert est.ci_method == IntervalMethod.NEWCOMBE and est.delta == pytest.approx(0.1)
    assert est.ci_low < 0 < est.ci_high and est.p_value == pytest.approx(0.625)  # 2 * P(Bin(4, .5) <= 1)
    assert verdict(est, 0.0) is Verdict.INCONCLUSIVE


def _estimate(delta: float, low: float, high: float) -> PairedEstimate:
    nan = math.nan
    return PairedEstimate(
        100, 0.5, 0.5 + delta, delta, low, high, nan, nan, nan, nan, None, None, None, None, 10_000, 0.95, 0
    )


@pytest.mark.parametrize(
    ("delta", "low", "high", "threshold", "expected"),
    [
        (-0.05, -0.08, -0.02, 0.01, Verdict.REGRESSED),
        (-0.05, -0.08, -0.02, 0.0499, Verdict.REGRESSED),
        (-0.05, -0.08, -0.02, 0.05, Verdict.INCONCLUSIVE),  # |delta| must exceed the threshold
        (-0.05, -0.08, -0.02, 0.0, Verdict.REGRESSED),
        (-0.03, -0.05, 0.0, 0.01, Verdict.INCONCLUSIVE),  # a CI touching zero is not below it
        (0.05, 0.02, 0.08, 0.01, Verdict.IMPROVED),
        (0.05, 0.02, 0.08, 0.05, Verdict.INCONCLUSIVE),
        (0.03, 0.0, 0.05, 0.01, Verdict.INCONCLUSIVE),
        (0.001, -0.01, 0.012, 0.02, Verdict.UNCHANGED),
        (0.001, -0.01, 0.012, 0.012, Verdict.UNCHANGED),  # the band is closed: ci_high == threshold
        (0.001, -0.012, 0.01, 0.012, Verdict.UNCHANGED),  # ci_low == -threshold
        (0.001, -0.01, 0.012, 0.0119, Verdict.INCONCLUSIVE),
        (0.004, 0.001, 0.007, 0.01, Verdict.UNCHANGED),  # significant but smaller than the threshold
        (0.004, 0.001, 0.012, 0.01, Verdict.INCONCLUSIVE),  # significant, small, CI leaves the band
        (-0.004, -0.007, -0.001, 0.01, Verdict.UNCHANGED),
        (0.0, 0.0, 0.0, 0.0, Verdict.UNCHANGED),  # threshold 0: only the CI [0, 0] is unchanged
        (0.0, -0.0, 0.0, 0.0, Verdict.UNCHANGED),
        (0.0, 0.0, 1e-9, 0.0, Verdict.INCONCLUSIVE),
        (0.0, -1e-9, 1e-9, 0.0, Verdict.INCONCLUSIVE),
        (0.2, -0.1, 0.5, 0.05, Verdict.INCONCLUSIVE),  # wide CI straddling zero
        (math.nan, math.nan, math.nan, 0.05, Verdict.INCONCLUSIVE),
        (0.1, math.nan, math.nan, 0.05, Verdict.INCONCLUSIVE),
    ],
)
def test_verdict_table(delta: float, low: float, high: float, threshold: float, expected: Verdict) -> None:
    assert verdict(_estimate(delta, low, high), threshold) is expected


def test_verdict_checks_change_before_unchanged() -> None:
    # A point estimate outside its own CI (possible with a skewed bootstrap) where both the
    # `regressed` and the `unchanged` rule hold: the documented order says regressed.
    assert verdict(_estimate(-0.03, -0.02, -0.01), 0.02) is Verdict.REGRESSED


@pytest.mark.parametrize("threshold", [-0.01, math.nan, math.inf])
def test_verdict_rejects_bad_thresholds(threshold: float) -> None:
    with pytest.raises(ValueError, match="threshold"):
        verdict(_estimate(0.0, -0.01, 0.01), threshold)


def test_items_needed_known_cases() -> None:
    z975, z80 = 1.959963984540054, 0.8416212335729143  # printed normal table values
    by_hand = math.ceil(((z975 + z80) * 0.5 / 0.1) ** 2)  # (2.80158 * 5)^2 = 196.22 -> 197
    assert by_hand == 197
    assert items_needed_for_sd(0.5, 0.1) == 197
    # [0, 0.5, 1]: mean 0.5, squared deviations 0.25 + 0 + 0.25 over n - 1 = 2 -> sd exactly 0.5
    assert items_needed(np.array([0.0, 0.5, 1.0]), 0.1) == 197
    assert items_needed([0.0, 0.5, np.nan, 1.0], 0.1) == 197  # NaN dropped
    z995, z90 = 2.5758293035489004, 1.2815515655446004
    assert items_needed_for_sd(1.0, 0.2, power=0.9, alpha=0.01) == math.ceil(((z995 + z90) * 5) ** 2) == 372
    assert items_needed_for_sd(0.0, 0.1) == 2  # no spread: the floor of two pairs
    assert items_needed_for_sd(0.5, 0.05) > items_needed_for_sd(0.5, 0.1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sd": 0.5, "mde": 0.0}, "mde"),
        ({"sd": 0.5, "mde": -0.1}, "mde"),
        ({"sd": -1.0, "mde": 0.1}, "sd"),
        ({"sd": 0.5, "mde": 0.1, "power": 1.0}, "power"),
        ({"sd": 0.5, "mde": 0.1, "alpha": 0.0}, "alpha"),
    ],
)
def test_items_needed_rejects_bad_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        items_needed_for_sd(**kwargs)


def test_items_needed_needs_two_differences() -> None:
    with pytest.raises(ValueError, match="two"):
        items_needed([0.3, np.nan], 0.1)


def test_sd_for_power_from_single_run_is_conservative() -> None:
    # var([0, 1, 0, 1], ddof=1) = 1/3, so the guess is sqrt(2/3).
    assert sd_for_power_from_single_run([0.0, 1.0, 0.0, 1.0, np.nan]) == pytest.approx(math.sqrt(2 / 3))
    # Two correlated runs of equal quality: the real SD of their differences is smaller.
    rng = np.random.default_rng(4)
    difficulty = rng.random(5_000)
    run_a = (difficulty + rng.normal(0, 0.2, 5_000) > 0.5).astype(float)
    run_b = (difficulty + rng.normal(0, 0.2, 5_000) > 0.5).astype(float)
    guessed = sd_for_power_from_single_run(run_a)
    actual = float(np.std(run_b - run_a, ddof=1))
    assert actual < guessed
    assert items_needed(run_b - run_a, 0.02) < items_needed_for_sd(guessed, 0.02)
    with pytest.raises(ValueError, match="two"):
        sd_for_power_from_single_run([1.0])


@pytest.mark.slow
def test_same_seed_same_result_and_thread_count_does_not_matter(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(8)
    n = 3_000
    base = np.column_stack([rng.random(n), (rng.random(n) < 0.5).astype(float), rng.random(n)])
    cand = base + rng.normal(0.0, 0.1, base.shape)
    cand[:, 1] = (rng.random(n) < 0.55).astype(float)
    kwargs: dict[str, Any] = {"resamples": 3_000, "seed": 42}
    monkeypatch.setattr(resampling, "_WORKERS", 1)
    first = paired_estimates(base, cand, **kwargs)
    assert paired_estimates(base, cand, **kwargs) == first
    monkeypatch.setattr(resampling, "_WORKERS", 2)
    assert paired_estimates(base, cand, **kwargs) == first  # chunks carry their own generators
    other = paired_estimates(base, cand, resamples=3_000, seed=43)
    assert [e.ci_low for e in other] != [e.ci_low for e in first]
    assert [e.delta for e in other] == [e.delta for e in first]
    assert all(e.seed == 42 and e.resamples == 3_000 and e.confidence == 0.95 for e in first)


@pytest.mark.parametrize("watched", [[0, 600], [0, 600, 800, 900, 970, 995, 999]])
@pytest.mark.slow
def test_index_draws_pick_every_item_with_probability_one_over_n(watched: list[int]) -> None:
    # n = 1000 = 512 + 256 + 128 + 64 + 32 + 8: one watched item in each block. A one-hot column's
    # resampled sum is how often its item was drawn: Binomial(n, 1/n), mean 1, variance 1 - 1/n.
    # Two columns are summed by gather + reduceat, seven by bincount + matmul.
    n, resamples = 1_000, 20_000
    columns = []
    for item in watched:
        column = np.zeros(n)
        column[item] = 1.0
        columns.append(column)
    means = resampling.index_bootstrap_means(columns, resamples, np.random.SeedSequence(1))
    for item, mean in zip(watched, means, strict=True):
        draws = mean * n
        assert np.allclose(draws, np.round(draws), atol=1e-9)
        assert draws.mean() == pytest.approx(1.0, abs=4 * math.sqrt(1 / resamples)), item
        assert draws.var() == pytest.approx(1 - 1 / n, rel=0.06), item


@pytest.mark.slow
def test_summing_by_matmul_or_by_gather_sees_the_same_resamples() -> None:
    rng = np.random.default_rng(13)
    n = 4_000
    base = rng.random((n, 4))
    cand = base + rng.normal(0.01, 0.2, (n, 4))
    together = paired_estimates(base, cand, resamples=2_000, seed=5)  # 4 columns: bincount + matmul
    (alone,) = paired_estimates(base[:, 0], cand[:, 0], resamples=2_000, seed=5)  # gather + reduceat
    assert together[0].ci_low == pytest.approx(alone.ci_low, rel=1e-12)
    assert together[0].ci_high == pytest.approx(alone.ci_high, rel=1e-12)


@pytest.mark.slow
def test_both_bootstrap_paths_give_the_same_distribution() -> None:
    rng = np.random.default_rng(6)
    d = rng.choice([-1.0, 0.0, 1.0], size=5_000, p=[0.2, 0.5, 0.3])
    values, counts = np.unique(d, return_counts=True)
    multinomial = resampling.multinomial_means(values, counts, 20_000, np.random.SeedSequence(2))
    (index,) = resampling.index_bootstrap_means([d], 20_000, np.random.SeedSequence(3))
    expected_sd = np.std(d) / math.sqrt(d.size)  # the bootstrap distribution's exact SD
    for draws in (multinomial, index):
        assert draws.mean() == pytest.approx(d.mean(), abs=4 * expected_sd / math.sqrt(20_000))
        assert draws.std() == pytest.approx(expected_sd, rel=0.04)
    for q in (0.025, 0.5, 0.975):
        assert np.quantile(multinomial, q) == pytest.approx(np.quantile(index, q), abs=0.1 * expected_sd)


@pytest.mark.parametrize("n", [1, 2, 3, 1_000, 65_535, 65_536, 65_537, 200_001])
def test_blocks_are_powers_of_two_summing_to_n(n: int) -> None:
    sizes = resampling.blocks(n)
    assert sizes.sum() == n
    assert all(s & (s - 1) == 0 and 1 <= s <= 65_536 for s in sizes.tolist())


@pytest.mark.slow
def test_large_n_spans_several_full_blocks() -> None:
    rng = np.random.default_rng(10)
    n = 2 * 65_536 + 3
    base = rng.random(n)
    cand = base + rng.normal(0.001, 0.05, n)
    (est,) = paired_estimates(base, cand, resamples=400)
    width = est.ci_high - est.ci_low
    assert width == pytest.approx(est.se_ci_high - est.se_ci_low, rel=0.15)
    assert abs((est.ci_high + est.ci_low) / 2 - est.delta) < 0.1 * width


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"baseline": np.zeros(3), "candidate": np.zeros(4)}, "shape"),
        ({"baseline": np.zeros((3, 2, 1)), "candidate": np.zeros((3, 2, 1))}, "shape"),
        ({"resamples": 0}, "resamples"),
        ({"confidence": 1.0}, "confidence"),
        ({"seed": -1}, "seed"),
        ({"clusters": np.zeros(2)}, "clusters"),
    ],
)
def test_paired_estimates_rejects_bad_arguments(kwargs: dict[str, Any], match: str) -> None:
    call: dict[str, Any] = {"baseline": np.zeros(3), "candidate": np.ones(3)} | kwargs
    with pytest.raises(ValueError, match=match):
        paired_estimates(call.pop("baseline"), call.pop("candidate"), **call)


def test_confidence_changes_the_width() -> None:
    rng = np.random.default_rng(12)
    base, cand = rng.random(500), rng.random(500)
    (e90,) = paired_estimates(base, cand, confidence=0.90, resamples=4_000)
    (e99,) = paired_estimates(base, cand, confidence=0.99, resamples=4_000)
    assert e99.ci_high - e99.ci_low > e90.ci_high - e90.ci_low
    assert e99.se_ci_high - e99.se_ci_low > e90.se_ci_high - e90.se_ci_low
    assert e90.confidence == 0.90
