"""What the report shows, computed from the store with Polars: plain functions over one run (and,
for the baseline section, over both sides of a comparison). Nothing here knows about HTML."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import polars as pl

from assay.analysis.intervals import score_interval
from assay.analysis.summary import summarise
from assay.analysis.tallies import SUMMED
from assay.outcomes import TOKEN_COLUMNS, Completeness, ItemOutcome, RowKind, ScorerOutcome, SpendKind
from assay.store import Store, current_items

if TYPE_CHECKING:
    from assay.analysis.sides import Side

# Long text is stored in the page only up to FULL_TEXT_LIMIT characters (the rest is dropped,
# with a note).
FULL_TEXT_LIMIT = 20_000
# The item browser holds a run's first BROWSED item x trials (dataset order) and the failures
# section its first LISTED failures: a page of a million items was 365 MB and took 52 s to write
# (docs/performance.md). `assay view` browses, filters and searches them all.
BROWSED = 2_000
LISTED = 500
# The items' and scores' columns the report's figures and tables read, for every row...
_ITEM_COLUMNS = (
    "item_id",
    "trial",
    "retry",
    "item_index",
    "model",
    "outcome",
    "error",
    *(f"failure_{name}" for name in ("kind", "provider", "http_status", "retryable", "request_id")),
    "duration_ms",
    "cost_completeness",
    "cost_reasons",
    *SUMMED,
    *TOKEN_COLUMNS,
)
_SCORE_COLUMNS = (
    "item_id",
    "trial",
    "item_index",
    "scorer",
    "scorer_kind",
    "score",
    "outcome",
    "error",
    "model",
    "operations",
    "cost_usd",
    "cost_completeness",
    "cost_reasons",
    *TOKEN_COLUMNS,
)
# ... and the items' columns only the browser shows, read for its rows alone.
_TEXTS = (
    "input",
    "expected",
    "output",
    "output_text",
    "tool_calls",
    "tool_call_text",
    "reasoning",
    "artifacts",
)
# Items whose scores changed most, shown side by side with the baseline.
CHANGED_ITEMS = 20


class RunData:
    """One run's record and summary, read once, and its items and scores as lazy frames over its
    parts: each figure and table reads its own columns from them (a million items' columns held
    at once peaked at ~1.2 GB).

    Args:
        store: the store.
        run_id: the run.
    """

    def __init__(self, store: Store, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.record = store.read_run(run_id)
        self.summary = summarise(store, run_id)
        # In the parts' order, never sorted whole: what is shown in dataset order is sorted as
        # it is picked (`browsed`, `failed_items`).
        items = store.scan_run(run_id, "items").select(_ITEM_COLUMNS)
        # Without a retry every row is current: no window over a million item ids to say so.
        retried = items.select(pl.col("retry").max()).collect().item()
        self.items: pl.LazyFrame = current_items(items) if retried else items
        self.scores: pl.LazyFrame = (
            store.scan_run(run_id, "scores")
            .filter(pl.col("kind") == RowKind.SCORE.value)
            .select(_SCORE_COLUMNS)
        )
        self.n_items: int = self.items.select(pl.len()).collect().item()
        kinds = self.scores.select("scorer", "scorer_kind").unique("scorer").collect()
        self.scorers: list[str] = sorted(kinds["scorer"].to_list())
        self.kinds: dict[str, str] = dict(kinds.iter_rows())

    def browsed(self) -> pl.DataFrame:
        """The browser's rows: the first `BROWSED` current item x trials, with their texts."""
        shown = self.items.bottom_k(BROWSED, by=["item_index", "trial"]).sort("item_index", "trial").collect()
        if shown.is_empty():
            return shown.with_columns(*(pl.lit(None).alias(name) for name in _TEXTS))
        last = shown["item_index"].max()
        texts = (
            self.store.scan_run(self.run_id, "items")
            .filter(pl.col("item_index") <= last)
            .select("item_id", "trial", "retry", *_TEXTS)
            .collect()
        )
        return shown.join(texts, on=["item_id", "trial", "retry"], how="left", maintain_order="left")


# -- text -----------------------------------------------------------------------------------------


def json_text(value: str | None) -> str:
    """The text of a JSON text column: a string as itself, anything else as indented JSON.

    Args:
        value: the column's value (JSON text, or None).
    """
    if value is None:
        return ""
    try:
        parsed = json.loads(value)
    except (TypeError, ValueError):
        return str(value)
    if isinstance(parsed, str):
        return parsed
    return json.dumps(parsed, indent=1, ensure_ascii=False)


