"""What a sequential compare saves (issue 17, point 3): where a 2,000-item candidate run stops.

Simulates ``--replications`` candidate runs of ``--items`` items against a baseline, visiting the
items in order and stopping at the first item where the betting confidence sequence decides
(`assay.analysis.sequential.stopping`, threshold 2 points, alpha 0.05). Scenarios: a true 5-point
regression and a true delta of 0, for pass/fail scorers (70 % baseline pass rate; the runs
disagree on 15 % or 6 % of items) and skewed continuous scores. For each it prints the items used
(median, 90th percentile), the verdicts, and the fixed-n design at the same alpha: the chance
that the paired t interval over all the items gives the same verdict (its power), and over as
many items as the sequential run's median.

    .venv/bin/python benchmarks/sequential.py [--items 2000] [--replications 2000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assay.analysis.sequential import stopping
from assay.outcomes import Verdict
from assay.testing.simulate import binary_pairs, continuous_pairs

THRESHOLD = 0.02
ALPHA = 0.05
REGRESSED, UNCHANGED = Verdict.REGRESSED.value, Verdict.UNCHANGED.value
# (name, the right verdict, the simulated pairs)
SCENARIOS = (
    ("binary, 15 % discordant, true -5 pts", REGRESSED, lambda rng, shape: binary_pairs(rng, shape, -0.05)),
    (
        "binary, 6 % discordant, true -5 pts",
        REGRESSED,
        lambda rng, shape: binary_pairs(rng, shape, -0.05, discordance=0.06),
    ),
    ("continuous, true -5 pts", REGRESSED, lambda rng, shape: continuous_pairs(rng, shape, -0.05)),
    ("binary, 15 % discordant, true 0", UNCHANGED, lambda rng, shape: binary_pairs(rng, shape, 0.0)),
    (
        "binary, 6 % discordant, true 0",
        UNCHANGED,
        lambda rng, shape: binary_pairs(rng, shape, 0.0, discordance=0.06),
    ),
    ("continuous, true 0", UNCHANGED, lambda rng, shape: continuous_pairs(rng, shape, 0.0)),
)


def fixed_n_verdicts(d: np.ndarray, n: int) -> np.ndarray:
    """The verdict rule on the paired t interval over the first n items of each run (rows)."""
    from scipy import stats as scipy_stats

    head = d[:, :n]
    mean, sd = head.mean(axis=1), head.std(axis=1, ddof=1)
    half = scipy_stats.t.ppf(1 - ALPHA / 2, n - 1) * sd / np.sqrt(n)
    low, high = mean - half, mean + half
    return np.select(
        [
            (high < 0) & (mean < -THRESHOLD),
            (low > 0) & (mean > THRESHOLD),
            (low >= -THRESHOLD) & (high <= THRESHOLD),
        ],
        [Verdict.REGRESSED.value, Verdict.IMPROVED.value, Verdict.UNCHANGED.value],
        Verdict.INCONCLUSIVE.value,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--replications", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=17)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{args.replications} simulated runs of {args.items} items; threshold {THRESHOLD}, alpha {ALPHA}")
    for name, right, draw in SCENARIOS:
        started = time.perf_counter()
        base, cand = draw(rng, (args.replications, args.items))
        d = cand - base
        items, verdicts = stopping(d, threshold=THRESHOLD, alpha=ALPHA)
        used = np.minimum(items, args.items)
        median = int(np.median(used))
        shares = {v.value: float(np.mean(verdicts == v.value)) for v in Verdict}
        decided = used[verdicts == right]
        where = f"{int(np.median(decided))} ({np.median(decided) / args.items:.0%})" if decided.size else "–"
        full = np.mean(fixed_n_verdicts(d, args.items) == right)
        at_median = np.mean(fixed_n_verdicts(d, max(median, 2)) == right)
        print(
            f"\n{name}:\n"
            f"  sequential: median items {median} ({median / args.items:.0%}), "
            f"90th percentile {int(np.quantile(used, 0.9))}; decided {1 - shares['inconclusive']:.1%} "
            f"(" + ", ".join(f"{v} {s:.1%}" for v, s in shares.items() if s) + "); "
            f"median items of the runs that said {right}: {where}\n"
            f"  fixed n at the same alpha: P({right}) {full:.1%} with all {args.items} items, "
            f"{at_median:.1%} with {median} items   [{time.perf_counter() - started:.1f} s]"
        )


if __name__ == "__main__":
    main()
