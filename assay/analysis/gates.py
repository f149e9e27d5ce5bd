"""A comparison's gates and certifications: each run's item error rate and each scorer's error
rate against their limits, the timing delta, and the cost delta with whether it can be trusted.

`assay.analysis.compare` adds the verdict gates (a scorer's verdict against `fail_on`) and puts
these into its document.
"""

from __future__ import annotations

import json
from typing import Any, TypedDict

import polars as pl

from assay.analysis.error_rates import item_error_rate, scorer_error_rate
from assay.analysis.sides import Side
from assay.outcomes import Completeness, Gate, ItemOutcome, ScorerOutcome


# Keys every gate has come first; a `total=False` subclass adds those some lack (`NotRequired`
# is not seen at run time under `from __future__ import annotations` on Python 3.11).
class _GateOutcome(TypedDict):
    gate: str
    value: float | str | None
    passed: bool
    message: str


class GateResult(_GateOutcome, total=False):
    """One gate of a comparison (`Gate`): one run's item error rate (`runs` names it) or a side's
    scorer error rate against its limit, or a scorer's verdict against `fail_on`."""

    side: str
    runs: list[str]
    scorer: str
    limit: float


class TimingDelta(TypedDict):
    """Mean duration of completed items on each side, and the change."""

    baseline_mean_ms: float | None
    candidate_mean_ms: float | None
    change_pct: float | None


class CostDelta(TypedDict):
    """Mean measured cost per run on each side, and whether the change can be trusted."""

    baseline_usd: float
    candidate_usd: float
    change_pct: float | None
    certified: bool
    reason: str | None


def error_gates(side: Side, max_item_error_rate: float, max_scorer_error_rate: float) -> list[GateResult]:
    """A side's error-rate gates: each run's item error rate, then each scorer's error rate over
    the side's runs.

    Args:
        side: the side.
        max_item_error_rate: a run whose failed / attempted exceeds this fails.
        max_scorer_error_rate: a scorer whose failed / (scored + failed) exceeds this fails.
    """
    gates = _item_error_gates(side, max_item_error_rate)
    by_scorer = side.scores.group_by("scorer").agg(
        (pl.col("outcome") == ScorerOutcome.FAILED).sum().alias("failed"),
        (pl.col("outcome") == ScorerOutcome.SCORED).sum().alias("scored"),
    )
    for scorer, failed, scored in by_scorer.sort("scorer").iter_rows():
        rate = scorer_error_rate(failed, scored)
        gates.append(
            {
                "gate": Gate.SCORER_ERROR_RATE.value,
                "side": side.name,
                "runs": side.run_ids,
                "scorer": scorer,
                "value": rate,
                "limit": max_scorer_error_rate,
                "passed": rate is None or rate <= max_scorer_error_rate,
                "message": (
                    f"{side.label}: scorer {scorer} error rate {_pct(rate)} ({failed} failed of "
                    f"{failed + scored}), limit {_pct(max_scorer_error_rate)}"
                ),
            }
        )
    return gates


def _item_error_gates(side: Side, limit: float) -> list[GateResult]:
    """The item-error-rate gate of each run of a side, naming the run: a run whose failed /
    attempted exceeds `limit` fails, however clean the side's other runs are (pooling them would
    let a clean repeat hide a failing one, as the seed's per-run gate does not)."""
    counts_by_run: dict[str, dict[str, int]] = {run_id: {} for run_id in side.run_ids}
    for run_id, outcome, n in side.items.group_by("run_id", "outcome").len().iter_rows():
        counts_by_run[run_id][outcome] = n
    several = len(side.run_ids) > 1
    gates: list[GateResult] = []
    for index, run_id in enumerate(side.run_ids):
        counts = counts_by_run[run_id]
        rate = item_error_rate(counts)
        failed = counts.get(ItemOutcome.FAILED, 0)
        attempted = failed + counts.get(ItemOutcome.COMPLETED, 0)
        which = f"{side.name} run {index + 1} ({run_id})" if several else f"{side.name} {run_id}"
        gates.append(
            {
                "gate": Gate.ITEM_ERROR_RATE.value,
                "side": side.name,
                "runs": [run_id],
                "value": rate,
                "limit": limit,
                "passed": rate is None or rate <= limit,
                "message": (
                    f"{which}: item error rate {_pct(rate)} ({failed} failed of {attempted} attempted), "
                    f"limit {_pct(limit)}"
                ),
            }
        )
    return gates


def _pct(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate * 100:.1f}%"