def cut(text: str | None) -> str:
    """`text` ("" for None) up to FULL_TEXT_LIMIT characters, with a note when it was longer.

    Args:
        text: the text.
    """
    text = text or ""
    if len(text) <= FULL_TEXT_LIMIT:
        return text
    return text[:FULL_TEXT_LIMIT] + f"\n… (cut in this report: {len(text):,} characters in all)"


def merge_reasons(column: pl.Series) -> dict[str, int]:
    """The counts of a column of JSON `{reason: n}` objects, added up.

    Args:
        column: the `cost_reasons` column.
    """
    merged: dict[str, int] = {}
    for text in column.drop_nulls():
        for name, n in json.loads(text).items():
            merged[name] = merged.get(name, 0) + n
    return merged


# -- scores ---------------------------------------------------------------------------------------


def scored_values(data: RunData, scorer: str) -> pl.Series:
    """Every value `scorer` gave (item × trial), in the parts' order.

    Args:
        data: the run.
        scorer: the scorer's name.
    """
    frame = data.scores.filter(pl.col("scorer") == scorer, pl.col("outcome") == ScorerOutcome.SCORED)
    return frame.select("score").collect()["score"].drop_nulls()


def scorer_outcomes(data: RunData) -> dict[str, dict[str, int]]:
    """Per scorer: how many of its rows ended in each outcome.

    Args:
        data: the run.
    """
    counts: dict[str, dict[str, int]] = {s: {} for s in data.scorers}
    for scorer, outcome, n in data.scores.group_by("scorer", "outcome").len().collect().iter_rows():
        counts[scorer][outcome] = n
    return counts


def scorer_table(data: RunData) -> list[dict[str, Any]]:
    """Per scorer: kind, scored count, mean and 95 % CI (`score_interval`: Wilson for a binary
    scorer below 300 scores, else Student t; ``ci_method`` says which),
    quantiles and the other outcomes' counts.

    Args:
        data: the run.
    """
    rows = []
    outcomes = scorer_outcomes(data)
    for scorer in data.scorers:
        values = scored_values(data, scorer).to_numpy()
        low, high, method = score_interval(values)
        rows.append(
            {
                "scorer": scorer,
                "kind": data.kinds.get(scorer),
                "n": int(values.size),
                "mean": float(values.mean()) if values.size else None,
                "ci_low": None if math.isnan(low) else low,
                "ci_high": None if math.isnan(high) else high,
                "ci_method": method.value,
                "min": float(values.min()) if values.size else None,
                "median": float(pl.Series(values).median()) if values.size else None,
                "max": float(values.max()) if values.size else None,
                "outcomes": outcomes[scorer],
            }
        )
    return rows


# -- cost -----------------------------------------------------------------------------------------


def item_costs(data: RunData) -> dict[str, Any]:
    """What the run's items say about cost: `known` (the cost of each item that made model calls,
    unknown as 0), `incomplete` (items whose accounting is not complete) and their `reasons`.

    Args:
        data: the run.
    """
    items = data.items
    measured = items.filter(pl.col("operations").fill_null(0) > 0)  # items that made model calls
    incomplete = items.filter(pl.col("cost_completeness") != Completeness.COMPLETE).select(pl.len())
    return {
        "known": measured.select(pl.col("cost_usd").fill_null(0)).collect()["cost_usd"],
        "incomplete": incomplete.collect().item(),
        "reasons": merge_reasons(items.select("cost_reasons").drop_nulls().collect()["cost_reasons"]),
    }


