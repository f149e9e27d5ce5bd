"""The statistics a run's summary is made of (`assay.analysis.summary`), each over a run's rows read
(a frame) or to be read (a lazy frame over its parts, `Store.scan_run`), of which it reads only
the columns it uses: per-scorer statistics, failures grouped, gauges, pass@k over trials, first-token timing per model,
batches, the run's accounting.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from assay._lazy import lazy_module
from assay.calls.accounting import Price, PriceTable
from assay.outcomes import (
    TOKEN_COLUMNS,
    BatchState,
    Completeness,
    ItemOutcome,
    RequestPhase,
    ScorerOutcome,
    SpendKind,
    spend_column,
)

if TYPE_CHECKING:
    import polars as pl

    Rows = pl.DataFrame | pl.LazyFrame
    """A run's rows read (a frame), or to be read (a lazy frame over its parts)."""
else:
    pl = lazy_module("polars")

# Polars' in-memory engine, not its streaming one: its sums and means add a column's floats in
# the order of the parts (as a run's rows read whole did), so the same run always gets the same
# digits; the streaming engine's differ in the last place. What keeps a summary small is reading
# only the columns it needs, which both engines do.
ENGINE = "in-memory"


SUMMED = (
    "cost_usd",
    *(spend_column(kind) for kind in SpendKind),
    "operations",
    "operations_settled",
    "operations_unknown",
    "operations_denied",
    "operations_cached",
    "operations_batched",
)


FAILURE_GROUPS = 5


def failure_groups(items: Rows, limit: int = FAILURE_GROUPS) -> list[dict[str, Any]]:
    """The failed items grouped by their error message, most frequent first (ties in dataset
    order): `[{"error": "connection refused by 127.0.0.1:8799", "n": 30}]`. Past `limit` groups,
    the rest are one last group with `error` None.

    Args:
        items: a run's item rows.
        limit: how many groups to name.
    """
    groups = (
        items.lazy()
        .filter(pl.col("outcome") == ItemOutcome.FAILED)
        .group_by("error")
        .agg(pl.len().alias("n"), pl.col("item_index").min().alias("first"))
        .sort(["n", "first"], descending=[True, False])
        .select("error", "n")
        .collect(engine=ENGINE)
        .to_dicts()
    )
    if len(groups) > limit:
        groups = [*groups[:limit], {"error": None, "n": sum(g["n"] for g in groups[limit:])}]
    return groups


def quantiles(column: pl.Expr, prefix: str = "") -> list[pl.Expr]:
    """The mean, min, p50, p95 and max of a column, named `<prefix>mean` and so on."""
    return [
        column.mean().alias(f"{prefix}mean"),
        column.min().alias(f"{prefix}min"),
        column.quantile(0.5, interpolation="linear").alias(f"{prefix}p50"),
        column.quantile(0.95, interpolation="linear").alias(f"{prefix}p95"),
        column.max().alias(f"{prefix}max"),
    ]


# `measured` belongs to gauge rows, which are not scorers: no count column for it.
SCORER_OUTCOMES = [outcome for outcome in ScorerOutcome if outcome is not ScorerOutcome.MEASURED]


def scorer_stats_of(scores: Rows) -> list[dict[str, Any]]:
    """Per scorer, sorted by name: the mean, min, p50, p95 and max of its scores, how many rows
    had each outcome (`SCORER_OUTCOMES`), and its first error in dataset order (`first_error`,
    None when it never failed).

    Args:
        scores: a run's score rows (not its gauges).
    """
    # Three queries, each over only the rows it needs (the scored ones, the failed ones): one
    # over every row holding the scores, errors, item indexes and trials together was twice the
    # peak of a large run's summary (docs/performance.md).
    counts = (
        scores.lazy()
        .group_by("scorer")
        .agg(
            *((pl.col("outcome") == outcome.value).sum().alias(outcome.value) for outcome in SCORER_OUTCOMES)
        )
        .sort("scorer")
        # Counts, exact in any order: streamed, so the names are never all held (~75 MB at a
        # million items x two scorers).
        .collect(engine="streaming")
        .to_dicts()
    )
    spread = quantiles(pl.col("score"))
    # A query per scorer, holding only its scores: grouped, the quantiles gathered every scorer's
    # rows at once with their names (~110 MB more at a million items x two scorers).
    scored = scores.lazy().filter(pl.col("outcome") == ScorerOutcome.SCORED)
    of_scored = {
        row["scorer"]: scored.filter(pl.col("scorer") == row["scorer"])
        .select(*spread)
        .collect(engine=ENGINE)
        .to_dicts()[0]
        for row in counts
        if row[ScorerOutcome.SCORED.value]
    }
    unscored = dict.fromkeys(expr.meta.output_name() for expr in spread)
    stats = [{"scorer": row["scorer"], **of_scored.get(row["scorer"], unscored), **row} for row in counts]
    first_errors = dict(
        scores.lazy()
        .filter(pl.col("outcome") == ScorerOutcome.FAILED)
        .group_by("scorer")
        .agg(pl.col("error").sort_by("item_index", "trial").first())
        .collect(engine=ENGINE)
        .iter_rows()
    )
    for row in stats:
        row["first_error"] = first_errors.get(row["scorer"])
    return stats


