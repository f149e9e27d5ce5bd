"""The compare (triage) page's data: two runs paired by item (`assay.analysis.compare`: per
scorer the delta, its interval and its adjusted verdict), the items whose score changed ranked by
what each does to the delta, their outputs side by side with a word diff, and the delta per slice
of an annotation. Its URL (`CompareQuery`) holds the whole state. Nothing here knows about HTTP."""

from __future__ import annotations

import difflib
import json
import re
from collections import OrderedDict
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from assay.analysis.compare import CompareOptions, Comparison, compare, load_sides
from assay.analysis.sides import Side
from assay.outcomes import Adjustment
from assay.report import figures
from assay.report.data import json_text
from assay.store import Store
from assay.view.items import annotation_value

FLIPS = 20
# Characters of an output the word diff compares (difflib is quadratic in the worst case).
DIFFED = 4_000
# Annotations offered as slices: the keys of the first this many items.
_SLICE_PROBE = 1_000
_WORDS = re.compile(r"\s+|[^\s]+")
# Comparisons kept: each holds both runs' items (~100 MB for two runs of 100,000).
_KEPT = 2
_kept: OrderedDict[tuple[Any, ...], tuple[Side, Side, Comparison]] = OrderedDict()


class CompareQuery(BaseModel):
    """The compare page's state, as its URL holds it.

    Args:
        a: the baseline run.
        b: the candidate run.
        scorer: the scorer whose changed items are listed (default: the first compared).
        slice: an annotation key: the delta per value of it.
        adjust: the adjustment of the verdicts over the scorers (`holm`, `bh`, `none`).
        page: the page of changed items, from 0.
        matrix: a matrix both runs are cells of: the page shows its cell picker.
    """

    model_config = ConfigDict(extra="ignore")

    a: str = Field(description="The baseline run.")
    b: str = Field(description="The candidate run.")
    scorer: str = Field(default="", description="The scorer whose changed items are listed.")
    slice: str = Field(default="", description="An annotation key: the delta per value of it.")
    adjust: Adjustment = Field(default=Adjustment.NONE, description="How verdicts are adjusted.")
    page: int = Field(default=0, ge=0, description="The page of changed items, from 0.")
    matrix: str = Field(default="", description="A matrix both runs are cells of (its cell picker shown).")