def _generation_rows(data: RunData) -> list[dict[str, Any]]:
    """Per target model: the items' tokens and cost, the judging share taken out."""
    fallback = data.record.get("model") or f"({data.record.get('target_kind') or 'target'})"
    spent = ("operations", "cost_reasons", "cost_completeness", "cost_generation_usd", *TOKEN_COLUMNS)
    keyed = data.items.select("item_id", "trial", pl.col("model").fill_null(fallback).alias("key"), *spent)
    keys = sorted(keyed.select(pl.col("key").unique()).collect()["key"].to_list())
    # Each model's rows read as it is summed (one model, most runs: every row, no join).
    judging = data.scores.select("item_id", "trial", "operations", "cost_reasons")
    if len(keys) == 1:
        # One target model (most runs): its items are every item, its judging every score; no
        # join of a million item ids.
        groups = [(keys[0], keyed, judging)]
    else:
        judging = judging.join(keyed.select("item_id", "trial", "key"), on=["item_id", "trial"])
        groups = [
            (key, keyed.filter(pl.col("key") == key), judging.filter(pl.col("key") == key)) for key in keys
        ]
    timing = {row["model"]: row for row in data.summary.get("timing_by_model") or []}
    rows: list[dict[str, Any]] = []
    for key, rows_of, judged_of in groups:
        group = rows_of.drop("item_id", "trial").collect()
        judged = judged_of.select("operations", "cost_reasons").collect()
        reasons = merge_reasons(group["cost_reasons"])
        for name, n in merge_reasons(judged["cost_reasons"]).items():
            reasons[name] = reasons.get(name, 0) - n
        reasons = {k: n for k, n in reasons.items() if n > 0}
        unverified = (group["cost_completeness"] == Completeness.UNVERIFIED).any()
        completeness = (
            Completeness.UNVERIFIED
            if unverified
            else Completeness.INCOMPLETE
            if reasons
            else Completeness.COMPLETE
        )
        t = timing.get(key, {})
        rows.append(
            {
                "role": SpendKind.GENERATION.value,
                "model": key,
                "items": group.height,
                "calls": int(
                    group["operations"].fill_null(0).sum() - judged["operations"].fill_null(0).sum()
                ),
                **{column: int(group[column].fill_null(0).sum()) for column in TOKEN_COLUMNS},
                "cost_usd": float(group["cost_generation_usd"].fill_null(0).sum()),
                "completeness": completeness.value,
                "reasons": reasons,
                "wire_ms_p50": t.get("wire_ms_p50"),
                "wire_ms_p95": t.get("wire_ms_p95"),
            }
        )
    return rows


def _judging_rows(data: RunData) -> list[dict[str, Any]]:
    """Per (model-graded scorer, judge model): the scores' tokens and cost."""
    scores = data.scores
    judged = (
        scores.filter(pl.col("model").is_not_null() | (pl.col("operations").fill_null(0) > 0))
        .drop("item_id", "item_index", "score", "error")
        .collect()
    )
    rows: list[dict[str, Any]] = []
    for (scorer, model), group in sorted(
        judged.with_columns(pl.col("model").fill_null("(unknown)")).group_by("scorer", "model"),
        key=lambda kv: (str(kv[0][0]), str(kv[0][1])),
    ):
        kinds = set(group["cost_completeness"].drop_nulls().to_list())
        completeness = next(
            (c.value for c in (Completeness.UNVERIFIED, Completeness.INCOMPLETE) if c in kinds),
            Completeness.COMPLETE.value,
        )
        rows.append(
            {
                "role": f"{SpendKind.JUDGING} · {scorer}",
                "model": model,
                "items": group.height,
                "calls": int(group["operations"].fill_null(0).sum()),
                **{column: int(group[column].fill_null(0).sum()) for column in TOKEN_COLUMNS},
                "cost_usd": float(group["cost_usd"].fill_null(0).sum()),
                "completeness": completeness,
                "reasons": merge_reasons(group["cost_reasons"]),
                "wire_ms_p50": None,
                "wire_ms_p95": None,
            }
        )
    return rows


def model_rows(data: RunData) -> list[dict[str, Any]]:
    """Tokens and cost per (role, model): generation from the items (their judging share taken
    out), judging from the scores of model-graded scorers.

    Args:
        data: the run.
    """
    return _generation_rows(data) + _judging_rows(data)


# -- items ----------------------------------------------------------------------------------------


def failed_items(data: RunData) -> list[dict[str, Any]]:
    """The first `LISTED` items (× trials) that failed, in dataset order, with their failure's
    kind, provider and HTTP status.

    Args:
        data: the run.
    """
    failed = data.items.filter(pl.col("outcome") == ItemOutcome.FAILED)
    return (
        failed.bottom_k(LISTED, by=["item_index", "trial"]).sort("item_index", "trial").collect().to_dicts()
    )


def failed_scores(data: RunData) -> list[dict[str, Any]]:
    """The first `LISTED` scores whose scorer failed (item, scorer, error), in dataset order.

    Args:
        data: the run.
    """
    failed = data.scores.filter(pl.col("outcome") == ScorerOutcome.FAILED)
    order = ["item_index", "trial", "scorer"]
    return failed.bottom_k(LISTED, by=order).sort(order).collect().to_dicts()


def shown_tool_calls(value: Any) -> list[dict[str, Any]] | None:
    """An item's `tool_calls` column as the browser shows them: each call's name, id and
    arguments (indented JSON, or the text as the model wrote it)."""
    if not value:
        return None
    shown = []
    for call in value:
        arguments = call.get("arguments")
        try:
            arguments = json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
        except (TypeError, ValueError):
            arguments = "" if arguments is None else str(arguments)
        shown.append({"name": call.get("name") or "", "id": call.get("id") or "", "arguments": arguments})
    return shown