def timing_delta(base: Side, cand: Side) -> TimingDelta:
    """Mean duration of completed items on each side, and its change in percent."""

    def mean_ms(side: Side) -> float | None:
        return side.items.filter(pl.col("outcome") == ItemOutcome.COMPLETED)["duration_ms"].mean()

    b, c = mean_ms(base), mean_ms(cand)
    change = (c - b) / b * 100 if b and c is not None else None
    return {"baseline_mean_ms": b, "candidate_mean_ms": c, "change_pct": change}


def cost_delta(base: Side, cand: Side) -> CostDelta:
    """Mean cost per run on each side, and whether the delta can be trusted (certified)."""

    def per_run(side: Side) -> float:
        return float(side.items["cost_usd"].fill_null(0).sum()) / len(side.run_ids)

    def incomplete(side: Side) -> str | None:
        kinds = side.items["cost_completeness"]
        if (kinds == Completeness.COMPLETE).all():
            return None
        reasons: dict[str, int] = {}
        for text in side.items["cost_reasons"].drop_nulls():
            for name, n in json.loads(text).items():
                reasons[name] = reasons.get(name, 0) + n
        listed = ", ".join(f"{name} {n}" for name, n in sorted(reasons.items())) or Completeness.UNVERIFIED
        return f"accounting incomplete on the {side.name} side ({listed})"

    b, c = per_run(base), per_run(cand)
    change = (c - b) / b * 100 if b else None
    kinds = {side.name: {r["kind"] for r in side.records} for side in (base, cand)}
    reason = incomplete(base) or incomplete(cand)
    if reason is None and (kinds["baseline"] != kinds["candidate"] or len(kinds["baseline"]) > 1):
        reason = "different scopes (run vs rescore)"
    reason = reason or _different_work(base, cand)
    return {
        "baseline_usd": b,
        "candidate_usd": c,
        "change_pct": change,
        "certified": reason is None,
        "reason": reason,
    }


def _different_work(base: Side, cand: Side) -> str | None:
    """Why the two sides' runs did not do the same work, or None when they did: every run (of
    either side) holds the same number of item x trials, completed the same ones, and has the same
    scorers scoring each of them. Each run is held to the first baseline run, since a side's cost
    is a mean over its runs: one that did less would make its side look cheaper."""
    reference = base.run_ids[0]

    def work(side: Side, run_id: str) -> tuple[int, pl.DataFrame, pl.DataFrame]:
        # Unique per (item_id, trial): a run named twice on a side is read twice.
        items = side.items.filter(pl.col("run_id") == run_id).unique(["item_id", "trial"])
        done = items.filter(pl.col("outcome") == ItemOutcome.COMPLETED).select("item_id", "trial")
        scored = side.scores.filter(
            (pl.col("run_id") == run_id) & (pl.col("outcome") == ScorerOutcome.SCORED)
        ).select("item_id", "trial", "scorer")
        return items.height, done, scored

    count, done, scored = work(base, reference)
    for side in (base, cand):
        for run_id in side.run_ids:
            if side is base and run_id == reference:
                continue
            other_count, other_done, other_scored = work(side, run_id)
            who = f"{side.name} run {run_id}"
            if other_count != count:
                return (
                    f"item counts differ (baseline run {reference} {count} vs {who} {other_count}): "
                    "the runs did different amounts of work"
                )
            if (differs := _first_difference(done, other_done)) is not None:
                (item_id, trial), in_reference = differs
                ran = f"baseline run {reference}" if in_reference else who
                return f"item coverage differs at {item_id} trial {trial}: only {ran} completed it"
            if (differs := _first_difference(scored, other_scored)) is not None:
                (item_id, trial, scorer), in_reference = differs
                ran = f"baseline run {reference}" if in_reference else who
                return (
                    f"scorer coverage differs for {scorer!r} at {item_id} trial {trial}: "
                    f"only {ran} produced a score"
                )
    return None


def _first_difference(reference: pl.DataFrame, other: pl.DataFrame) -> tuple[tuple[Any, ...], bool] | None:
    """The smallest row in one frame but not the other (as sets of rows), and whether it is the
    reference's; None when both hold the same rows. Joins, not Python sets: 100,000s of rows."""
    on = reference.columns
    only = pl.concat(
        [
            reference.join(other, on=on, how="anti").with_columns(_in_reference=pl.lit(True)),
            other.join(reference, on=on, how="anti").with_columns(_in_reference=pl.lit(False)),
        ]
    )
    if only.is_empty():
        return None
    *row, in_reference = only.sort(on).row(0)
    return tuple(row), bool(in_reference)
