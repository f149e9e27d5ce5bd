"""A run's summary, computed with Polars from what the store holds, and the item-error-rate gate.

The summary is computed from the committed Parquet parts, not from memory, so a resumed run's
summary covers the items of every execution, exactly once each.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

import polars as pl

from assay.calls.accounting import Budget
from assay.calls.capture import Recorder
from assay.outcomes import Completeness, ItemOutcome, RowKind, RunStatus, ScorerOutcome
from assay.store import Store


def item_error_rate(counts: dict[str, int]) -> float | None:
    """failed / attempted, where attempted excludes cancelled and budget-stopped items."""
    attempted = counts.get(ItemOutcome.COMPLETED, 0) + counts.get(ItemOutcome.FAILED, 0)
    return counts.get(ItemOutcome.FAILED, 0) / attempted if attempted else None


def _quantiles(column: pl.Expr, prefix: str = "") -> list[pl.Expr]:
    return [
        column.mean().alias(f"{prefix}mean"),
        column.min().alias(f"{prefix}min"),
        column.quantile(0.5, interpolation="linear").alias(f"{prefix}p50"),
        column.quantile(0.95, interpolation="linear").alias(f"{prefix}p95"),
        column.max().alias(f"{prefix}max"),
    ]


# `measured` belongs to gauge rows, which are not scorers: no count column for it.
_SCORER_OUTCOMES = [outcome for outcome in ScorerOutcome if outcome is not ScorerOutcome.MEASURED]


def gauge_stats(gauges: pl.DataFrame) -> list[dict[str, Any]]:
    """Per gauge: how many item x trials measured it, and the mean, min, p50, p95 and max of its
    value. Only items that have the gauge count (an unknown value is no row, not a 0).

    Args:
        gauges: a run's gauge rows (`Store.run_scores(run_id, kind=RowKind.GAUGE)`).
    """
    return (
        gauges.group_by(pl.col("scorer").alias("gauge"))
        .agg(pl.len().alias("n"), *_quantiles(pl.col("value")))
        .sort("gauge")
        .to_dicts()
    )


def summarise(store: Store, run_id: str) -> dict[str, Any]:
    """The summary of one stored run: outcome counts, per-scorer statistics, per-gauge statistics,
    durations, gate.

    Args:
        store: the store.
        run_id: the run.
    """
    record = store.read_run(run_id)
    items = store.run_items(run_id)
    scores = store.run_scores(run_id)

    counts = {outcome.value: 0 for outcome in ItemOutcome}
    for outcome, n in items.group_by("outcome").len().iter_rows():
        counts[outcome] = n
    scorer_stats = (
        scores.group_by("scorer")
        .agg(
            *_quantiles(pl.col("score").filter(pl.col("outcome") == ScorerOutcome.SCORED)),
            *(
                (pl.col("outcome") == outcome.value).sum().alias(outcome.value)
                for outcome in _SCORER_OUTCOMES
            ),
        )
        .sort("scorer")
        .to_dicts()
    )
    gauges = gauge_stats(store.run_scores(run_id, kind=RowKind.GAUGE))
    duration = items.select(_quantiles(pl.col("duration_ms"))).to_dicts()[0]
    caller_cost = items.select(
        # null, not 0, when no item reported one: "unknown" and "none" differ.
        pl.when(pl.col("caller_cost_usd").is_not_null().any()).then(pl.col("caller_cost_usd").sum())
    ).item()
    accounting = run_accounting(items, scores)
    timing = model_timing(items, store.run_requests(run_id))
    if record["trials"] > 1:
        trials_stats = over_trials(scores, record["trials"])
        for row in scorer_stats:
            row.update(trials_stats.get(row["scorer"], {}))
    rate = item_error_rate(counts)
    limit = record["fail_on_item_error_rate"]
    return {
        "run_id": run_id,
        "name": record["name"],
        "matrix_id": record["matrix_id"],
        "cell": record["cell"],
        "status": record["status"],
        "error": record.get("error"),
        "planned": record["n_planned"],
        "items": counts,
        "item_error_rate": rate,
        "fail_on_item_error_rate": limit,
        "gate_passed": rate is None or rate <= limit,
        "scorers": scorer_stats,
        "gauges": gauges,
        # Sandboxes whose removal failed: the results stand, but something may be left running.
        "teardown_errors": items["teardown_error"].drop_nulls().head(3).to_list(),
        "n_teardown_errors": items["teardown_error"].is_not_null().sum(),
        "duration_ms": duration,
        "timing_by_model": timing,
        "tokens": {kind: accounting[f"tokens_{kind}"] for kind in _TOKEN_KINDS},
        "cost": {
            "usd": accounting["cost_usd"],
            "completeness": accounting["cost_completeness"],
            "reasons": json.loads(accounting["cost_reasons"]) if accounting["cost_reasons"] else {},
            "generation_usd": accounting["cost_generation_usd"],
            "judging_usd": accounting["cost_judging_usd"],
            "operations": accounting["operations"],
        },
        "accounting": accounting,
        "budget": {
            k: record.get(k)
            for k in ("budget_limit_usd", "budget_spent_usd", "budget_status", "budget_closed_by")
        },
        "caller_cost_usd": caller_cost,
        "wall_ms": record.get("wall_ms"),
    }


_TOKEN_KINDS = ("input", "output", "reasoning", "cached", "cache_write")
_SUMMED = (
    "cost_usd",
    "cost_generation_usd",
    "cost_judging_usd",
    "cost_external_usd",
    "operations",
    "operations_settled",
    "operations_unknown",
    "operations_denied",
    "operations_cached",
)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of Chen et al. (2021): the chance that at least one of k trials drawn
    from n, c of which passed, passes."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def over_trials(scores: pl.DataFrame, trials: int) -> dict[str, dict[str, Any]]:
    """Per scorer: the mean over items of each item's mean over its trials, and pass@k for
    k = 1..trials (a trial passes when it scores 1), over items scored at least k times."""
    per_item = (
        scores.filter(pl.col("outcome") == ScorerOutcome.SCORED)
        .group_by("scorer", "item_id")
        .agg(
            pl.col("score").mean().alias("mean"),
            pl.len().alias("n"),
            (pl.col("score") >= 1.0).sum().alias("c"),
        )
    )
    out = {}
    for scorer, group in per_item.group_by("scorer"):
        rows = group.select("n", "c").rows()
        out[scorer[0]] = {
            "mean_over_trials": group["mean"].mean(),
            "pass_at_k": {
                str(k): sum(pass_at_k(n, c, k) for n, c in rows if n >= k) / sum(1 for n, _ in rows if n >= k)
                for k in range(1, trials + 1)
                if any(n >= k for n, _ in rows)
            },
        }
    return out


def model_timing(items: pl.DataFrame, requests: pl.DataFrame) -> list[dict[str, Any]]:
    """Per generation model: calls, wire / queued / retry ms, and rate-limit retries (429s seen in
    captured requests; null when the run captured none). First-token time needs streaming, which
    the openai target does not use: null."""
    done = items.filter(pl.col("outcome") == ItemOutcome.COMPLETED, pl.col("model").is_not_null())
    rows = (
        done.group_by("model")
        .agg(
            pl.len().alias("calls"),
            pl.col("wire_ms").mean().alias("wire_ms_mean"),
            pl.col("wire_ms").quantile(0.5, "linear").alias("wire_ms_p50"),
            pl.col("wire_ms").quantile(0.95, "linear").alias("wire_ms_p95"),
            pl.col("queued_ms").mean().alias("queued_ms_mean"),
            pl.col("retry_ms").sum().alias("retry_ms_total"),
            pl.col("retries").sum().alias("retries"),
        )
        .sort("model")
        .to_dicts()
    )
    throttled = requests.filter((pl.col("phase") == "attempt") & (pl.col("http_status") == 429))
    for row in rows:
        row["rate_limit_retries"] = (
            throttled.filter(pl.col("model") == row["model"]).height if not requests.is_empty() else None
        )
        row["first_token_ms"] = None
    return rows


def run_accounting(items: pl.DataFrame, scores: pl.DataFrame) -> dict[str, Any]:
    """The run's accounting columns: the sum of its items' (tokens: generation from items plus
    judging from scores); completeness the worst of theirs; reasons merged."""
    sums = items.select(pl.col(c).fill_null(0).sum() for c in _SUMMED).to_dicts()[0]
    for kind in _TOKEN_KINDS:
        column = f"tokens_{kind}"
        sums[column] = int(items[column].fill_null(0).sum() + scores[column].fill_null(0).sum())
    kinds = set(items["cost_completeness"].drop_nulls())
    sums["cost_completeness"] = next(
        (c.value for c in (Completeness.UNVERIFIED, Completeness.INCOMPLETE) if c in kinds),
        Completeness.COMPLETE.value,
    )
    for column in ("cost_reasons", "operations_by_kind"):
        merged = _merge_counts(items[column])
        sums[column] = json.dumps(merged, sort_keys=True) if merged else None
    return sums


def _merge_counts(column: pl.Series) -> dict[str, int]:
    """Sum JSON objects of counts, key by key. Each distinct text is parsed once (most items of a
    run hold the same one): parsing every row was most of closing a 10,000-item run."""
    merged: dict[str, int] = {}
    for text, rows in column.drop_nulls().value_counts().iter_rows():
        for name, n in json.loads(text).items():
            merged[name] = merged.get(name, 0) + n * rows
    return merged


def close_run(
    store: Store,
    run_id: str,
    *,
    wall_ms: float,
    budget: Budget,
    capture: Recorder | None = None,
    stopped: RunStatus | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    """Summarise, apply the gate and record the run's final status; returns the summary.

    Args:
        store: the store.
        run_id: the run.
        wall_ms: how long this execution took.
        budget: the run's budget, recorded on the run.
        capture: the run's request recorder, whose manifest is recorded on the run.
        stopped: `cancelled` or `failed` when the execution stopped before the end: that is the
            run's status, and the planned items without a row are counted as `cancelled`.
        error: why it failed (status `failed`).
    """
    summary = summarise(store, run_id)
    record = store.read_run(run_id)
    del record["run_id"]
    counts = summary["items"]
    if stopped is not None:
        counts[ItemOutcome.CANCELLED] = record["n_planned"] - sum(counts.values())
        status = stopped
    else:
        status = RunStatus.COMPLETED if summary["gate_passed"] else RunStatus.FAILED_GATE
    record.update(
        status=status.value,
        error=error,
        finished_at=datetime.now(UTC),
        item_error_rate=summary["item_error_rate"],
        wall_ms=wall_ms,
        **{f"n_{outcome.value}": counts[outcome.value] for outcome in ItemOutcome},
        **summary.pop("accounting"),
        **budget.columns(),
        **(capture.manifest() if capture is not None else {}),
        timing_by_model=json.dumps(summary["timing_by_model"]),
    )
    store.write_run(run_id, record)
    summary.update(status=status.value, error=error, wall_ms=wall_ms, budget=budget.columns())
    if capture is not None:
        summary["capture"] = capture.manifest()
    return summary


def matrix_summary(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The summaries of a matrix's cells under one status: `failed_gate` when any cell failed."""
    failed = any(cell["status"] == RunStatus.FAILED_GATE for cell in cells)
    return {
        "matrix_id": cells[0]["matrix_id"],
        "name": cells[0]["name"],
        "status": (RunStatus.FAILED_GATE if failed else RunStatus.COMPLETED).value,
        "cells": cells,
    }


def mark_unavailable(store: Store, run_id: str, reasons: list[str]) -> dict[str, Any]:
    """Record that the run could not start (a failed gold check) and why; nothing ran."""
    record = store.read_run(run_id)
    del record["run_id"]
    record.update(
        status=RunStatus.UNAVAILABLE.value,
        unavailable_reason="; ".join(reasons),
        finished_at=datetime.now(UTC),
    )
    store.write_run(run_id, record)
    return {
        "run_id": run_id,
        "name": record["name"],
        "status": RunStatus.UNAVAILABLE.value,
        "reasons": reasons,
    }
