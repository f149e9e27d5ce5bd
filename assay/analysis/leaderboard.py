"""The leaderboard of a matrix run: cells ranked per scorer, each compared with a baseline cell.

Written to `<store>/leaderboards/matrix_id=<id>/leaderboard-<revision>.parquet` (a rebuild adds a
revision), so the terminal, the report and analysts read the same table.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import polars as pl

from assay.analysis.compare import CompareOptions, adjust_verdicts, scorer_rows
from assay.analysis.error_rates import item_error_rate
from assay.analysis.intervals import score_interval
from assay.analysis.sides import Side
from assay.errors import InputError
from assay.outcomes import Adjustment, Completeness, ItemOutcome, ScorerOutcome
from assay.store import Store


def _cell_figures(store: Store, run_id: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    items = store.run_items(run_id)
    scores = store.run_scores(run_id).filter(pl.col("outcome") == ScorerOutcome.SCORED)
    completed = items.filter(pl.col("outcome") == ItemOutcome.COMPLETED)
    # A cost per item only when every item's accounting is complete: an unpriced $0 is not free.
    priced = not completed.is_empty() and (completed["cost_completeness"] == Completeness.COMPLETE).all()
    run = {
        "item_error_rate": item_error_rate(dict(items.group_by("outcome").len().iter_rows())),
        "cost_per_item_usd": float(completed["cost_usd"].mean()) if priced else None,
        "latency_p50_ms": completed["duration_ms"].quantile(0.5, "linear"),
        "latency_p95_ms": completed["duration_ms"].quantile(0.95, "linear"),
    }
    per_scorer = {}
    for scorer, values in scores.group_by("scorer").agg(pl.col("score")).iter_rows():
        low, high, method = score_interval(values)
        per_scorer[scorer] = {
            "n_scored": len(values),
            "mean": sum(values) / len(values),
            "ci_low": low,
            "ci_high": high,
            "ci_method": method.value,
        }
    return run, per_scorer


def build_leaderboard(
    store: Store, matrix_id: str, *, baseline_cell: str | None = None, options: CompareOptions | None = None
) -> dict[str, Any]:
    """Rank a matrix's cells per scorer and compare each with the baseline cell; store the table.

    Args:
        store: the store.
        matrix_id: the matrix (its cells' runs share it).
        baseline_cell: the cell others are compared with; default the spec's first cell.
        options: bootstrap settings, thresholds and the adjustment (`adjust`, over each scorer's
            cells) of the paired comparisons.
    """
    options = options or CompareOptions()
    cells = (
        store.runs()
        .filter(pl.col("matrix_id") == matrix_id)
        .sort("created_at")  # cells are recorded in the spec's order
        .select("cell", "run_id", "name", "model", "tags")
        .collect()
    )
    if cells.is_empty():
        raise InputError(f"no matrix {matrix_id!r} in store {str(store.root)!r}")
    run_of = dict(cells.select("cell", "run_id").iter_rows())
    baseline_cell = baseline_cell or cells["cell"][0]
    if baseline_cell not in run_of:
        raise InputError(f"--baseline {baseline_cell!r}: the matrix's cells are {', '.join(run_of)}")

    baseline = Side("baseline", store, [run_of[baseline_cell]])
    created = datetime.now(UTC)
    # Each cell against the baseline, scorer by scorer; a scorer's cells are one family to adjust.
    single = options.model_copy(update={"adjust": Adjustment.NONE})
    paired: dict[str, dict[str, dict[str, Any]]] = {
        cell: {
            row["scorer"]: dict(row)
            for row in scorer_rows(baseline, Side("candidate", store, [run_id]), single)
        }
        for cell, run_id in run_of.items()
        if cell != baseline_cell
    }
    for scorer in {scorer for rows in paired.values() for scorer in rows}:
        family = [rows[scorer] for rows in paired.values() if scorer in rows]
        adjust_verdicts(family, options.adjust, 1 - options.confidence)
    rows = []
    for cell, run_id in run_of.items():
        run, per_scorer = _cell_figures(store, run_id)
        for scorer, figures in per_scorer.items():
            versus = paired.get(cell, {}).get(scorer, {})
            rows.append(
                {
                    "created_at": created,
                    "cell": cell,
                    "run_id": run_id,
                    "scorer": scorer,
                    **figures,
                    **run,
                    "baseline_cell": baseline_cell,
                    "delta_vs_baseline": versus.get("delta"),
                    "delta_ci_low": versus.get("ci_low"),
                    "delta_ci_high": versus.get("ci_high"),
                    "delta_ci_method": versus.get("ci_method"),
                    "verdict_vs_baseline": versus.get("verdict"),
                    "adjustment": versus.get("adjustment"),
                    "p_adjusted": versus.get("p_adjusted"),
                }
            )
    table = (
        pl.DataFrame(rows)
        .with_columns(pl.col("mean").rank("min", descending=True).over("scorer").cast(pl.Int32).alias("rank"))
        .sort("scorer", "rank", "cell")
    )
    ranked = table.to_dicts()
    store.write_leaderboard(matrix_id, ranked)
    # Each cell's run as the terminal names it: its model (and cell, tags), not its id alone.
    runs = {
        row["run_id"]: {key: row[key] for key in ("name", "model", "cell", "tags")}
        for row in cells.to_dicts()
    }
    return {"matrix_id": matrix_id, "baseline_cell": baseline_cell, "rows": ranked, "runs": runs}
