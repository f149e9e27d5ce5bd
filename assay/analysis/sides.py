"""One side of a comparison: the records, items, scores and gauges of its runs, read from the store.

A side holds its items' narrow columns only (`ITEM_COLUMNS`: what pairing, gates and slices
read); the texts (input, output, error) are read by `texts`, for the items shown, so that two
100,000-item runs compared never hold their inputs and outputs (docs/performance.md).

`assay.analysis.compare` pairs two sides; `assay.analysis.gates` holds each side to its limits;
`assay.analysis.leaderboard` reads each cell of a matrix run as one.
"""

from __future__ import annotations

import polars as pl

from assay.errors import InputError
from assay.outcomes import RowKind, RunStatus, ScorerOutcome
from assay.store import Store, current_items

# The items' columns a comparison reads for every item: keys, outcome, cost and timing for the
# gates, annotations for clusters and slices.
ITEM_COLUMNS = (
    "item_id",
    "trial",
    "retry",
    "item_index",
    "outcome",
    "duration_ms",
    "cost_usd",
    "cost_completeness",
    "cost_reasons",
    "annotations",
)

# The score rows' columns a comparison reads: keys, the scorer and its kind, the value and
# outcome, and the judge's noise. Not the judges' explanations, errors, metadata, tokens or cost
# (a scorer's cost is counted by the run's summary, not compared): holding every column took
# ~110 MB a side at 100,000 items x two scorers.
SCORE_COLUMNS = (
    "item_id",
    "trial",
    "kind",
    "scorer",
    "scorer_kind",
    "score",
    "value",
    "outcome",
    "judge_variance",
    "judge_samples",
)


class Side:
    """One side of a comparison: its runs' records, items and scores."""

    def __init__(self, name: str, store: Store, run_ids: list[str]) -> None:
        self.name = name
        self.store = store
        self.run_ids = run_ids
        self.records = [store.read_run(run_id) for run_id in run_ids]
        for record in self.records:
            if record["status"] == RunStatus.RUNNING:
                raise InputError(
                    f"{name} run {record['run_id']} has not finished (status running): resume it first"
                )
        self.items = pl.concat(
            [self._scan(r, ITEM_COLUMNS).collect().with_columns(pl.lit(r).alias("run_id")) for r in run_ids],
            how="vertical_relaxed",
        )
        # Every row of the scores dataset read once (scores and gauges), its compared columns.
        rows = pl.concat(
            [
                store.scan_run(r, "scores")
                .select(SCORE_COLUMNS)
                .collect()
                .with_columns(pl.lit(r).alias("run_id"))
                for r in run_ids
            ],
            how="vertical_relaxed",
        )
        self.scores = rows.filter(pl.col("kind") == RowKind.SCORE.value)
        self.gauges = rows.filter(pl.col("kind") == RowKind.GAUGE.value)
        self._means: pl.DataFrame | None = None

    def _scan(self, run_id: str, columns: tuple[str, ...]) -> pl.LazyFrame:
        """The current rows of the run's items, lazily, with `columns` (and the keys)."""
        keys = ("item_id", "trial", "retry")
        wanted = [*keys, *(c for c in columns if c not in keys)]
        return current_items(self.store.scan_run(run_id, "items").select(wanted))

    def texts(
        self,
        keys: pl.DataFrame | None = None,
        columns: tuple[str, ...] = ("input", "output", "output_text", "error"),
    ) -> pl.DataFrame:
        """The side's items' `columns` beside `item_id`, `trial` and `run_id`: of the items x
        trials in `keys` (a frame of `item_id`, `trial`), or of every item without it. Read now,
        only those rows' columns."""
        frames = []
        for run_id in self.run_ids:
            rows = self._scan(run_id, columns)
            if keys is not None:
                rows = rows.join(keys.lazy().select("item_id", "trial"), on=["item_id", "trial"], how="semi")
            frames.append(rows.collect().with_columns(pl.lit(run_id).alias("run_id")))
        return pl.concat(frames, how="vertical_relaxed")

    @property
    def label(self) -> str:
        return f"{self.name} {'+'.join(self.run_ids)}"

    def mean_scores(self) -> pl.DataFrame:
        """Per (item_id, trial, scorer): the mean scored value over this side's runs (computed
        once: the comparison and the compare page's changed items both read it)."""
        if self._means is None:
            scored = self.scores.filter(pl.col("outcome") == ScorerOutcome.SCORED)
            keys = ["item_id", "trial", "scorer"]
            # One run scores each item x trial once per scorer: its mean is the score itself, and
            # checking that is ~5x cheaper than grouping by three keys (two of them text).
            repeated = scored.select(pl.struct(keys).is_duplicated().any()).item()
            self._means = (
                scored.group_by(keys).agg(pl.col("score").mean())
                if repeated
                else scored.select(*keys, "score")
            )
        return self._means