def browser_rows(data: RunData) -> list[dict[str, Any]]:
    """One row per item × trial the browser holds (`RunData.browsed`): scores by scorer (null when
    not scored, with the scorer's outcome) and the item's texts, cut to FULL_TEXT_LIMIT.

    Args:
        data: the run.
    """
    browsed = data.browsed()
    last = browsed["item_index"].max() if browsed.height else -1
    by_item: dict[tuple[str, int], dict[str, Any]] = {}
    for item_id, trial, scorer, score, outcome in (
        data.scores.filter(pl.col("item_index") <= last)
        .select("item_id", "trial", "scorer", "score", "outcome")
        .collect()
        .iter_rows()
    ):
        by_item.setdefault((item_id, trial), {})[scorer] = (score, outcome)
    rows = []
    for r in browsed.iter_rows(named=True):
        scored = by_item.get((r["item_id"], r["trial"]), {})
        rows.append(
            {
                "id": r["item_id"],
                "trial": r["trial"],
                "outcome": r["outcome"],
                "scores": {
                    s: (v if v is not None and math.isfinite(v) else None) for s, (v, _) in scored.items()
                },
                "states": {s: o for s, (_, o) in scored.items() if o != ScorerOutcome.SCORED},
                "input": cut(json_text(r["input"])),
                "expected": cut(json_text(r["expected"])) if r["expected"] is not None else "",
                "output": cut(r["output_text"] if r["output_text"] is not None else json_text(r["output"])),
                "error": cut(r["error"]),
                # A reply of tool calls and a reasoning model's reasoning (null for a plain run).
                "tool_calls": shown_tool_calls(r.get("tool_calls")),
                # What the reply said beside its calls (the calls stay the answer).
                "tool_call_text": cut(r["tool_call_text"]) if r.get("tool_call_text") else None,
                "reasoning": cut(r["reasoning"]) if r.get("reasoning") else None,
                # Files the attempt kept, linked from its row; a workspace folder is one link.
                "files": [f for f in r.get("artifacts") or [] if not f.endswith("/workspace")],
            }
        )
    return rows


def changed_items(base: Side, cand: Side, limit: int = CHANGED_ITEMS) -> list[dict[str, Any]]:
    """The (item_id, trial) pairs whose scores (or outcome) changed most, largest change first
    (regressions before improvements of the same size).

    Args:
        base: the baseline side.
        cand: the candidate side.
        limit: how many to return.
    """

    def scores(side: Side) -> dict[tuple[str, int], dict[str, float]]:
        out: dict[tuple[str, int], dict[str, float]] = {}
        for item_id, trial, scorer, score in side.mean_scores().iter_rows():
            out.setdefault((item_id, trial), {})[scorer] = score
        return out

    def items(side: Side) -> dict[tuple[str, int], dict[str, Any]]:
        frame = side.texts(columns=("item_index", "input", "expected", "outcome", "output", "error")).unique(
            ["item_id", "trial"], keep="first", maintain_order=True
        )
        return {(r["item_id"], r["trial"]): r for r in frame.iter_rows(named=True)}

    def side_of(row: dict[str, Any] | None) -> tuple[str | None, str | None, str | None]:
        return (row["outcome"], row["output"], row["error"]) if row else (None, None, None)

    b_scores, c_scores, b_items, c_items = scores(base), scores(cand), items(base), items(cand)
    out = []
    for key in set(b_items) | set(c_items):
        before, after = b_scores.get(key, {}), c_scores.get(key, {})
        deltas = {s: (before.get(s), after.get(s)) for s in sorted(set(before) | set(after))}
        change = sum(abs(a - b) for b, a in deltas.values() if a is not None and b is not None)
        signed = sum(a - b for b, a in deltas.values() if a is not None and b is not None)
        b_row, c_row = b_items.get(key), c_items.get(key)
        outcome_changed = (b_row or {}).get("outcome") != (c_row or {}).get("outcome")
        if change == 0 and not outcome_changed:
            continue
        first = b_row or c_row or {}
        out.append(
            {
                "item_id": key[0],
                "trial": key[1],
                "index": first.get("item_index") or 0,
                "input": first.get("input"),
                "expected": first.get("expected"),
                "baseline": side_of(b_row),
                "candidate": side_of(c_row),
                "scores": deltas,
                "change": change + (1 if outcome_changed else 0),
                "signed": signed,
            }
        )
    out.sort(key=lambda r: (-r["change"], r["signed"], r["index"], r["trial"]))
    return out[:limit]
