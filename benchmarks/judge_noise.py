"""The judge's own noise (issue 27, point 4): what widening compare's interval by it costs, simulated.

Each replication draws ``--items`` items, each with the judge's expected pass rate on the
baseline's output `p_b ~ Beta(2, 1)` and on the candidate's `p_c = clip(p_b + delta_i)`, `delta_i`
normal around ``--delta`` (sd 0.15); the judge is asked ``--k`` times per item and side, each ask
a pass with that probability (`judge_samples: K`). Over ``--replications`` it prints, for the
plain paired bootstrap interval and for the one widened by the judge-noise component
(`widened` below: what compare would do if it added the judge's noise again), how often each covers

- the delta *on these items* (the mean of `p_c - p_b`: what a re-ask of the judge could move), and
- the population delta (the mean `delta_i` the items were drawn around, before clipping, so only
  the first is exact),

their mean width, and how often each says `regressed` at threshold 0.02.

    .venv/bin/python benchmarks/judge_noise.py [--items 200] [--k 3] [--replications 1000]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path
from statistics import NormalDist

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assay.analysis.stats import PairedEstimate, paired_estimates, verdict
from assay.outcomes import Verdict


def widened(estimate: PairedEstimate, noise_se: float) -> PairedEstimate:
    """The estimate with each end of its interval moved out to `sqrt(half² + (z · noise_se)²)`
    from the delta: the judge-noise component added in quadrature to each half-width, `z` the
    normal quantile of the estimate's confidence."""
    z = NormalDist().inv_cdf(0.5 + estimate.confidence / 2)
    extra = (z * noise_se) ** 2
    delta = estimate.delta
    return dataclasses.replace(
        estimate,
        ci_low=delta - math.sqrt((delta - estimate.ci_low) ** 2 + extra),
        ci_high=delta + math.sqrt((estimate.ci_high - delta) ** 2 + extra),
    )


def replication(rng: np.random.Generator, items: int, k: int, delta: float, seed: int) -> dict[str, float]:
    p_b = rng.beta(2, 1, items)
    p_c = np.clip(p_b + rng.normal(delta, 0.15, items), 0, 1)
    asks_b = rng.random((items, k)) < p_b[:, None]
    asks_c = rng.random((items, k)) < p_c[:, None]
    s_b, s_c = asks_b.mean(axis=1), asks_c.mean(axis=1)
    noise = asks_b.var(axis=1, ddof=1) / k + asks_c.var(axis=1, ddof=1) / k
    (plain,) = paired_estimates(s_b, s_c, resamples=1000, seed=seed)
    wide = widened(plain, math.sqrt(noise.sum()) / items)
    here = float((p_c - p_b).mean())
    out = {}
    for name, est in (("plain", plain), ("widened", wide)):
        out[f"{name}_here"] = est.ci_low <= here <= est.ci_high
        out[f"{name}_population"] = est.ci_low <= delta <= est.ci_high
        out[f"{name}_width"] = est.ci_high - est.ci_low
        out[f"{name}_regressed"] = verdict(est, 0.02) == Verdict.REGRESSED
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--delta", type=float, default=-0.05)
    parser.add_argument("--replications", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=27)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    runs = [replication(rng, args.items, args.k, args.delta, seed) for seed in range(args.replications)]
    print(
        f"{args.replications} replications, {args.items} items, judge asked {args.k} times, "
        f"delta {args.delta:+.2f} ({time.perf_counter() - start:.1f} s)"
    )
    print(f"{'interval':<10} {'covers here':>12} {'covers pop.':>12} {'mean width':>11} {'regressed':>10}")
    for name in ("plain", "widened"):
        means = {
            key: float(np.mean([run[f"{name}_{key}"] for run in runs]))
            for key in ("here", "population", "width", "regressed")
        }
        print(
            f"{name:<10} {means['here']:>11.1%} {means['population']:>12.1%} "
            f"{means['width']:>11.4f} {means['regressed']:>10.1%}"
        )


if __name__ == "__main__":
    main()
