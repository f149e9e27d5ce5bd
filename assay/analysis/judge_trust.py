"""A model-graded scorer held against people's labels: its agreement, and its mean and a
comparison's delta corrected to the people's scale (`assay agreement`, `assay compare --labels`).

What the store holds is turned into the arrays `agreement.py` and `ppi.py` work on: the run's
current scored rows of the scorer (the judge's `f`, every item x trial) and the labels that apply
to the run (`assay.store.labels.run_labels`; stale ones are counted, never used; several
labellers of one item are averaged). Labels with recorded inclusion probabilities that differ
(`assay labels sample --strategy stratified|uncertain`) are weighted by them (`ipw_ppi_mean`);
otherwise the labels are taken for a uniform random sample (`ppi_mean`). A paired delta needs
uniform labels on items labelled in both runs; it refuses weighted ones.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from assay.analysis.agreement import agreement
from assay.analysis.ppi import Corrected, ipw_ppi_mean, judge_only_mean, ppi_mean
from assay.analysis.stats import verdict_of
from assay.errors import InputError
from assay.outcomes import ScorerOutcome
from assay.store import Store, current_items
from assay.store.labels import run_labels

if TYPE_CHECKING:
    import polars as pl

_KEY = ["item_id", "trial"]


def judged(store: Store, run_id: str, scorer: str) -> pl.DataFrame:
    """The run's scored rows of `scorer`, with the human label where one applies: `item_id`,
    `trial`, `judge`, `human` (null without a label), `pi` (the label's inclusion probability,
    null when none was recorded), `labellers`, and each item's `annotations`.

    Raises:
        InputError: the run has no scored row of that scorer.
    """
    import polars as pl

    scores = store.run_scores(run_id).filter(
        (pl.col("scorer") == scorer) & (pl.col("outcome") == ScorerOutcome.SCORED.value)
    )
    if scores.is_empty():
        known = sorted(set(store.run_scores(run_id)["scorer"].to_list()))
        raise InputError(
            f"run {run_id!r} has no scores of scorer {scorer!r} (its scorers: {', '.join(known)})"
        )
    items = current_items(store.scan_run(run_id, "items")).select(*_KEY, "annotations").collect()
    labels = run_labels(store, run_id).filter((pl.col("scorer") == scorer) & ~pl.col("stale"))
    per_item = labels.group_by(_KEY).agg(
        human=pl.col("value").mean(),
        pi=pl.col("inclusion_probability").max(),
        labellers=pl.col("labeller").n_unique(),
    )
    frame = scores.select(*_KEY, judge=pl.col("score")).join(items, on=_KEY, how="left")
    return frame.join(per_item, on=_KEY, how="left").sort(_KEY)


def stale_count(store: Store, run_id: str, scorer: str) -> int:
    """Labels of `scorer` that no longer judge the run's output (the output changed)."""
    import polars as pl

    labels = run_labels(store, run_id)
    return int(labels.filter((pl.col("scorer") == scorer) & pl.col("stale")).height)


def corrected_mean(frame: pl.DataFrame, *, confidence: float = 0.95) -> Corrected:
    """The judge-corrected mean of a `judged` frame: PPI++ over uniform labels, the
    inverse-probability-weighted one over labels sampled with unequal chances.

    Raises:
        InputError: fewer than two labels, or labels with and without inclusion probabilities.
    """
    f = frame["judge"].to_numpy().astype(np.float64)
    human = frame["human"].to_numpy().astype(np.float64)
    labelled = ~np.isnan(human)
    if labelled.sum() < 2 or (~labelled).sum() < 1:
        raise InputError(
            f"a corrected estimate needs at least 2 labelled and 1 unlabelled item; "
            f"{int(labelled.sum())} of {f.size} are labelled"
        )
    pi = frame["pi"].to_numpy().astype(np.float64)
    recorded = ~np.isnan(pi[labelled])
    if recorded.any() and not recorded.all():
        raise InputError(
            "some labels carry an inclusion probability and some do not: label one sample (`assay"
            " labels sample`) or a uniform random subset, not both"
        )
    if recorded.any() and np.ptp(pi[labelled]) > 0:
        # An unlabelled item's term is the judge's alone: only the labelled items' chances count.
        return ipw_ppi_mean(f, human, np.where(labelled, pi, 1.0), confidence=confidence)
    return ppi_mean(human[labelled], f[labelled], f[~labelled], confidence=confidence)