def gauge_stats(gauges: Rows) -> list[dict[str, Any]]:
    """Per gauge: how many item x trials measured it, and the mean, min, p50, p95 and max of its
    value. Only items that have the gauge count (an unknown value is no row, not a 0).

    Args:
        gauges: a run's gauge rows (`Store.run_scores(run_id, kind=RowKind.GAUGE)`).
    """
    # Which gauges there are, streamed (most runs have none: the scores' names are then never
    # held), then a query per gauge holding only its values, as `scorer_stats_of` does.
    names = gauges.lazy().select(pl.col("scorer").unique()).collect(engine="streaming")["scorer"].sort()
    return [
        {
            "gauge": name,
            **gauges.lazy()
            .filter(pl.col("scorer") == name)
            .select(pl.len().alias("n"), *quantiles(pl.col("value")))
            .collect(engine=ENGINE)
            .to_dicts()[0],
        }
        for name in names
    ]


def unpriced_models(record: dict[str, Any], items: Rows, scores: Rows) -> list[str]:
    """The models that answered in a run (targets and judges) but have no price in its table
    (the shipped one under the spec's `prices`), sorted.

    Args:
        record: the run's record.
        items: its item rows.
        scores: its score rows.
    """
    spec = json.loads(record["spec_json"]) if record.get("spec_json") else {}
    table = PriceTable.shipped(
        {name: Price.model_validate(p) for name, p in (spec.get("prices") or {}).items()}
    )
    used = {model for rows in (items, scores) for model in _distinct(rows, "model")}
    return sorted(model for model in used if model not in table.prices)


