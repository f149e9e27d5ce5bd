"""Scores you can trust when a model grades them (issue 27): the judge-corrected estimates' coverage,
width and verdicts, simulated.

Each replication draws ``--items`` items whose human truth is pass/fail with mean 0.70, a judge
that agrees with it 85 % of the time and is 8 points lenient (false passes 38.3 % of the fails,
false fails 5 % of the passes), and labels on ``--labels`` random items. It prints, over
``--replications`` replications, how often each 95 % interval covers the human mean: the raw
judge's (as if the judge were the truth), the labels alone, PPI++ (`assay.analysis.ppi.ppi_mean`)
and the inverse-probability-weighted PPI++ over a Poisson sample that favours the judge's fails
(`ipw_ppi_mean`); and the corrected interval's width against the labels-only one.

Paired: two runs on the same items, the candidate's true human mean 5 points lower (0.65; the
runs disagree on 9 % of items), the judge 8 points lenient on the baseline and 14 on the
candidate (so its own delta is +1 point), both runs labelled on the same random items. It prints
the corrected delta's coverage and the verdicts (`verdict_of`, threshold ``--threshold``) of the
corrected and the raw judge's interval.

Then the same coverage for continuous scores (human Beta(7, 3), judge + 8 points + noise) and an
ordinal 1-5 rubric (levels 0, .25, .5, .75, 1; the judge a level higher on 35 % of items, a
level off either way on 15 %).

    .venv/bin/python benchmarks/judge_trust.py [--items 2000] [--labels 200] [--replications 2000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assay.analysis.ppi import ipw_ppi_mean, judge_only_mean, labels_only_mean, ppi_mean
from assay.analysis.stats import verdict_of
from assay.outcomes import Verdict

TRUE_MEAN, TRUE_DELTA = 0.70, -0.05


def _judge(truth: np.ndarray, u: np.ndarray, false_pass: float, false_fail: float) -> np.ndarray:
    """A pass/fail judge of pass/fail truth; one uniform `u` per item, so that two runs' judges
    of the same truth agree as one judge of one output would."""
    return np.where(truth == 1.0, u >= false_fail, u < false_pass).astype(np.float64)


def _covers(estimate, truth: float) -> bool:
    return estimate.ci_low <= truth <= estimate.ci_high


def single(rng: np.random.Generator, items: int, labels: int) -> dict[str, float]:
    y = (rng.random(items) < TRUE_MEAN).astype(np.float64)
    f = _judge(y, rng.random(items), 0.3833, 0.05)
    order = rng.permutation(items)
    lab, rest = order[:labels], order[labels:]
    corrected = ppi_mean(y[lab], f[lab], f[rest])
    alone = labels_only_mean(y[lab])
    raw = judge_only_mean(f)
    # A Poisson sample of the same expected size, three times as likely on the judge's fails.
    weight = np.where(f == 0.0, 3.0, 1.0)
    pi = np.minimum(1.0, labels * weight / weight.sum())
    picked = rng.random(items) < pi
    weighted = ipw_ppi_mean(f, np.where(picked, y, np.nan), np.where(picked, pi, 1.0))
    return {
        "raw": _covers(raw, TRUE_MEAN),
        "labels": _covers(alone, TRUE_MEAN),
        "ppi": _covers(corrected, TRUE_MEAN),
        "ipw": _covers(weighted, TRUE_MEAN),
        "width_ratio": (corrected.ci_high - corrected.ci_low) / (alone.ci_high - alone.ci_low),
        "lam": corrected.lam,
        "rho": float(np.corrcoef(y, f)[0, 1]),
    }


def paired(rng: np.random.Generator, items: int, labels: int, threshold: float) -> dict[str, object]:
    a = (rng.random(items) < TRUE_MEAN).astype(np.float64)
    flip = rng.random(items)
    b = np.where(a == 1.0, flip >= 0.10, flip < 0.0667).astype(np.float64)  # mean 0.65
    u = rng.random(items)
    fa = _judge(a, u, 0.3833, 0.05)  # +8 points
    fb = _judge(b, u, 0.4929, 0.05)  # +14 points
    order = rng.permutation(items)
    lab, rest = order[:labels], order[labels:]
    d, fd = b - a, fb - fa
    corrected = ppi_mean(d[lab], fd[lab], fd[rest])
    raw = judge_only_mean(fd)
    return {
        "covers": _covers(corrected, TRUE_DELTA),
        "verdict": verdict_of(corrected.ci_low, corrected.ci_high, corrected.estimate, threshold),
        "raw_verdict": verdict_of(raw.ci_low, raw.ci_high, raw.estimate, threshold),
    }


def continuous(rng: np.random.Generator, items: int, labels: int) -> bool:
    y = rng.beta(7, 3, items)
    f = np.clip(y + 0.08 + rng.normal(0, 0.15, items), 0, 1)
    order = rng.permutation(items)
    return _covers(ppi_mean(y[order[:labels]], f[order[:labels]], f[order[labels:]]), 0.7)


ORDINAL_P = np.array([0.05, 0.10, 0.15, 0.30, 0.40])  # levels 1..5: mean (on 0..1) 0.7125


def ordinal(rng: np.random.Generator, items: int, labels: int) -> bool:
    level = rng.choice(5, size=items, p=ORDINAL_P)
    draw = rng.random(items)
    shift = np.where(draw < 0.35, 1, np.where(draw < 0.425, -1, np.where(draw < 0.5, 1, 0)))
    judged = np.clip(level + shift, 0, 4)
    y, f = level / 4.0, judged / 4.0
    order = rng.permutation(items)
    truth = float(ORDINAL_P @ (np.arange(5) / 4.0))
    return _covers(ppi_mean(y[order[:labels]], f[order[:labels]], f[order[labels:]]), truth)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--labels", type=int, default=200)
    parser.add_argument("--replications", type=int, default=2000)
    parser.add_argument(
        "--threshold", type=float, default=0.02, help="the verdicts' threshold (default 0.02)"
    )
    parser.add_argument("--seed", type=int, default=27)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    r = args.replications
    singles = [single(rng, args.items, args.labels) for _ in range(r)]
    pairs = [paired(rng, args.items, args.labels, args.threshold) for _ in range(r)]
    cont = [continuous(rng, args.items, args.labels) for _ in range(r)]
    ords = [ordinal(rng, args.items, args.labels) for _ in range(r)]

    def share(rows, key) -> str:
        return f"{100 * np.mean([row[key] for row in rows]):.1f} %"

    print(f"{args.items} items, {args.labels} labels, {r} replications, seed {args.seed}")
    print("binary, human mean 0.70, judge 85 % agreement and +8 points; 95 % intervals covering 0.70:")
    print(f"  raw judge interval            {share(singles, 'raw')}")
    print(f"  labels alone                  {share(singles, 'labels')}")
    print(f"  corrected (PPI++)             {share(singles, 'ppi')}")
    print(f"  corrected, weighted sample    {share(singles, 'ipw')}  (IPW PPI++, Poisson, 3x on judge fails)")
    ratio = float(np.mean([row["width_ratio"] for row in singles]))
    lam = float(np.mean([row["lam"] for row in singles]))
    print(
        f"  corrected width / labels-only width: {ratio:.3f} ({100 * (1 - ratio):.1f} % narrower; mean lam {lam:.2f})"
    )
    rho = float(np.mean([row["rho"] for row in singles]))
    best = np.sqrt(1 - rho**2 * (args.items - args.labels) / args.items)
    print(
        f"  (the bound for any judge of correlation {rho:.3f} with the truth: {best:.3f}, sqrt(1 - rho^2 (N - n) / N))"
    )
    print(f"paired, true delta {TRUE_DELTA:+.2f}, judge +8 vs +14 points, threshold {args.threshold}:")
    print(f"  corrected delta interval covers the true delta  {share(pairs, 'covers')}")
    right = np.mean([row["verdict"] == Verdict.REGRESSED for row in pairs])
    wrong = np.mean([row["raw_verdict"] != Verdict.REGRESSED for row in pairs])
    print(f"  corrected verdict `regressed` (right)          {100 * right:.1f} %")
    print(f"  raw judge verdict not `regressed` (wrong)      {100 * wrong:.1f} %")
    raw_counts = {v.value: sum(row["raw_verdict"] == v for row in pairs) for v in Verdict}
    print(f"  raw judge verdicts: {raw_counts}")
    print(
        f"continuous (Beta(7,3), judge +8 points, noise 0.15): corrected covers {100 * np.mean(cont):.1f} %"
    )
    print(f"ordinal 1-5 (judge a level high on 35 %):        corrected covers {100 * np.mean(ords):.1f} %")
    print(f"({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
