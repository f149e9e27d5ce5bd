"""What the items page and an item's page show, read lazily from a run's parts: a page of items
filtered, sorted and counted by Polars over the Parquet files (only the columns a filter needs,
the texts of the page's rows only), and one item x trial whole. Nothing here knows about HTTP.

A million-item run's page of 50 reads the outcome, index and score columns to filter and sort,
then the 50 rows' texts: never the whole run (benchmarks/view.py)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from assay.errors import InputError
from assay.outcomes import RowKind, RunStatus
from assay.report.conversation import conversations
from assay.report.data import cut, json_text, shown_tool_calls
from assay.run.trajectories import item_trajectory
from assay.store import Store, current_items
from assay.view.diffs import item_diffs
from assay.view.runs import scorer_names

PAGE = 50
# Characters of an input or output shown in a row of the items table.
PREVIEW = 160
# Item sorts besides a scorer's score (`score:<scorer>`).
SORTS = ("item_index", "duration_ms", "cost_usd", "outcome")


class ItemQuery(BaseModel):
    """The items page's filters, sort and page, as its URL holds them.

    Args:
        outcome: only items of this outcome.
        scorer: the scorer `low` and `high` bound.
        low: its score at least this.
        high: its score at most this.
        annotation: `key=value`: only items whose annotation `key` is `value`.
        text: only items whose input or output contains this (case-insensitive).
        sort: `item_index`, `duration_ms`, `cost_usd`, `outcome` or `score:<scorer>`.
        descending: largest first.
        page: the page, from 0.
    """

    model_config = ConfigDict(extra="ignore")

    outcome: str = Field(default="", description="Only items of this outcome.")
    scorer: str = Field(default="", description="The scorer `low` and `high` bound.")
    low: float | None = Field(default=None, description="Its score at least this.")
    high: float | None = Field(default=None, description="Its score at most this.")
    annotation: str = Field(default="", description="`key=value`: items whose annotation `key` is `value`.")
    text: str = Field(default="", description="Items whose input or output contains this.")
    sort: str = Field(default="item_index", description="The column sorted by, or `score:<scorer>`.")
    descending: bool = Field(default=False, description="Largest first.")
    page: int = Field(default=0, ge=0, description="The page, from 0.")


@dataclass
class ItemsPage:
    """One page of a run's items: its rows, how many matched, and the scorers they have."""

    rows: list[dict[str, Any]]
    matched: int
    scorers: list[str]
    pages: int = field(default=1)


def _items(store: Store, record: Any) -> pl.LazyFrame:
    """The run's current item rows, lazily (the retry window only when some row is a retry:
    asked once of a finished run, whose rows no longer change)."""
    run_id = record["run_id"]
    scan = store.scan_run(run_id, "items")
    key = (str(store.root), run_id, record["revision"])
    retried = _retried.get(key)
    if retried is None:
        retried = bool(scan.select(pl.col("retry").max()).collect().item())
        if record["status"] != RunStatus.RUNNING:
            _retried[key] = retried
    return current_items(scan) if retried else scan


_retried: dict[tuple[str, str, int], bool] = {}


def _scores(store: Store, run_id: str) -> pl.LazyFrame:
    return store.scan_run(run_id, "scores").filter(pl.col("kind") == RowKind.SCORE.value)


