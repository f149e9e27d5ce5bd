"""What a run's summary computes from its parts — outcome counts, scorer and gauge statistics,
durations, failures, timing, batches and spend (`part_figures`) — and the copy of them a run's
closing record keeps (`runs.summary_json`: `keep_figures`, `kept_figures`).

The rest of a summary is its record's (`assay.analysis.summary`). The statistics are
`assay.analysis.tallies`'.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from assay import _schema
from assay._lazy import lazy_module
from assay.analysis.tallies import (
    ENGINE,
    SUMMED,
    answer_stats,
    batch_stats,
    failure_groups,
    gauge_stats,
    model_timing,
    over_trials,
    quantiles,
    run_accounting,
    scorer_stats_of,
    unpriced_models,
)
from assay.outcomes import TOKEN_COLUMNS, FailureKind, FinishReason, ItemOutcome, RowKind
from assay.store import Store, current_items

if TYPE_CHECKING:
    import polars as pl

    from assay.analysis.tallies import Rows
else:
    pl = lazy_module("polars")


# The columns of items, scores and requests that `part_figures` reads (tests/analysis/test_summary.py
# summarises a run that exercises every statistic through them).
_SUMMARY_COLUMNS = (
    (
        "item_id",
        "trial",
        "retry",
        "item_index",
        "outcome",
        "error",
        "failure_kind",
        "finish_reason",
        "model",
        "duration_ms",
        "wire_ms",
        "first_token_ms",
        "queued_ms",
        "retry_ms",
        "retries",
        "caller_cost_usd",
        "teardown_error",
        "cost_completeness",
        "cost_reasons",
        "operations_by_kind",
        "tool_calls",
        *SUMMED,
        *TOKEN_COLUMNS,
    ),
    (
        "item_id",
        "item_index",
        "trial",
        "kind",
        "scorer",
        "score",
        "value",
        "outcome",
        "error",
        "model",
        *TOKEN_COLUMNS,
    ),
    ("phase", "http_status", "model"),
)


@dataclass(frozen=True, slots=True)
class RunRows:
    """The rows of one run a summary is computed from.

    Args:
        history: every item row, the failed ones a retry replaced included.
        scores: its scores dataset's rows: scores and gauges.
        requests: its captured requests.
    """

    history: Rows
    scores: Rows
    requests: Rows

    @classmethod
    def scan(cls, store: Store, run_id: str) -> RunRows:
        """Lazy views of the run's parts (`Store.scan_run`), not read yet."""
        return cls(*(store.scan_run(run_id, dataset) for dataset in ("items", "scores", "requests")))

    def narrow(self) -> RunRows:
        """Lazy views of only the columns the summary's statistics use, never the items' inputs,
        outputs and metadata: each statistic reads its own columns from the parts and aggregates
        them, none held for the next (figures: docs/performance.md)."""
        return RunRows(
            *(
                rows.lazy().select(columns)
                for rows, columns in zip(
                    (self.history, self.scores, self.requests), _SUMMARY_COLUMNS, strict=True
                )
            )
        )


# The version of `part_figures`' keys and meaning: a record that kept another's is summarised
# from its parts again (what an older Assay kept may lack a figure this one shows).
FIGURES_VERSION = 1


