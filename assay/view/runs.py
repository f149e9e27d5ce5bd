"""What the runs page and a run's page show, read from the store: every run's record with its main
scores and their intervals, and one run's summary (`assay show`'s, `summarise`) with its charts'
figures. Nothing here knows about HTTP or HTML."""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import polars as pl

from assay.analysis.intervals import moments_interval
from assay.analysis.summary import RunSummary, summarise
from assay.outcomes import ItemOutcome, RowKind, RunStatus, ScorerOutcome
from assay.report import figures
from assay.store import Store

# The runs page's columns, as the store's `runs` holds them.
LISTED = (
    "run_id",
    "name",
    "model",
    "kind",
    "status",
    "created_at",
    "tags",
    "matrix_id",
    "cell",
    "n_planned",
    "n_completed",
    "n_failed",
    "cost_usd",
    "revision",
)
# What the runs page can be sorted by (the query's `sort`).
SORTS = ("created_at", "name", "model", "status", "n_planned", "cost_usd")
# The main scores shown per run on the runs page.
MAIN_SCORERS = 3
# Finished runs' scores never change: kept for this many runs, by (store, run id, revision).
_CACHED_RUNS = 512
_score_cache: OrderedDict[tuple[str, str, int], list[dict[str, Any]]] = OrderedDict()
# The runs page reads its runs' means side by side (`run_list`).
_cache_lock = threading.Lock()
# A run of at most this many items has its scorers' means read in one grouped query (a few MB);
# a larger one, a query per scorer (`scorer_means`).
_GROUPED_UP_TO = 100_000
# The runs page's runs read at once: each is a few small queries that wait mostly on the files
# (or the bucket), not the CPU.
_READERS = 8
_CACHED_PAGES = 16
# The record's columns the run page does not list: JSON it shows otherwise, or not at all.
_UNSHOWN = ("spec_json", "target_snapshot", "identity", "summary_json")
_page_cache: OrderedDict[tuple[str, str, int], dict[str, Any]] = OrderedDict()


def run_list(
    store: Store,
    *,
    text: str = "",
    status: str = "",
    matrix: str = "",
    sort: str = "created_at",
    descending: bool = True,
) -> list[dict[str, Any]]:
    """Every run's current record (newest first by default), filtered and sorted, each with its
    main scorers' means and intervals (`scorer_means`).

    Args:
        store: the store.
        text: only runs whose id, name, model, cell or a tag contains this (case-insensitive).
        status: only runs of this status.
        matrix: only the cells of this matrix.
        sort: one of SORTS.
        descending: largest (newest) first.
    """
    runs = store.runs().select(*LISTED)
    if status:
        runs = runs.filter(pl.col("status") == status)
    if matrix:
        runs = runs.filter(pl.col("matrix_id") == matrix)
    if text:
        needle = text.lower()
        runs = runs.filter(
            pl.concat_str(
                "run_id",
                pl.col("name").fill_null(""),
                pl.col("model").fill_null(""),
                pl.col("cell").fill_null(""),
                pl.col("tags").list.join(" ").fill_null(""),
                separator=" ",
            )
            .str.to_lowercase()
            .str.contains(needle, literal=True)
        )
    key = sort if sort in SORTS else "created_at"
    rows = runs.sort(key, descending=descending, nulls_last=True).collect().to_dicts()

    def means(row: dict[str, Any]) -> list[dict[str, Any]]:
        return scorer_means(store, row["run_id"], row["revision"], row["status"], row["n_planned"])

    with ThreadPoolExecutor(max_workers=_READERS) as pool:
        for row, found in zip(rows, pool.map(means, rows), strict=True):
            row["scores"] = found[:MAIN_SCORERS]
    return rows


def running(rows: list[dict[str, Any]]) -> bool:
    """Whether any of these runs is still running (its page polls for changes)."""
    return any(row["status"] == RunStatus.RUNNING for row in rows)


def scorer_means(
    store: Store, run_id: str, revision: int = 0, status: str = "", items: int | None = None
) -> list[dict[str, Any]]:
    """Per scorer of the run: its scored count, mean and 95 % CI (`score_interval`), by name.
    Only the scores' `scorer`, `score` and `outcome` columns are read; a finished run's answer is
    kept (`_CACHED_RUNS`).

    Args:
        store: the store.
        run_id: the run.
        revision: its record's revision (a new one may hold new scores).
        status: its status (a running run's scores are read each time).
        items: the items it planned, when known: a run of at most `_GROUPED_UP_TO` is read in one
            query grouped by scorer, a larger one (or one of unknown size) a query per scorer.
    """
    key = (str(store.root), run_id, revision)
    with _cache_lock:
        if status != RunStatus.RUNNING and key in _score_cache:
            _score_cache.move_to_end(key)
            return _score_cache[key]
    finite = pl.col("score").filter(pl.col("score").is_finite())
    moments_of = (
        finite.len().alias("n"),
        finite.mean().alias("mean"),
        finite.std(ddof=1).alias("sd"),
        finite.sum().alias("sum"),
        finite.is_in([0.0, 1.0]).all().alias("binary"),
    )
    scored = _scored(store, run_id)
    if items is not None and items <= _GROUPED_UP_TO:
        moments = scored.group_by("scorer").agg(*moments_of).sort("scorer").collect().to_dicts()
    else:
        # A query per scorer holding only its scores: grouped by name, a million items x two
        # scorers held every name too (~80 MB more).
        moments = [
            {
                "scorer": name,
                **scored.filter(pl.col("scorer") == name).select(*moments_of).collect().to_dicts()[0],
            }
            for name in scorer_names(store, run_id, revision, status)
        ]
    means = []
    for row in moments:
        successes = int(row["sum"]) if row["binary"] and row["n"] else None
        low, high, method = moments_interval(row["n"], row["mean"], row["sd"], successes)
        means.append(
            {
                "scorer": row["scorer"],
                "n": row["n"],
                "mean": row["mean"] if row["n"] else None,
                "ci_low": None if math.isnan(low) else low,
                "ci_high": None if math.isnan(high) else high,
                "ci_method": method.value,
            }
        )
    if status != RunStatus.RUNNING:
        with _cache_lock:
            _score_cache[key] = means
            while len(_score_cache) > _CACHED_RUNS:
                _score_cache.popitem(last=False)
    return means