def _distinct(rows: Rows, column: str) -> list[Any]:
    """The distinct non-null values of one column."""
    return rows.lazy().select(pl.col(column).drop_nulls().unique()).collect(engine=ENGINE)[column].to_list()


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of Chen et al. (2021): the chance that at least one of k trials drawn
    from n, c of which passed, passes."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def over_trials(scores: Rows, trials: int) -> dict[str, dict[str, Any]]:
    """Per scorer: the mean over items of each item's mean over its trials, and pass@k for
    k = 1..trials (a trial passes when it scores 1), over items scored at least k times."""
    per_item = (
        scores.lazy()
        .filter(pl.col("outcome") == ScorerOutcome.SCORED)
        .group_by("scorer", "item_id")
        .agg(
            pl.col("score").mean().alias("mean"),
            pl.len().alias("n"),
            (pl.col("score") >= 1.0).sum().alias("c"),
        )
        .collect(engine=ENGINE)
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


def model_timing(items: Rows, requests: Rows) -> list[dict[str, Any]]:
    """Per generation model: calls, wire / queued / retry ms, rate-limit retries (429s seen in
    captured requests; null when the run captured none), and the p50 / p95 of each call's total
    time (`duration_ms`) and, for streamed calls (`streamed_calls` of them), of its time to the
    first token (null when no call streamed)."""
    done = items.lazy().filter(pl.col("outcome") == ItemOutcome.COMPLETED, pl.col("model").is_not_null())
    if "first_token_ms" not in done.collect_schema().names():  # parts written before streaming existed
        done = done.with_columns(pl.lit(None, pl.Float64).alias("first_token_ms"))
    rows = (
        done.group_by("model")
        .agg(
            pl.len().alias("calls"),
            pl.col("wire_ms").mean().alias("wire_ms_mean"),
            pl.col("wire_ms").quantile(0.5, "linear").alias("wire_ms_p50"),
            pl.col("wire_ms").quantile(0.95, "linear").alias("wire_ms_p95"),
            pl.col("duration_ms").quantile(0.5, "linear").alias("total_ms_p50"),
            pl.col("duration_ms").quantile(0.95, "linear").alias("total_ms_p95"),
            pl.col("first_token_ms").count().alias("streamed_calls"),
            pl.col("first_token_ms").quantile(0.5, "linear").alias("first_token_ms_p50"),
            pl.col("first_token_ms").quantile(0.95, "linear").alias("first_token_ms_p95"),
            pl.col("queued_ms").mean().alias("queued_ms_mean"),
            pl.col("retry_ms").sum().alias("retry_ms_total"),
            pl.col("retries").sum().alias("retries"),
        )
        .sort("model")
        .collect(engine=ENGINE)
        .to_dicts()
    )
    if not rows:
        return rows
    requests = requests.lazy()
    captured = requests.select(pl.len()).collect(engine=ENGINE).item() > 0
    throttled = dict(
        requests.filter((pl.col("phase") == RequestPhase.ATTEMPT) & (pl.col("http_status") == 429))
        .group_by("model")
        .len()
        .collect(engine=ENGINE)
        .iter_rows()
    )
    for row in rows:
        row["rate_limit_retries"] = throttled.get(row["model"], 0) if captured else None
    return rows


def answer_stats(completed: pl.Expr) -> list[pl.Expr]:
    """The completed items answered by tool calls, their calls, and those whose model reasoned
    (its reasoning tokens counted: the reasoning text itself is never read for a summary)."""
    calls = pl.col("tool_calls").filter(completed)
    return [
        calls.is_not_null().sum().alias("answers_tool_calls"),
        calls.list.len().sum().alias("answers_calls"),
        (pl.col("tokens_reasoning").filter(completed).fill_null(0) > 0).sum().alias("answers_reasoned"),
    ]


def batch_stats(batches: pl.DataFrame) -> dict[str, Any] | None:
    """Batch mode's provider batches (`batches/`, each in its latest state): how many are in
    progress and ended, the requests they hold and the provider's counts once ended — in all,
    and `by_purpose` (the target's, `target`, and each batched judge's, `judge <scorer>`); None
    when the run made none."""
    if batches.is_empty():
        return None
    labelled = batches.with_columns(
        pl.when(pl.col("purpose") == SpendKind.JUDGING)
        .then(pl.concat_str(pl.lit("judge "), pl.col("scorer")))
        .otherwise(pl.lit("target"))
        .alias("label")
    )
    groups = sorted(labelled.partition_by("label", as_dict=True).items(), key=lambda kv: kv[0] != ("target",))
    return {
        **_batch_counts(batches),
        "ids": batches["batch_id"].to_list(),
        "by_purpose": [{"label": label, **_batch_counts(group)} for (label,), group in groups],
    }


def _batch_counts(batches: pl.DataFrame) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for text in batches["request_counts"].drop_nulls():
        for name, n in json.loads(text).items():
            counts[name] = counts.get(name, 0) + n
    return {
        "batches": batches.height,
        "in_progress": int((batches["state"] == BatchState.IN_PROGRESS).sum()),
        "ended": int((batches["state"] == BatchState.ENDED).sum()),
        "requests": int(batches["requests"].sum()),
        "request_counts": counts,
    }


def run_accounting(items: Rows, scores: Rows) -> dict[str, Any]:
    """The run's accounting columns: the sum of its items' (tokens: generation from items plus
    judging from scores); completeness the worst of theirs; reasons merged."""
    sums = (
        items.lazy()
        .select(
            *(pl.col(c).fill_null(0).sum() for c in SUMMED),
            *(pl.col(c).fill_null(0).sum().alias(f"items {c}") for c in TOKEN_COLUMNS),
        )
        .collect(engine=ENGINE)
        .to_dicts()[0]
    )
    judged = (
        scores.lazy()
        .select(pl.col(c).fill_null(0).sum() for c in TOKEN_COLUMNS)
        .collect(engine=ENGINE)
        .to_dicts()[0]
    )
    for column in TOKEN_COLUMNS:
        sums[column] = int(sums.pop(f"items {column}") + judged[column])
    kinds = set(_distinct(items, "cost_completeness"))
    sums["cost_completeness"] = next(
        (c.value for c in (Completeness.UNVERIFIED, Completeness.INCOMPLETE) if c in kinds),
        Completeness.COMPLETE.value,
    )
    for column in ("cost_reasons", "operations_by_kind"):
        merged = _merge_counts(items, column)
        sums[column] = json.dumps(merged, sort_keys=True) if merged else None
    return sums


def _merge_counts(rows: Rows, column: str) -> dict[str, int]:
    """Sum JSON objects of counts, key by key. Each distinct text is parsed once (most items of a
    run hold the same one): parsing every row was most of closing a 10,000-item run."""
    merged: dict[str, int] = {}
    texts = rows.lazy().select(column).drop_nulls().group_by(column).len().collect(engine=ENGINE)
    for text, n_rows in texts.iter_rows():
        for name, n in json.loads(text).items():
            merged[name] = merged.get(name, 0) + n * n_rows
    return merged