def compare_page(store: Store, query: CompareQuery) -> dict[str, Any]:
    """Everything the compare page shows.

    Raises:
        RunNotFoundError: a run is not in the store.
        InputError: the runs cannot be compared (one is running; nothing pairs).
    """
    base, cand, document = _compared(store, query.a, query.b, query.adjust)
    compared = [row["scorer"] for row in document["scorers"] if row.get("n_pairs")]
    scorer = query.scorer if query.scorer in compared else compared[0]
    pairs = _pairs(base, cand, scorer)
    changed = pairs.filter(pl.col("d") != 0).sort(
        [pl.col("d").abs(), "d", "item_index", "trial"], descending=[True, False, False, False]
    )
    shown = changed.slice(query.page * FLIPS, FLIPS)
    return {
        "document": document,
        "forest": figures.forest(document["scorers"]),
        "scorer": scorer,
        "compared": compared,
        "n_pairs": pairs.height,
        "n_changed": changed.height,
        "n_worse": changed.filter(pl.col("d") < 0).height,
        "flips": _sides_of(base, cand, shown, pairs.height),
        "pages": max(1, -(-changed.height // FLIPS)),
        "slice": query.slice,
        "slice_keys": _annotation_keys(base),
        "slices": _slices(base, pairs, query.slice) if query.slice else [],
    }


def _compared(store: Store, a: str, b: str, adjust: Adjustment) -> tuple[Side, Side, Comparison]:
    """Both sides and their comparison, kept for the last `_KEPT` pairs of runs (by their
    records' revisions): turning a page or a scorer re-runs no bootstrap."""
    key = (str(store.root), a, store.read_run(a)["revision"], b, store.read_run(b)["revision"], adjust)
    if key not in _kept:
        base, cand = load_sides(store, [a], [b])
        _kept[key] = (base, cand, compare(base, cand, CompareOptions(adjust=adjust)))
        while len(_kept) > _KEPT:
            _kept.popitem(last=False)
    _kept.move_to_end(key)
    return _kept[key]


def _pairs(base: Side, cand: Side, scorer: str) -> pl.DataFrame:
    """The item x trials both sides scored with `scorer`: baseline, candidate and their difference."""
    b = (
        base.mean_scores()
        .filter(pl.col("scorer") == scorer)
        .select("item_id", "trial", pl.col("score").alias("sb"))
    )
    c = (
        cand.mean_scores()
        .filter(pl.col("scorer") == scorer)
        .select("item_id", "trial", pl.col("score").alias("sc"))
    )
    index = base.items.select("item_id", "trial", "item_index").unique(["item_id", "trial"])
    return (
        b.join(c, on=["item_id", "trial"])
        .filter(pl.col("sb").is_finite() & pl.col("sc").is_finite())
        .with_columns((pl.col("sc") - pl.col("sb")).alias("d"))
        .join(index, on=["item_id", "trial"], how="left")
    )


def _sides_of(base: Side, cand: Side, shown: pl.DataFrame, n_pairs: int) -> list[dict[str, Any]]:
    """The shown changed items with both sides' input, outputs and errors, and their word diff."""
    wanted = shown.select("item_id", "trial")

    def texts(side: Side) -> dict[tuple[str, int], dict[str, Any]]:
        rows = side.texts(wanted, ("input", "output", "output_text", "error", "outcome")).unique(
            ["item_id", "trial"]
        )
        return {(r["item_id"], r["trial"]): r for r in rows.iter_rows(named=True)}

    before, after = texts(base), texts(cand)
    out = []
    for r in shown.iter_rows(named=True):
        key = (r["item_id"], r["trial"])
        b, c = before.get(key, {}), after.get(key, {})
        b_text, c_text = _output(b), _output(c)
        out.append(
            {
                **r,
                # The item's share of the mean delta: its difference over the pairs.
                "effect": r["d"] / n_pairs,
                "input": json_text(b.get("input"))[:DIFFED],
                "baseline": {"outcome": b.get("outcome"), "error": b.get("error"), "diff": []},
                "candidate": {"outcome": c.get("outcome"), "error": c.get("error"), "diff": []},
            }
        )
        out[-1]["baseline"]["diff"], out[-1]["candidate"]["diff"] = word_diff(b_text, c_text)
    return out


def _output(row: dict[str, Any]) -> str:
    if not row:
        return ""
    return row["output_text"] if row.get("output_text") is not None else json_text(row.get("output"))


def word_diff(before: str, after: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Both texts cut into runs of words, each marked `same`, `del` (only before) or `ins` (only
    after), by difflib over words and the spaces between them.

    Args:
        before: the baseline's text.
        after: the candidate's.
    """
    a, b = _WORDS.findall(before[:DIFFED]), _WORDS.findall(after[:DIFFED])
    left: list[tuple[str, str]] = []
    right: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            left.append(("same", "".join(a[i1:i2])))
            right.append(("same", "".join(b[j1:j2])))
            continue
        if i2 > i1:
            left.append(("del", "".join(a[i1:i2])))
        if j2 > j1:
            right.append(("ins", "".join(b[j1:j2])))
    return left, right


def _annotation_keys(side: Side) -> list[str]:
    keys: set[str] = set()
    for text in side.items["annotations"].head(_SLICE_PROBE).drop_nulls():
        value = json.loads(text)
        if isinstance(value, dict):
            keys.update(value)
    return sorted(keys)


def _slices(base: Side, pairs: pl.DataFrame, key: str) -> list[dict[str, Any]]:
    """Per value of the annotation `key` (the baseline's items'): pairs, mean delta, items worse
    and better."""
    values = base.items.select(
        "item_id",
        "trial",
        annotation_value(key).fill_null("(none)").alias("value"),
    ).unique(["item_id", "trial"])
    return (
        pairs.join(values, on=["item_id", "trial"], how="left")
        .group_by("value")
        .agg(
            pl.len().alias("n"),
            pl.col("sb").mean().alias("baseline"),
            pl.col("sc").mean().alias("candidate"),
            pl.col("d").mean().alias("delta"),
            (pl.col("d") < 0).sum().alias("worse"),
            (pl.col("d") > 0).sum().alias("better"),
        )
        .sort("delta")
        .to_dicts()
    )