def _annotation(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise InputError(f"annotation filter {text!r}: write it as key=value")
    return key.strip(), value.strip()


_KEY = re.compile(r"[A-Za-z_][\w-]*")


def annotation_value(key: str) -> pl.Expr:
    """An item's annotation `key` as text (a number as its JSON), null where it has none.

    Raises:
        InputError: `key` is not a name (letters, digits, `_`, `-`).
    """
    if not _KEY.fullmatch(key):
        raise InputError(f"annotation {key!r}: a key is letters, digits, _ and -")
    return pl.col("annotations").str.json_path_match(f"$.{key}")


def items_page(store: Store, run_id: str, query: ItemQuery) -> ItemsPage:
    """The page of the run's items `query` asks for.

    Raises:
        RunNotFoundError: no such run.
        InputError: a filter that cannot be one (an annotation without `=`, a score bound
            without a scorer).
    """
    record = store.read_run(run_id)
    items, scores = _items(store, record), _scores(store, run_id)
    # Joined on (item_index, trial), integers, which name an item x trial of one run as its id does.
    on = ["item_index", "trial"]
    keys = items.select("item_index", "trial", "outcome", "duration_ms", "cost_usd")
    if query.outcome:
        keys = keys.filter(pl.col("outcome") == query.outcome)
    if query.low is not None or query.high is not None:
        if not query.scorer:
            raise InputError("a score range (low, high) needs its scorer")
        bounded = scores.filter(pl.col("scorer") == query.scorer)
        if query.low is not None:
            bounded = bounded.filter(pl.col("score") >= query.low)
        if query.high is not None:
            bounded = bounded.filter(pl.col("score") <= query.high)
        keys = keys.join(bounded.select(on), on=on, how="semi")
    if query.annotation or query.text:
        texts = items.select(*on, "annotations", "input", "output", "output_text")
        if query.annotation:
            key, value = _annotation(query.annotation)
            texts = texts.filter(annotation_value(key) == value)
        if query.text:
            needle = query.text.lower()
            texts = texts.filter(
                pl.any_horizontal(
                    pl.col(c).fill_null("").str.to_lowercase().str.contains(needle, literal=True)
                    for c in ("input", "output", "output_text")
                )
            )
        keys = keys.join(texts.select(on), on=on, how="semi")
    if query.sort.startswith("score:"):
        by_score = scores.filter(pl.col("scorer") == query.sort.removeprefix("score:")).select(
            *on, pl.col("score").alias("_sort")
        )
        keys = keys.join(by_score, on=on, how="left")
        sort_by = "_sort"
    else:
        sort_by = query.sort if query.sort in SORTS else "item_index"
    matching = keys.select(*on, *([sort_by] if sort_by not in on else [])).collect()
    page = (
        matching.sort(
            [sort_by, "item_index", "trial"], descending=[query.descending, False, False], nulls_last=True
        )
        .slice(query.page * PAGE, PAGE)
        .select(on)
    )
    # By item_index, which each part holds in order: the range lets its row groups' statistics
    # skip the rest (Polars prunes on a range, not on a list: ~4x faster at a million items).
    index = page["item_index"]
    wanted = pl.col("item_index").is_between(index.min(), index.max()) & pl.col("item_index").is_in(
        index.implode()
    )
    texts = items.filter(wanted).select(*on, "item_id", "outcome", "input", "output", "output_text", "error")
    full = page.join(texts.collect(), on=on, how="left", maintain_order="left")
    by_item: dict[tuple[int, int], dict[str, float | None]] = {}
    for index, trial, scorer, score in (
        scores.filter(wanted).select(*on, "scorer", "score").collect().iter_rows()
    ):
        by_item.setdefault((index, trial), {})[scorer] = (
            score if score is None or math.isfinite(score) else None
        )
    rows = [
        {
            "item_id": r["item_id"],
            "trial": r["trial"],
            "item_index": r["item_index"],
            "outcome": r["outcome"],
            "input": _preview(json_text(r["input"])),
            "output": _preview(r["output_text"] if r["output_text"] is not None else json_text(r["output"])),
            "error": _preview(r["error"] or ""),
            "scores": by_item.get((r["item_index"], r["trial"]), {}),
        }
        for r in full.iter_rows(named=True)
    ]
    scorers = scorer_names(store, run_id, record["revision"], record["status"])
    matched = matching.height
    return ItemsPage(rows=rows, matched=matched, scorers=scorers, pages=max(1, math.ceil(matched / PAGE)))


def _preview(text: str) -> str:
    return text if len(text) <= PREVIEW else text[:PREVIEW] + "…"


def item_page(store: Store, run_id: str, item_id: str, trial: int) -> dict[str, Any]:
    """Everything stored of one item x trial: input (its conversation as turns when the run's
    spec and dataset can make it again), output, expected, tool calls (and the text beside
    them), reasoning, every score
    with its explanation, the trajectory, captured requests, its kept files and the workspace
    diffs among them (read from the store, each cut to `diffs.DIFF_BYTES`).

    Raises:
        RunNotFoundError: no such run.
        InputError: the run has no such item x trial.
    """
    record = store.read_run(run_id)
    key = (pl.col("item_id") == item_id) & (pl.col("trial") == trial)
    found = _items(store, record).filter(key).collect()
    if found.is_empty():
        raise InputError(f"run {run_id} has no item {item_id!r} (trial {trial})")
    row = found.row(0, named=True)
    scores = _scores(store, run_id).filter(key).sort("scorer").collect().to_dicts()
    requests = store.scan_run(run_id, "requests").filter(
        pl.col("item_id") == item_id, pl.col("trial") == trial
    )
    trajectory = item_trajectory(store, run_id, record, row)
    return {
        "record": record,
        "item": row,
        "turns": _conversations(store, record).get(item_id),
        "input": cut(json_text(row["input"])),
        "expected": cut(json_text(row["expected"])) if row["expected"] is not None else None,
        "output": cut(row["output_text"] if row["output_text"] is not None else json_text(row["output"])),
        "annotations": json.loads(row["annotations"]) if row["annotations"] else {},
        "tool_calls": shown_tool_calls(row.get("tool_calls")),
        "tool_call_text": cut(row["tool_call_text"]) if row.get("tool_call_text") is not None else None,
        "reasoning": cut(row["reasoning"]) if row.get("reasoning") else None,
        "scores": scores,
        "steps": trajectory.document().get("steps", []) if trajectory is not None else [],
        "requests": [
            {**r, "request": cut(json_text(r["request"])), "response": cut(json_text(r["response"]))}
            for r in requests.sort("started_at").collect().to_dicts()
        ],
        "files": list(row.get("artifacts") or []),
        "diffs": item_diffs(store, list(row.get("artifacts") or [])),
    }


@lru_cache(maxsize=8)
def _conversations_of(store_root: str, run_id: str, spec_json: str, spec_path: str) -> dict[str, Any]:
    return conversations({"spec_json": spec_json, "spec_path": spec_path})


def _conversations(store: Store, record: Any) -> dict[str, Any]:
    """The run's items' conversations (`assay.report.conversation`), made once per run."""
    return _conversations_of(
        str(store.root), record["run_id"], record.get("spec_json") or "", record.get("spec_path") or ""
    )
