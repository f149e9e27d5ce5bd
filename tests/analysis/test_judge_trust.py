"""The judge-trust estimators against hand-computed small cases and the papers' formulas:
PPI and PPI++ (Angelopoulos et al. 2023; Angelopoulos, Duchi & Zrnic 2023), the inverse-
probability-weighted form (Zrnic & Candès 2024), Cohen's and weighted kappa, Spearman, MAE, bias."""

from __future__ import annotations

import math

import numpy as np
import pytest

from assay.analysis.agreement import agreement, cohen_kappa, scale_of, weighted_kappa
from assay.analysis.ppi import ipw_ppi_mean, labels_only_mean, power_tuning, ppi_mean

Z95 = 1.959963984540054


def test_ppi_with_lam_one_is_the_papers_estimate_and_interval():
    y = np.array([1.0, 0.0, 1.0, 1.0])
    f_lab = np.array([1.0, 1.0, 1.0, 0.0])
    f_un = np.array([1.0, 0.0, 1.0, 1.0, 1.0, 0.0])
    got = ppi_mean(y, f_lab, f_un, lam=1.0)
    # theta = mean(f_un) + mean(y - f_lab) = 4/6 + 0/4
    assert got.estimate == pytest.approx(2 / 3)
    # var(f_un)/N + var(rectifier)/n, population variances: (2/9)/6 + (1/2)/4
    rectifier = y - f_lab  # [0, -1, 0, 1]: mean 0, variance 0.5
    se = math.sqrt((2 / 9) / 6 + 0.5 / 4)
    assert got.se == pytest.approx(se)
    assert (got.ci_low, got.ci_high) == pytest.approx((2 / 3 - Z95 * se, 2 / 3 + Z95 * se))
    assert got.method == "ppi" and rectifier.mean() == 0


def test_ppi_plus_plus_tunes_lam_by_the_closed_form_and_clips_it():
    y = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    f_lab = np.array([0.9, 0.2, 0.8, 0.6, 0.1])
    f_un = np.array([0.7, 0.3, 0.9, 0.5])
    every = np.concatenate([f_lab, f_un])
    cov = np.mean((y - y.mean()) * (f_lab - f_lab.mean()))
    lam = cov / ((1 + 5 / 4) * np.var(every, ddof=1))
    assert power_tuning(y, f_lab, f_un) == pytest.approx(min(max(lam, 0), 1))
    got = ppi_mean(y, f_lab, f_un)
    assert got.lam == pytest.approx(min(max(lam, 0), 1))
    assert got.estimate == pytest.approx(got.lam * f_un.mean() + (y - got.lam * f_lab).mean())
    # a judge that knows nothing: lam 0, the labels' own mean
    anti = ppi_mean(y, 1 - y, np.array([0.5, 0.5]))
    assert anti.lam == 0.0 and anti.estimate == pytest.approx(y.mean())
    assert labels_only_mean(y).estimate == pytest.approx(0.6)


def test_the_weighted_form_is_horvitz_thompson_over_every_item():
    f = np.array([1.0, 0.0, 1.0, 1.0])
    y = np.array([1.0, np.nan, 0.0, np.nan])
    pi = np.array([0.5, 1.0, 0.25, 1.0])
    got = ipw_ppi_mean(f, y, pi, lam=1.0)
    terms = np.array([1 + (1 - 1) / 0.5, 0.0, 1 + (0 - 1) / 0.25, 1.0])  # [1, 0, -3, 1]
    assert got.estimate == pytest.approx(terms.mean())
    assert got.se == pytest.approx(np.std(terms, ddof=1) / 2)
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        ipw_ppi_mean(f, y, np.array([0.5, 0.0, 0.25, 1.0]))


def test_the_corrected_interval_covers_a_biased_judges_truth():
    rng = np.random.default_rng(3)
    covered = 0
    for _ in range(300):
        y = (rng.random(1000) < 0.7).astype(float)
        f = np.where(y == 1, rng.random(1000) > 0.05, rng.random(1000) < 0.38).astype(float)
        got = ppi_mean(y[:100], f[:100], f[100:])
        covered += got.ci_low <= 0.7 <= got.ci_high
    assert 0.91 <= covered / 300 <= 0.99


def test_cohens_kappa_and_the_confusion_matrix_by_hand():
    judge = np.array([1, 1, 1, 0, 0, 1, 0, 1], dtype=float)
    human = np.array([1, 0, 1, 0, 1, 1, 0, 1], dtype=float)
    # po = 6/8; pe = 5/8 * 5/8 + 3/8 * 3/8 = 34/64
    po, pe = 0.75, 34 / 64
    kappa = cohen_kappa(judge, human)
    assert kappa["value"] == pytest.approx((po - pe) / (1 - pe))
    half = Z95 * math.sqrt(po * (1 - po) / (8 * (1 - pe) ** 2))
    assert kappa["ci_high"] - kappa["value"] == pytest.approx(half)
    report = agreement(judge, human)
    assert report["scale"] == "binary"
    assert report["confusion"] == {"tp": 4, "fp": 1, "fn": 1, "tn": 2}
    assert report["accuracy"]["value"] == 0.75 and report["bias"]["value"] == 0.0


def test_weighted_kappa_by_hand_and_the_scales():
    judge = np.array([0.0, 0.5, 1.0, 1.0])
    human = np.array([0.0, 1.0, 1.0, 0.5])
    # levels 0, .5, 1 at positions 0, 1, 2; observed disagreements (1,2) and (2,1), weight 1 each
    observed = 2 / 4
    margins_j, margins_h = np.array([1, 1, 2]) / 4, np.array([1, 1, 2]) / 4
    w = (np.subtract.outer(np.arange(3), np.arange(3))) ** 2
    expected = float((w * np.outer(margins_j, margins_h)).sum())
    assert weighted_kappa(judge, human) == pytest.approx(1 - observed / expected)
    assert scale_of(judge, human) == "ordinal"
    assert scale_of(np.linspace(0, 1, 20), np.linspace(0, 1, 20) ** 2) == "continuous"


def test_continuous_figures():
    judge = np.array([0.1, 0.4, 0.35, 0.8, 0.9])
    human = np.array([0.2, 0.3, 0.5, 0.7, 1.0])
    report = agreement(judge, human, scale="continuous")
    assert report["spearman"]["value"] == pytest.approx(0.9)
    assert report["mae"]["value"] == pytest.approx(np.mean(np.abs(judge - human)))
    assert report["bias"]["value"] == pytest.approx(judge.mean() - human.mean())
    assert report["spearman"]["ci_low"] < 0.9 < report["spearman"]["ci_high"]