def agreement_report(
    store: Store,
    run_id: str,
    scorer: str,
    *,
    scale: str | None = None,
    by: str | None = None,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """`assay agreement RUN --scorer S`: the judge against the labels, and its corrected mean.

    Args:
        store: the store.
        run_id: the run.
        scorer: the model-graded scorer.
        scale: `binary`, `ordinal` or `continuous`; None reads it from the values.
        by: an annotation key: the agreement per value of it too (`slices`).
        confidence: the intervals' level.
    """
    frame = judged(store, run_id, scorer)
    labelled = frame.filter(frame["human"].is_not_null())
    raw = judge_only_mean(frame["judge"].to_numpy()) if frame.height > 1 else None
    report: dict[str, Any] = {
        "run_id": run_id,
        "scorer": scorer,
        "n_scored": frame.height,
        "n_labelled": labelled.height,
        "n_stale": stale_count(store, run_id, scorer),
        "judge_mean": raw.as_dict() if raw else None,
        "agreement": agreement(
            labelled["judge"].to_numpy(), labelled["human"].to_numpy(), scale=scale, confidence=confidence
        ),
    }
    try:
        report["corrected_mean"] = corrected_mean(frame, confidence=confidence).as_dict()
    except InputError as exc:
        report["corrected_mean"] = None
        report["corrected_refused"] = exc.problems[0]
    if by is not None:
        report["slices"] = _slices(labelled, by, scale, confidence)
    return report


def _slices(labelled: pl.DataFrame, key: str, scale: str | None, confidence: float) -> dict[str, Any]:
    groups: dict[str, list[int]] = {}
    for index, text in enumerate(labelled["annotations"].to_list()):
        value = json.loads(text).get(key) if text else None
        groups.setdefault(str(value), []).append(index)
    judge, human = labelled["judge"].to_numpy(), labelled["human"].to_numpy()
    return {
        value: agreement(judge[rows], human[rows], scale=scale, confidence=confidence)
        for value, rows in sorted(groups.items())
    }


def corrected_delta(
    store: Store,
    baseline: str,
    candidate: str,
    scorer: str,
    *,
    threshold: float = 0.0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """The judge-corrected paired delta (candidate - baseline) of a scorer and its verdict: PPI++
    over per-item differences, the labels being those of items labelled in both runs.

    Raises:
        InputError: fewer than two items labelled in both runs, or labels sampled with unequal
            chances (a paired delta has no weighted form here).
    """
    a = judged(store, baseline, scorer)
    b = judged(store, candidate, scorer)
    pairs = a.join(b, on=_KEY, how="inner", suffix="_b")
    if any(pairs[column].drop_nulls().n_unique() > 1 for column in ("pi", "pi_b")):
        raise InputError(
            "a corrected delta needs uniform random labels; these were sampled with unequal chances"
        )
    f = (pairs["judge_b"] - pairs["judge"]).to_numpy().astype(np.float64)
    human = (pairs["human_b"] - pairs["human"]).to_numpy().astype(np.float64)
    labelled = ~np.isnan(human)
    if labelled.sum() < 2 or (~labelled).sum() < 1:
        raise InputError(
            f"a corrected delta needs at least 2 items labelled in both runs and 1 not; "
            f"{int(labelled.sum())} of {f.size} pairs are"
        )
    result = ppi_mean(human[labelled], f[labelled], f[~labelled], confidence=confidence)
    raw = judge_only_mean(f, confidence=confidence)
    return {
        "scorer": scorer,
        "n_pairs": int(f.size),
        "judge_delta": raw.as_dict(),
        "judge_verdict": verdict_of(raw.ci_low, raw.ci_high, raw.estimate, threshold).value,
        "corrected_delta": result.as_dict(),
        "verdict": verdict_of(result.ci_low, result.ci_high, result.estimate, threshold).value,
        "threshold": threshold,
    }


def nan_to_none(value: Any) -> Any:
    """A report with NaN as null, for JSON."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [nan_to_none(v) for v in value]
    return value


def with_labels(store: Store, comparison: dict[str, Any], *, fail_on: list[str]) -> dict[str, Any]:
    """`assay compare --labels`: the comparison with each labelled scorer's corrected delta beside
    its raw one (`labels`, keyed by scorer) and that scorer's verdict gate read from the corrected
    interval instead; scorers without labels on both sides keep their gates.

    Raises:
        InputError: more than one run on a side (labels belong to one run), or no scorer has
            labels on both sides.
    """
    if len(comparison["baseline"]) != 1 or len(comparison["candidate"]) != 1:
        raise InputError("--labels compares one baseline run with one candidate run")
    baseline, candidate = comparison["baseline"][0], comparison["candidate"][0]
    corrected: dict[str, Any] = {}
    refused: dict[str, str] = {}
    for row in comparison["scorers"]:
        if not row.get("n_pairs"):
            continue
        try:
            corrected[row["scorer"]] = corrected_delta(
                store, baseline, candidate, row["scorer"], threshold=row["threshold"]
            )
        except InputError as exc:
            refused[row["scorer"]] = exc.problems[0]
    if not corrected:
        reasons = "; ".join(f"{scorer}: {why}" for scorer, why in refused.items())
        raise InputError(f"--labels: no scorer has labels to correct with ({reasons})")
    for gate in comparison["gates"]:
        found = corrected.get(gate.get("scorer") or "")
        if gate["gate"] != "verdict" or found is None:
            continue
        gate["value"] = found["verdict"]
        gate["passed"] = found["verdict"] not in fail_on
        gate["message"] = f"{candidate} vs {baseline}: {corrected_line(found)}"
    comparison["labels"] = {"corrected": corrected, "refused": refused}
    comparison["lines"] = [*comparison["lines"], *(corrected_line(found) for found in corrected.values())]
    comparison["failed_gates"] = [gate["message"] for gate in comparison["gates"] if not gate["passed"]]
    comparison["passed"] = all(gate["passed"] for gate in comparison["gates"])
    return comparison


def corrected_line(found: dict[str, Any]) -> str:
    """`judge corrected by 200 labels −4.8 pts [−8.1, −1.5] regressed · raw judge +1.0 pts [...] unchanged`."""
    c, raw = found["corrected_delta"], found["judge_delta"]

    def pts(value: float) -> str:
        return f"{value * 100:+.1f}"

    return (
        f"{found['scorer']} corrected by {c['n_labelled']} labels {pts(c['estimate'])} pts "
        f"[{pts(c['ci_low'])}, {pts(c['ci_high'])}] ({c['method']}) {found['verdict']} · raw judge "
        f"{pts(raw['estimate'])} pts [{pts(raw['ci_low'])}, {pts(raw['ci_high'])}] {found['judge_verdict']}"
    )


def labelled_means(store: Store, run_id: str) -> dict[str, Any]:
    """`assay show`'s figures for each scorer with people's labels on the run: the raw judge mean
    and the corrected (human-scale) mean with their intervals, or why there is no corrected one.
    No labels: an empty dict."""
    labels = run_labels(store, run_id)
    found: dict[str, Any] = {}
    for scorer in sorted(set(labels["scorer"].to_list())):
        try:
            frame = judged(store, run_id, scorer)
        except InputError:
            continue  # labels of a scorer this run has no scores of
        entry: dict[str, Any] = {
            "judge_mean": judge_only_mean(frame["judge"].to_numpy()).as_dict() if frame.height > 1 else None,
            "n_stale": stale_count(store, run_id, scorer),
        }
        try:
            entry["corrected_mean"] = corrected_mean(frame).as_dict()
        except InputError as exc:
            entry["corrected_mean"], entry["corrected_refused"] = None, exc.problems[0]
        found[scorer] = entry
    return found
