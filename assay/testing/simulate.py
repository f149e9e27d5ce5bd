"""Simulated paired scores with a known true mean difference, for the statistics' simulations
(tests/analysis/test_sequential.py) and benchmarks/sequential.py."""

from __future__ import annotations

import numpy as np

# A continuous baseline score's mean: E[0.7 z^2 + 0.3 u] with z, u uniform on [0, 1].
CONTINUOUS_MEAN = 23 / 60


def binary_pairs(
    rng: np.random.Generator, shape: tuple[int, ...], delta: float, *, discordance: float = 0.15
) -> tuple[np.ndarray, np.ndarray]:
    """Pass/fail pairs: the baseline passes 70 % of items, the two runs disagree on
    ``discordance`` of them, and the candidate passes 70 % + ``delta``.

    Args:
        rng: the generator.
        shape: the arrays' shape (replications, ..., items).
        delta: the true mean difference, candidate - baseline (|delta| <= discordance).
        discordance: the share of items exactly one run passes.
    """
    both = 0.70 - (discordance - delta) / 2  # both pass; candidate-only f, baseline-only g
    f, g = (discordance + delta) / 2, (discordance - delta) / 2
    u = rng.random(shape)
    baseline = ((u < both) | ((u >= both + f) & (u < both + f + g))).astype(np.float64)
    candidate = (u < both + f).astype(np.float64)
    return baseline, candidate


def continuous_pairs(
    rng: np.random.Generator, shape: tuple[int, ...], delta: float
) -> tuple[np.ndarray, np.ndarray]:
    """Skewed [0, 1] scores sharing an item difficulty z: ``0.7 z^2 + 0.3 u`` on each side, the
    candidate's scaled so that its mean is exactly ``delta`` away (``delta`` <= 0).

    Args:
        rng: the generator.
        shape: the arrays' shape.
        delta: the true mean difference, in [-CONTINUOUS_MEAN, 0].
    """
    z = rng.random(shape) ** 2
    baseline = 0.7 * z + 0.3 * rng.random(shape)
    candidate = (0.7 * z + 0.3 * rng.random(shape)) * (1 + delta / CONTINUOUS_MEAN)
    return baseline, candidate
