"""A run's summary, computed with Polars from what the store holds, and the item-error-rate gate.

The summary is computed from the committed Parquet parts, not from memory, so a resumed run's
summary covers the items of every execution, exactly once each.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import polars as pl

from assay.outcomes import ItemOutcome, RunStatus, ScorerOutcome
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


def summarise(store: Store, run_id: str) -> dict[str, Any]:
    """The summary of one stored run: outcome counts, per-scorer statistics, durations, gate.

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
                for outcome in (ScorerOutcome.SCORED, ScorerOutcome.FAILED, ScorerOutcome.SKIPPED)
            ),
        )
        .sort("scorer")
        .to_dicts()
    )
    duration = items.select(_quantiles(pl.col("duration_ms"))).to_dicts()[0]
    # null, not 0, when no item reported a figure: "unknown" and "none" differ.
    totals = items.select(
        pl.when(pl.col(c).is_not_null().any()).then(pl.col(c).sum()).alias(c)
        for c in ("tokens_input", "tokens_output", "tokens_reasoning", "tokens_cached", "caller_cost_usd")
    ).to_dicts()[0]
    rate = item_error_rate(counts)
    limit = record["fail_on_item_error_rate"]
    return {
        "run_id": run_id,
        "name": record["name"],
        "matrix_id": record["matrix_id"],
        "cell": record["cell"],
        "status": record["status"],
        "planned": record["n_planned"],
        "items": counts,
        "item_error_rate": rate,
        "fail_on_item_error_rate": limit,
        "gate_passed": rate is None or rate <= limit,
        "scorers": scorer_stats,
        "duration_ms": duration,
        "tokens": {kind: totals[f"tokens_{kind}"] for kind in ("input", "output", "reasoning", "cached")},
        "caller_cost_usd": totals["caller_cost_usd"],
        "wall_ms": record.get("wall_ms"),
    }


def close_run(store: Store, run_id: str, *, wall_ms: float) -> dict[str, Any]:
    """Summarise, apply the gate and record the run's final status; returns the summary."""
    summary = summarise(store, run_id)
    record = store.read_run(run_id)
    del record["run_id"]
    counts = summary["items"]
    status = RunStatus.COMPLETED if summary["gate_passed"] else RunStatus.FAILED_GATE
    record.update(
        status=status.value,
        finished_at=datetime.now(UTC),
        item_error_rate=summary["item_error_rate"],
        wall_ms=wall_ms,
        **{f"n_{outcome.value}": counts[outcome.value] for outcome in ItemOutcome},
        **{f"tokens_{kind}": n for kind, n in summary["tokens"].items()},
    )
    store.write_run(run_id, record)
    summary.update(status=status.value, wall_ms=wall_ms)
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
