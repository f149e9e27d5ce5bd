"""Comparing runs: paired statistics per scorer, their verdicts, and the comparison's document.

Plain functions over the store; `flows/compare.py` strings them together. The sides' rows are
read by `assay.analysis.sides`; the error-rate gates, timing and cost deltas are
`assay.analysis.gates`' (this module adds the verdict gates). Each side may be
several runs of the same dataset (repeats): per (item_id, trial) and scorer, a side's scores are
averaged first. Pairs are matched by (item_id, trial); only pairs scored on both sides enter the
statistics (`assay.analysis.stats`). Gauges (duration, steps, tokens…) are not scorers: their paired means
are reported beside the verdicts, and never decide one.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, TypedDict

import numpy as np
import polars as pl
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from assay import _schema
from assay._schema import ComparisonRow, ScorerComparison
from assay.analysis.gates import CostDelta, GateResult, TimingDelta, cost_delta, error_gates, timing_delta
from assay.analysis.intervals import adjusted_p_values
from assay.analysis.judge_noise import judge_noise_se, side_noise
from assay.analysis.lines import signed
from assay.analysis.monitor import sequence_of
from assay.analysis.sides import Side
from assay.analysis.stats import (
    PairedEstimate,
    items_needed_for_sd,
    paired_estimates,
    sd_for_power_from_single_run,
    verdict,
)
from assay.errors import InputError
from assay.evaluators import SCORER_CLASSES
from assay.outcomes import Adjustment, Gate, IntervalMethod, ScorerOutcome, Verdict
from assay.run.plan import new_run_id
from assay.store import Store

# Model-graded scorers are noisy judges: a difference under 5 points is not worth a verdict.
DEFAULT_THRESHOLD_MODEL_GRADED = 0.05
DEFAULT_THRESHOLD_DETERMINISTIC = 0.0


class CompareOptions(BaseModel):
    """How to compare, and when to fail.

    Args:
        thresholds: per-scorer practical-significance thresholds (default: 0.05 for model-graded
            scorers, 0 for deterministic ones).
        max_item_error_rate: a run (of either side) whose failed / attempted exceeds this fails its
            gate, which names it (1 disables).
        max_scorer_error_rate: a scorer whose failed / (scored + failed) on a side exceeds this fails.
        fail_on: verdicts that fail the comparison.
        cluster: the annotation naming each item's cluster (default: `cluster` when items have it).
        resamples: bootstrap resamples.
        confidence: confidence level of the intervals.
        seed: bootstrap seed.
        adjust: `holm` (family-wise error) or `bh` (false discovery rate) over the scorers compared
            at once (over the cells, per scorer, in a leaderboard); `none` leaves verdicts alone.
        labels: gate each scorer with people's labels on both runs on its judge-corrected delta
            (`assay.analysis.judge_trust.with_labels`).
    """

    model_config = ConfigDict(extra="forbid")

    thresholds: dict[str, float] = Field(
        default_factory=dict,
        description="Per-scorer practical-significance thresholds (default 0.05 model-graded, 0 deterministic).",
    )
    max_item_error_rate: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description="A run whose failed / attempted exceeds this fails, on either side (1 disables).",
    )
    max_scorer_error_rate: float = Field(
        default=0.05, ge=0, le=1, description="A scorer whose failed / (scored + failed) exceeds this fails."
    )
    fail_on: list[Verdict] = Field(
        default_factory=lambda: [Verdict.REGRESSED], description="Verdicts that fail the comparison."
    )
    cluster: str | None = Field(
        default=None,
        description="The annotation naming each item's cluster (default: `cluster` when present).",
    )
    resamples: int = Field(default=10_000, ge=100, le=1_000_000, description="Bootstrap resamples.")
    confidence: float = Field(default=0.95, gt=0, lt=1, description="Confidence level of the intervals.")
    seed: int = Field(default=0, description="Bootstrap seed.")
    adjust: Adjustment = Field(
        default=Adjustment.NONE,
        description="Adjust verdicts for the scorers (or cells) compared at once: holm, bh or none.",
    )
    labels: bool = Field(
        default=False,
        description="Gate each labelled scorer on its judge-corrected delta (people's labels on both runs).",
    )


class Comparison(TypedDict):
    """A whole comparison, as `compare` returns it and `comparison.json` stores it.

    Args:
        comparison_id: its id (the `comparisons` dataset's partition).
        created_at: when it was made (ISO-8601, UTC).
        baseline: the baseline side's runs.
        candidate: the candidate side's runs.
        runs: each run of either side as a person tells it apart: its spec `name`, target
            `model`, matrix `cell` and `tags`.
        scorers: per scorer scored on both sides, the paired statistics and the verdict.
        scorers_only_in: per side, the scorers only it has.
        gauges: per gauge measured on both sides, the paired means (`gauge_rows`).
        lines: one line per scorer, for people (`human_line`).
        timing: the change in duration.
        cost: the change in cost.
        gates: every gate, passed or not.
        failed_gates: the messages of the gates that failed.
        passed: whether every gate passed.
        options: the `CompareOptions` it was made with.
    """

    comparison_id: str
    created_at: str
    baseline: list[str]
    candidate: list[str]
    runs: dict[str, dict[str, Any]]
    scorers: list[ScorerComparison]
    scorers_only_in: dict[str, list[str]]
    gauges: list[dict[str, Any]]
    lines: list[str]
    timing: TimingDelta
    cost: CostDelta
    gates: list[GateResult]
    failed_gates: list[str]
    passed: bool
    options: dict[str, Any]


def gauge_rows(base: Side, cand: Side) -> list[dict[str, Any]]:
    """Per gauge measured on both sides: the means over the (item_id, trial) pairs measured on both
    (each side's repeats averaged first), the delta and its change in percent. Gauges describe the
    target's work (time, steps, tokens); they are reported, never given a verdict or a gate."""

    def means(side: Side) -> pl.DataFrame:
        return side.gauges.group_by("item_id", "trial", "scorer").agg(pl.col("value").mean())

    pairs = means(base).join(means(cand), on=["item_id", "trial", "scorer"], suffix="_candidate")
    rows = (
        pairs.group_by(pl.col("scorer").alias("gauge"))
        .agg(
            pl.len().alias("n_pairs"),
            pl.col("value").mean().alias("baseline_mean"),
            pl.col("value_candidate").mean().alias("candidate_mean"),
        )
        .sort("gauge")
        .to_dicts()
    )
    for row in rows:
        b, c = row["baseline_mean"], row["candidate_mean"]
        row["delta"] = c - b
        row["change_pct"] = (c - b) / b * 100 if b else None
    return rows


def load_sides(store: Store, baseline: list[str], candidate: list[str]) -> tuple[Side, Side]:
    """Read both sides; bad input (unknown run, different datasets) raises `InputError`."""
    if not baseline or not candidate:
        raise InputError("compare needs at least one baseline run and one candidate run")
    base, cand = Side("baseline", store, baseline), Side("candidate", store, candidate)
    datasets = {(r["run_id"], r["dataset_hash"]) for r in base.records + cand.records}
    if len({digest for _, digest in datasets}) > 1:
        listed = ", ".join(f"{run_id} (dataset {digest})" for run_id, digest in sorted(datasets))
        raise InputError(f"runs of different datasets cannot be compared: {listed}")
    return base, cand


def _threshold(scorer_kind: str, name: str, options: CompareOptions) -> float:
    if name in options.thresholds:
        return options.thresholds[name]
    cls = SCORER_CLASSES.get(scorer_kind)
    deterministic = cls.deterministic if cls is not None else True
    return DEFAULT_THRESHOLD_DETERMINISTIC if deterministic else DEFAULT_THRESHOLD_MODEL_GRADED


def _clusters(side: Side, keys: pl.DataFrame, annotation: str | None) -> np.ndarray | None:
    """The cluster label of each pair (by item_id), or None when items carry none."""
    key = annotation or "cluster"
    # Only the items whose annotations name the key are parsed (as Assay writes JSON, with or
    # without ASCII escapes): parsing every item's took ~1 s a side at 100,000 items.
    named = pl.lit(False)
    for written in {json.dumps(key), json.dumps(key, ensure_ascii=False)}:
        named = named | pl.col("annotations").str.contains(written, literal=True)
    firsts = side.items.unique("item_id").filter(named).select("item_id", "annotations")
    labels = {}
    for item_id, text in firsts.iter_rows():
        annotations = json.loads(text)
        if key in annotations:
            labels[item_id] = json.dumps(annotations[key], sort_keys=True)
    if not labels:
        if annotation:
            raise InputError(f"--cluster {annotation!r}: no item has that annotation")
        return None
    return np.array([labels.get(item_id, f"item:{item_id}") for item_id in keys["item_id"].to_list()])


def scorer_rows(base: Side, cand: Side, options: CompareOptions) -> list[ScorerComparison]:
    base_means, cand_means = base.mean_scores(), cand.mean_scores()
    kinds = dict(
        pl.concat([base.scores, cand.scores]).select("scorer", "scorer_kind").unique("scorer").iter_rows()
    )
    common = sorted(set(base_means["scorer"].unique()) & set(cand_means["scorer"].unique()))
    rows = []
    for scorer in common:
        b = base_means.filter(pl.col("scorer") == scorer).drop("scorer")
        c = cand_means.filter(pl.col("scorer") == scorer).drop("scorer")
        pairs = b.join(c, on=["item_id", "trial"], suffix="_candidate").sort("item_id", "trial")
        counts = {
            "unpaired_baseline": b.height - pairs.height,
            "unpaired_candidate": c.height - pairs.height,
            "unscored_baseline": base.items.select("item_id", "trial").unique().height - b.height,
            "unscored_candidate": cand.items.select("item_id", "trial").unique().height - c.height,
        }
        threshold = _threshold(kinds[scorer], scorer, options)
        row: dict[str, Any] = {
            "scorer": scorer,
            "scorer_kind": kinds[scorer],
            "threshold": threshold,
            **counts,
            "sequential_pairs": None,
            "judge_noise_se": None,
        }
        if pairs.height == 0:
            rows.append({**row, "n_pairs": 0, "verdict": Verdict.INCONCLUSIVE.value})
            continue
        (estimate,) = paired_estimates(
            pairs["score"].to_numpy(),
            pairs["score_candidate"].to_numpy(),
            clusters=_clusters(base, pairs, options.cluster),
            resamples=options.resamples,
            confidence=options.confidence,
            seed=options.seed,
        )
        noise = [side_noise(side.scores, scorer) for side in (base, cand)]
        # Measured on both sides: its share of the interval, reported, not added again (each
        # item's score already carries it; benchmarks/judge_noise.py measures the double count).
        if noise[0] is not None and noise[1] is not None:
            row["judge_noise_se"] = judge_noise_se(noise[0], noise[1], pairs)
        rows.append({**row, **estimate_columns(estimate), "verdict": verdict(estimate, threshold).value})
    _sequential(base, cand, rows)
    return adjust_verdicts(rows, options.adjust, 1 - options.confidence)


def _sequential(base: Side, cand: Side, rows: list[dict[str, Any]]) -> None:
    """A candidate run with a sequential compare against this baseline: its scorer's row takes the
    run's own confidence sequence — interval, verdict and threshold, over the pairs the run decided
    on — as a fixed-n interval is not valid after a data-dependent stop (docs/statistics.md)."""
    if len(cand.run_ids) != 1 or len(base.run_ids) != 1:
        return
    sequence = sequence_of(cand.store, cand.run_ids[0], base.run_ids[0])
    if sequence is None:
        return
    for row in rows:
        if row["scorer"] == sequence["scorer"] and sequence["items"]:
            row.update(
                ci_low=sequence["low"],
                ci_high=sequence["high"],
                ci_method=IntervalMethod.BETTING_CS.value,
                threshold=sequence["threshold"],
                verdict=sequence["verdict"],
                sequential_pairs=sequence["items"],
            )


def adjust_verdicts(
    rows: list[dict[str, Any]], method: Adjustment, alpha: float, *, key: str = "verdict"
) -> list[dict[str, Any]]:
    """Adjust a family of verdicts for being many: each row gets `adjustment` and `p_adjusted`,
    and a `regressed` / `improved` whose adjusted p-value exceeds ``alpha`` becomes `inconclusive`.

    Args:
        rows: the family, each with a `p_value` (absent or NaN: no test) and a verdict under ``key``.
        method: Holm, Benjamini-Hochberg or none.
        alpha: the level, 1 - confidence.
        key: the verdict's key in a row.
    """
    p = np.array([_finite(row.get("p_value")) for row in rows], dtype=np.float64)
    adjusted = adjusted_p_values(p, method)
    changes = (Verdict.REGRESSED, Verdict.IMPROVED)
    for row, q in zip(rows, adjusted, strict=True):
        row["adjustment"] = method.value
        row["p_adjusted"] = None if method == Adjustment.NONE or np.isnan(q) else float(q)
        if row["p_adjusted"] is not None and row[key] in changes and row["p_adjusted"] > alpha:
            row[key] = Verdict.INCONCLUSIVE.value
    return rows


def _finite(value: float | None) -> float:
    return float(value) if value is not None and np.isfinite(value) else np.nan


def estimate_columns(estimate: PairedEstimate) -> dict[str, Any]:
    """A paired estimate as the keys of a `ScorerComparison` (`n` as `n_pairs`)."""
    columns = asdict(estimate)
    columns["n_pairs"] = columns.pop("n")
    return columns


def _gates(
    base: Side, cand: Side, scorers: list[ScorerComparison], options: CompareOptions
) -> list[GateResult]:
    """Every gate: each side's error rates (`error_gates`), then each scorer's verdict against
    `fail_on`."""
    gates: list[GateResult] = []
    for side in (base, cand):
        gates.extend(error_gates(side, options.max_item_error_rate, options.max_scorer_error_rate))
    for row in scorers:
        failing = row["verdict"] in options.fail_on
        gates.append(
            {
                "gate": Gate.VERDICT.value,
                "scorer": row["scorer"],
                "value": row["verdict"],
                "passed": not failing,
                "message": f"{cand.label} vs {base.label}: {human_line(row)}",
            }
        )
    return gates


def human_line(
    row: ScorerComparison, timing: TimingDelta | None = None, cost: CostDelta | None = None
) -> str:
    """`accuracy −3.1 pts [−5.0, −1.2] regressed · 12% slower · 8% cheaper`."""
    adjusted = _ADJUSTED.get(row.get("adjustment", Adjustment.NONE), "")
    if not row.get("n_pairs"):
        head = f"{row['scorer']} no pairs {row['verdict']}"
    else:
        method = row.get("ci_method", IntervalMethod.BOOTSTRAP)
        if row.get("sequential_pairs"):
            method = f"{method} over the first {row['sequential_pairs']} pairs"
        if row.get("judge_noise_se") is not None:
            method = f"{method}, of it judge noise ±{row['judge_noise_se'] * 100:.1f} pts se"
        head = (
            f"{row['scorer']} {signed(row['delta'] * 100)} pts "
            f"[{signed(row['ci_low'] * 100)}, {signed(row['ci_high'] * 100)}] ({method}) "
            f"{row['verdict']}{adjusted}"
        )
    parts = [head]
    if timing and timing["change_pct"] is not None:
        change = timing["change_pct"]
        parts.append(f"{abs(change):.0f}% {'slower' if change > 0 else 'faster'}")
    # As the seed: the cost only when certified (an uncertified delta is not a fact about the
    # target) and above 1 %.
    if cost and cost["certified"] and cost["change_pct"] is not None and abs(cost["change_pct"]) > 1:
        change = cost["change_pct"]
        parts.append(f"{abs(change):.0f}% {'more expensive' if change > 0 else 'cheaper'}")
    return " · ".join(parts)


_ADJUSTED = {Adjustment.HOLM: " (Holm-adjusted)", Adjustment.BH: " (Benjamini-Hochberg-adjusted)"}


def compare(base: Side, cand: Side, options: CompareOptions) -> Comparison:
    """The whole comparison as a JSON-ready document; `passed` is False when a gate failed."""
    scorers = scorer_rows(base, cand, options)
    if not any(row.get("n_pairs") for row in scorers):
        raise InputError(
            f"nothing paired: no (item_id, trial) is scored by the same scorer on both sides "
            f"({base.label} vs {cand.label})"
        )
    timing, cost = timing_delta(base, cand), cost_delta(base, cand)
    gates = _gates(base, cand, scorers, options)
    only = {
        side.name: sorted(set(side.scores["scorer"].unique()) - {row["scorer"] for row in scorers})
        for side in (base, cand)
    }
    return {
        "comparison_id": new_run_id(),
        "created_at": datetime.now(UTC).isoformat(),
        "baseline": base.run_ids,
        "candidate": cand.run_ids,
        "runs": {
            record["run_id"]: {key: record.get(key) for key in ("name", "model", "cell", "tags")}
            for side in (base, cand)
            for record in side.records
        },
        "scorers": scorers,
        "scorers_only_in": only,
        "gauges": gauge_rows(base, cand),
        "lines": [human_line(row, timing, cost) for row in scorers],
        "timing": timing,
        "cost": cost,
        "gates": gates,
        "failed_gates": [gate["message"] for gate in gates if not gate["passed"]],
        "passed": all(gate["passed"] for gate in gates),
        "options": options.model_dump(mode="json"),
    }


def write_comparison(store: Store, document: Comparison) -> None:
    """`<store>/comparisons/comparison_id=<id>/comparison.parquet` (a row per scorer) and the
    whole document beside it as `comparison.json`."""
    created = datetime.fromisoformat(document["created_at"])
    options = document["options"]
    rows: list[ComparisonRow] = [
        {
            "created_at": created,
            "baseline_run_ids": document["baseline"],
            "candidate_run_ids": document["candidate"],
            "confidence": options["confidence"],
            "resamples": options["resamples"],
            "seed": options["seed"],
            **row,
        }
        for row in document["scorers"]
    ]
    store.write_comparison(
        document["comparison_id"],
        pa.Table.from_pylist(rows, schema=_schema.COMPARISONS),
        json.dumps(document, indent=2, default=str),
    )


def power_report(
    store: Store, run_id: str, mde: float, *, power: float = 0.8, alpha: float = 0.05
) -> dict[str, Any]:
    """How many paired items a comparison needs to detect a true difference `mde` per scorer,
    from one run's observed variance (`assay power RUN --mde 0.02`).

    Args:
        store: the store.
        run_id: the run whose scores give the variance.
        mde: the minimum detectable difference, on the score scale (0.02 = 2 points).
        power: the chance of detecting it (default 0.8).
        alpha: the two-sided significance level (default 0.05).
    """
    if not 0 < mde <= 1:
        raise InputError(f"--mde {mde!r}: expected a difference in (0, 1], e.g. 0.02 for 2 points")
    if not 0 < power < 1:
        raise InputError(f"--power {power!r}: expected a probability in (0, 1)")
    scores = store.run_scores(run_id).filter(pl.col("outcome") == ScorerOutcome.SCORED)
    if scores.is_empty():
        raise InputError(f"run {run_id} has no scores to estimate a variance from")
    rows = []
    for scorer, values in scores.group_by("scorer").agg(pl.col("score")).sort("scorer").iter_rows():
        n = len(values)
        sd = sd_for_power_from_single_run(values) if n >= 2 else None
        needed = items_needed_for_sd(sd, mde, power=power, alpha=alpha) if sd is not None else None
        rows.append(
            {
                "scorer": scorer,
                "n_scored": n,
                "mean": float(np.mean(values)),
                "sd_of_differences": sd,
                "items_needed": needed,
                "enough": needed is not None and n >= needed,
            }
        )
    return {"run_id": run_id, "mde": mde, "power": power, "alpha": alpha, "scorers": rows}