def _scored(store: Store, run_id: str) -> pl.LazyFrame:
    return store.scan_run(run_id, "scores").filter(
        pl.col("kind") == RowKind.SCORE.value, pl.col("outcome") == ScorerOutcome.SCORED.value
    )


def scorer_names(store: Store, run_id: str, revision: int = 0, status: str = "") -> list[str]:
    """The run's scorers that scored some item, sorted (their names streamed from the parts,
    never all held); a finished run's kept, as `scorer_means` keeps its means."""
    key = (str(store.root), run_id, revision)
    if status != RunStatus.RUNNING and key in _names_cache:
        return _names_cache[key]
    names = _scored(store, run_id).select(pl.col("scorer").unique()).collect(engine="streaming")
    shown = sorted(names["scorer"])
    if status != RunStatus.RUNNING:
        _names_cache[key] = shown
        while len(_names_cache) > _CACHED_RUNS:
            _names_cache.pop(next(iter(_names_cache)))
    return shown


_names_cache: dict[tuple[str, str, int], list[str]] = {}


def run_page(store: Store, run_id: str) -> dict[str, Any]:
    """What a run's page shows: its record, its summary (`assay show`'s), its scorers' means and
    intervals, and the figures (scores, latency, cost, rate control). A finished run's page is
    kept (`_CACHED_PAGES`, by revision): its charts scan its parts.

    Raises:
        RunNotFoundError: no such run.
    """
    record = store.read_run(run_id)
    key = (str(store.root), run_id, record["revision"])
    if key in _page_cache:
        _page_cache.move_to_end(key)
        return _page_cache[key]
    page = _run_page(store, run_id, record)
    if record["status"] != RunStatus.RUNNING:
        _page_cache[key] = page
        while len(_page_cache) > _CACHED_PAGES:
            _page_cache.popitem(last=False)
    return page


def _run_page(store: Store, run_id: str, record: Any) -> dict[str, Any]:
    # The charts' queries run beside the summary's: many of each are small and wait on the
    # parts' footers more than on the CPU.
    with ThreadPoolExecutor(max_workers=1) as pool:
        drawn = pool.submit(_charts, store, run_id, record)
        summary: RunSummary = summarise(store, run_id, record=record)
        means, charts = drawn.result()
    stats = {row["scorer"]: row for row in summary["scorers"]}
    scorers = [{**stats.get(m["scorer"], {}), **m} for m in means]
    if summary.get("rate_control") and summary["rate_control"].get("history"):
        charts.append(figures.rate_history(summary["rate_control"]))
    record = {k: v for k, v in record.items() if k not in _UNSHOWN}
    return {"record": record, "summary": summary, "scorers": scorers, "charts": charts}


def _charts(store: Store, run_id: str, record: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """The run's scorer means (`scorer_means`) and the charts drawn from its parts: the means
    with their intervals, latency and cost."""
    means = scorer_means(store, run_id, record["revision"], record["status"])
    shown = [row for row in means if row["mean"] is not None]
    charts = [figures.score_means(shown)] if shown else []
    charts.append(_latency(store, run_id))
    if (cost := _cost(store, run_id)) is not None:
        charts.append(cost)
    return means, charts


# Bars, not points: a histogram of a million durations is drawn from its counts.
_BINS = 30


def _latency(store: Store, run_id: str) -> str:
    """The items' durations, completed and failed stacked, counted into bins by Polars."""
    timed = store.scan_run(run_id, "items").filter(pl.col("duration_ms").is_not_null())
    top = timed.select(pl.col("duration_ms").max()).collect().item()
    width = figures.nice_bin(float(top or 0.0), _BINS)
    counts = figures.bin_counts(timed, "duration_ms", width, by="outcome")
    series = {
        outcome.value: [(start, n) for kind, start, n in counts if kind == outcome]
        for outcome in (ItemOutcome.COMPLETED, ItemOutcome.FAILED)
    }
    return figures.binned("latency", "Latency per item", "duration ms", width, series, "items")


def _cost(store: Store, run_id: str) -> str | None:
    """The measured items' cost per item, counted into bins; None when no item made a call."""
    known = (
        store.scan_run(run_id, "items")
        .filter(pl.col("operations").fill_null(0) > 0)
        .select(pl.col("cost_usd").fill_null(0))
    )
    top = known.select(pl.col("cost_usd").max()).collect().item()
    if top is None or not float(top) > 0:
        return None
    width = figures.nice_bin(float(top), _BINS)
    bins = [(start, n) for _, start, n in figures.bin_counts(known, "cost_usd", width)]
    return figures.binned("cost", "Known cost per item", "USD per item", width, {"items": bins}, "items")
