"""The nightly benchmark's bookkeeping: which earlier run is tonight's baseline, and retention.

Nightly runs are runs tagged `nightly`; a night whose run completed and whose comparison passed is
also tagged `nightly-passed`. Tonight's baseline is the latest earlier passed night of the same spec
name — a night that regressed never becomes the baseline, so a regression cannot hide by recurring.
Retention keeps the last N nightly runs per spec name and removes older ones from every dataset.
"""

from __future__ import annotations

import polars as pl

from assay.outcomes import RunKind
from assay.run import record as run_record
from assay.store import Store

NIGHTLY_TAG = "nightly"
PASSED_TAG = "nightly-passed"


def _nightly_runs(store: Store, name: str) -> pl.DataFrame:
    return (
        store.runs()
        .filter(
            (pl.col("name") == name)
            & (pl.col("kind") == RunKind.RUN)
            & pl.col("tags").list.contains(NIGHTLY_TAG)
        )
        .select("run_id", "status", "created_at", "tags")
        .sort("created_at", descending=True)
        .collect()
    )


def last_successful_nightly(store: Store, name: str, *, before: str) -> str | None:
    """The latest passed nightly run of `name` created before run `before`, or None."""
    runs = _nightly_runs(store, name)
    created = runs.filter(pl.col("run_id") == before)["created_at"]
    earlier = runs.filter(pl.col("run_id") != before)
    if len(created):
        earlier = earlier.filter(pl.col("created_at") < created[0])
    passed = earlier.filter(pl.col("tags").list.contains(PASSED_TAG))["run_id"]
    return passed[0] if len(passed) else None


def mark_passed(store: Store, run_id: str) -> None:
    """Tag a night that passed, making it a baseline for the nights after it."""
    run_record.add_tag(store, run_id, PASSED_TAG)


def prune_nightly(store: Store, name: str, *, keep: int) -> list[str]:
    """Remove all but the latest `keep` nightly runs of `name` from every dataset; returns their ids."""
    old = _nightly_runs(store, name)["run_id"].to_list()[keep:]
    for run_id in old:
        store.delete_run(run_id)
    return old
