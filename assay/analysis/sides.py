"""One side of a comparison: the records, items, scores and gauges of its runs, read from the store.

`assay.analysis.compare` pairs two sides; `assay.analysis.gates` holds each side to its limits;
`assay.analysis.leaderboard` reads each cell of a matrix run as one.
"""

from __future__ import annotations

import polars as pl

from assay.errors import InputError
from assay.outcomes import RowKind, RunStatus, ScorerOutcome
from assay.store import Store


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
            [store.run_items(r).with_columns(pl.lit(r).alias("run_id")) for r in run_ids],
            how="vertical_relaxed",
        )
        self.scores = pl.concat(
            [store.run_scores(r).with_columns(pl.lit(r).alias("run_id")) for r in run_ids],
            how="vertical_relaxed",
        )
        self.gauges = pl.concat(
            [
                store.run_scores(r, kind=RowKind.GAUGE).with_columns(pl.lit(r).alias("run_id"))
                for r in run_ids
            ],
            how="vertical_relaxed",
        )

    @property
    def label(self) -> str:
        return f"{self.name} {'+'.join(self.run_ids)}"

    def mean_scores(self) -> pl.DataFrame:
        """Per (item_id, trial, scorer): the mean scored value over this side's runs."""
        return (
            self.scores.filter(pl.col("outcome") == ScorerOutcome.SCORED)
            .group_by("item_id", "trial", "scorer")
            .agg(pl.col("score").mean())
        )
