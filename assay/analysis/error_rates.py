"""A run's error-rate gates: its item error rate and each scorer's error rate against their
limits (`assay.analysis.summary` applies them to a run; `assay.analysis.gates` to a comparison's
sides, and the leaderboard and the nightly read the same rates).
"""

from __future__ import annotations

from typing import Any

from assay import numbers
from assay.outcomes import Gate, ItemOutcome, ScorerOutcome


def item_error_rate(counts: dict[str, int]) -> float | None:
    """failed / attempted, where attempted excludes cancelled and budget-stopped items."""
    attempted = counts.get(ItemOutcome.COMPLETED, 0) + counts.get(ItemOutcome.FAILED, 0)
    return counts.get(ItemOutcome.FAILED, 0) / attempted if attempted else None


def scorer_error_rate(failed: int, scored: int) -> float | None:
    """A scorer's failed / (scored + failed), as every gate on it reads it (the run's, compare's
    and the nightly's); None when it neither scored nor failed."""
    return failed / (failed + scored) if failed + scored else None


def run_gates(
    counts: dict[str, int], item_limit: float, scorers: list[dict[str, Any]], scorer_limit: float | None
) -> list[dict[str, Any]]:
    """The gates a run applies, each `{gate, scorer?, value, limit, passed, message}`: its item
    error rate, then each scorer's error rate (`scorer_limit` None: a run from before that gate).
    `assay compare` applies the same two (`assay.analysis.gates.error_gates`)."""
    rate = item_error_rate(counts)
    failed = counts.get(ItemOutcome.FAILED, 0)
    gates = [
        {
            "gate": Gate.ITEM_ERROR_RATE.value,
            "value": rate,
            "limit": item_limit,
            "passed": rate is None or rate <= item_limit,
            "message": f"item error rate {numbers.pct(rate)} ({failed} failed of "
            f"{failed + counts.get(ItemOutcome.COMPLETED, 0)} attempted), limit {numbers.pct(item_limit)}",
        }
    ]
    if scorer_limit is None:
        return gates
    for row in scorers:
        n_failed, n_scored = row[ScorerOutcome.FAILED], row[ScorerOutcome.SCORED]
        rate = scorer_error_rate(n_failed, n_scored)
        gates.append(
            {
                "gate": Gate.SCORER_ERROR_RATE.value,
                "scorer": row["scorer"],
                "value": rate,
                "limit": scorer_limit,
                "passed": rate is None or rate <= scorer_limit,
                "message": f"scorer {row['scorer']} error rate {numbers.pct(rate)} ({n_failed} failed of "
                f"{n_failed + n_scored}), limit {numbers.pct(scorer_limit)}",
            }
        )
    return gates