def kept_figures(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """The figures a finished run's record kept (`part_figures`, as `close_run` computed them);
    None for a running run, one changed since, or one an Assay of other figures closed."""
    kept = record.get("summary_json")
    if not kept:
        return None
    figures: dict[str, Any] = json.loads(kept)
    return figures if figures.pop("version", None) == FIGURES_VERSION else None


def part_figures(
    store: Store, run_id: str, record: _schema.RunRecord, rows: RunRows | None = None
) -> dict[str, Any]:
    """What a run's summary computes from its parts (the rest is its record's): the outcome
    counts, scorer and gauge statistics, durations, failures, timing, batches and spend. The same
    for a run's closing record as for the record it ran under, so `close_run` keeps them in the
    record it closes the run with (`runs.summary_json`).

    Args:
        store: the store.
        run_id: the run.
        record: its record (its `trials`, spec and model for the statistics that need them).
        rows: its rows; default its parts' (`RunRows.scan`).
    """
    rows = (rows or RunRows.scan(store, run_id)).narrow()
    history = rows.history
    # Without a retry every row is current: no window over 100,000s of item ids (~25 MB) to say so.
    retried = history.lazy().select(pl.col("retry").max()).collect(engine=ENGINE).item()
    items = current_items(history) if retried else history
    scores = rows.scores.filter(pl.col("kind") == RowKind.SCORE.value)

    counts = {outcome.value: 0 for outcome in ItemOutcome}
    for outcome, n in items.lazy().group_by("outcome").len().collect(engine=ENGINE).iter_rows():
        counts[outcome] = n
    failed = items.lazy().filter(pl.col("outcome") == ItemOutcome.FAILED)
    scorer_stats = scorer_stats_of(scores)
    if record["trials"] > 1:
        trials_stats = over_trials(scores, record["trials"])
        for row in scorer_stats:
            row.update(trials_stats.get(row["scorer"], {}))
    item_stats = (
        items.lazy()
        .select(
            # Over completed items only, as the seed: a failure's duration (a timeout, a refused
            # connection) measures the failure, not the target.
            *quantiles(pl.col("duration_ms").filter(pl.col("outcome") == ItemOutcome.COMPLETED)),
            # null, not 0, when no item reported one: "unknown" and "none" differ.
            pl.when(pl.col("caller_cost_usd").is_not_null().any())
            .then(pl.col("caller_cost_usd").sum())
            .alias("caller_cost_usd"),
            # Sandboxes whose removal failed: the results stand, but something may be left running.
            pl.col("teardown_error").drop_nulls().head(3).implode().alias("teardown_errors"),
            pl.col("teardown_error").is_not_null().sum().alias("n_teardown_errors"),
            *answer_stats(pl.col("outcome") == ItemOutcome.COMPLETED),
        )
        .collect(engine=ENGINE)
        .to_dicts()[0]
    )
    caller_cost = item_stats.pop("caller_cost_usd")
    teardown_errors = item_stats.pop("teardown_errors")
    n_teardown_errors = item_stats.pop("n_teardown_errors")
    answers = {key: int(item_stats.pop(f"answers_{key}") or 0) for key in ("tool_calls", "calls", "reasoned")}
    # What was spent counts every row, the failed ones a retry replaced included.
    accounting = run_accounting(history, scores)
    reasons = json.loads(accounting["cost_reasons"]) if accounting["cost_reasons"] else {}
    return {
        "items": counts,
        "failure_kinds": _counts(FailureKind, failed, "failure_kind"),
        "finish_reasons": _counts(FinishReason, items.lazy(), "finish_reason"),
        "failures": failure_groups(items),
        "scorers": scorer_stats,
        "gauges": gauge_stats(rows.scores.filter(pl.col("kind") == RowKind.GAUGE.value)),
        "teardown_errors": teardown_errors,
        "n_teardown_errors": n_teardown_errors,
        "duration_ms": item_stats,
        "timing_by_model": model_timing(items, rows.requests),
        "batches": batch_stats(store.run_batches(run_id)),
        "answers": answers,
        "accounting": accounting,
        "caller_cost_usd": caller_cost,
        "unpriced_models": unpriced_models(record, items, scores) if "unpriced" in reasons else [],
    }


def keep_figures(figures: dict[str, Any]) -> str:
    """`part_figures` as a record keeps them (`runs.summary_json`): JSON, with their version."""
    return json.dumps({"version": FIGURES_VERSION, **figures})


def _counts(words: type[StrEnum], rows: pl.LazyFrame, column: str) -> dict[str, int]:
    """How many rows hold each word of `words` in `column`, every word a key (nulls not counted)."""
    counts = {word.value: 0 for word in words}
    grouped = rows.filter(pl.col(column).is_not_null()).group_by(column).len().collect(engine=ENGINE)
    for word, n in grouped.iter_rows():
        counts[word] = n
    return counts
