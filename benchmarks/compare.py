"""Benchmark of the paired statistics behind `assay compare`: `assay.analysis.stats.paired_estimates`.

100,000 paired items x 5 scorers (3 binary, 1 graded on a 0.1 grid, 1 continuous uniform), a
small true improvement, 10,000 bootstrap resamples. Prints wall seconds (total and per scorer
type), CPU seconds, peak RSS and the target (<= 5 s wall on 2 cores).

    .venv/bin/python benchmarks/compare.py [--items 100000] [--resamples 10000] [--repeat 3]

Shared machines vary: quote a figure with its command and the load average it prints.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assay.analysis.stats import paired_estimates, verdict

TARGET_S = 5.0


def synthetic(items: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Baseline and candidate scores, shape (items, 5), correlated per item, candidate ~1-2 pt better.

    Args:
        items: Paired items.
        seed: Seed of the data (not of the bootstrap).
    """
    rng = np.random.default_rng(seed)
    difficulty = rng.random(items)
    base_cols, cand_cols, kinds = [], [], []
    for p_shift in (0.0, 0.01, 0.02):  # binary: pass when a shared latent beats the difficulty
        noise_b, noise_c = rng.normal(0, 0.15, items), rng.normal(0, 0.15, items)
        base_cols.append((0.6 - difficulty + noise_b > 0).astype(float))
        cand_cols.append((0.6 + p_shift - difficulty + noise_c > 0).astype(float))
        kinds.append("binary")
    # graded judge on a 0.1 grid
    base_cols.append(np.clip(np.round((1 - difficulty + rng.normal(0, 0.2, items)) * 10) / 10, 0, 1))
    cand_cols.append(np.clip(np.round((1.02 - difficulty + rng.normal(0, 0.2, items)) * 10) / 10, 0, 1))
    kinds.append("graded")
    # continuous, uniform on [0, 1]
    base_cols.append(rng.random(items))
    cand_cols.append(np.clip(base_cols[-1] + rng.uniform(-0.2, 0.22, items), 0, 1))
    kinds.append("continuous")
    return np.column_stack(base_cols), np.column_stack(cand_cols), kinds


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions of the whole call")
    parser.add_argument(
        "--continuous-only",
        action="store_true",
        help="the worst case: all 5 scorers continuous (no few-distinct-values shortcut)",
    )
    args = parser.parse_args()

    baseline, candidate, kinds = synthetic(args.items)
    if args.continuous_only:
        rng = np.random.default_rng(2)
        baseline = rng.random((args.items, 5))
        candidate = np.clip(baseline + rng.uniform(-0.2, 0.22, baseline.shape), 0, 1)
        kinds = ["continuous"] * 5
    print(
        f"{args.items:,} paired items x {len(kinds)} scorers ({', '.join(kinds)}), {args.resamples:,} resamples"
    )
    print(f"cores available: {len(os.sched_getaffinity(0))}; load average before: {os.getloadavg()[0]:.2f}")
    paired_estimates(baseline[:100], candidate[:100], resamples=10)  # imports (scipy.stats) out of the timing
    rss_before_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux

    totals, cpus = [], []
    for _ in range(args.repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        estimates = paired_estimates(baseline, candidate, resamples=args.resamples, seed=0)
        totals.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)

    per_kind: dict[str, float] = {}
    for kind in dict.fromkeys(kinds):
        columns = [j for j, k in enumerate(kinds) if k == kind]
        wall = time.perf_counter()
        paired_estimates(baseline[:, columns], candidate[:, columns], resamples=args.resamples, seed=0)
        per_kind[kind] = time.perf_counter() - wall

    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    for kind, estimate in zip(kinds, estimates, strict=True):
        print(
            f"  {kind:10s} n={estimate.n} delta={estimate.delta:+.4f} "
            f"CI=[{estimate.ci_low:+.4f}, {estimate.ci_high:+.4f}] t-CI=[{estimate.se_ci_low:+.4f}, "
            f"{estimate.se_ci_high:+.4f}] p={estimate.p_value:.3g} -> {verdict(estimate, 0.005)}"
        )
    best = min(totals)
    print(f"wall, all 5 scorers: best {best:.2f} s, runs {', '.join(f'{t:.2f}' for t in totals)} s")
    print(f"cpu,  all 5 scorers: {', '.join(f'{t:.2f}' for t in cpus)} s")
    print("wall per scorer type (one call each): " + ", ".join(f"{k} {v:.2f} s" for k, v in per_kind.items()))
    print(
        f"peak RSS: {peak_mb:.0f} MB ({rss_before_mb:.0f} MB after imports and data, before the first "
        f"timed call); load average after: {os.getloadavg()[0]:.2f}"
    )
    print(f"target: <= {TARGET_S:.0f} s wall -> {'met' if best <= TARGET_S else 'NOT met'}")
    return 0 if best <= TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
