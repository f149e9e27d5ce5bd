"""What each section of the page gets: the values its template prints (still plain data: the
templates escape them), the figures it draws, and the sentences that depend on the figures."""

from __future__ import annotations

from typing import Any

from assay.errors import InputError
from assay.links import view_compare, view_items, view_run
from assay.numbers import pct, rate_facts, rate_worth_showing, reasons_text
from assay.outcomes import ItemOutcome, ScorerOutcome
from assay.report import data as queries
from assay.report import figures
from assay.report.conversation import conversations
from assay.report.data import RunData
from assay.store import Store

# Long text is cut in the page (with a "more" toggle) past this many characters or five lines.
CLIP_CHARS = 280
# Rows of the item browser shown at once (the "show more" button adds as many again).
BROWSER_PAGE = 200


def is_long(text: str) -> bool:
    """Whether a text box starts cut, with a "more" toggle (the browser's script decides alike).

    Args:
        text: the box's text.
    """
    return len(text) > CLIP_CHARS or text.count("\n") > 4


def header(data: RunData) -> dict[str, Any]:
    """The run's facts: identity, status, model, dates, item coverage and gate, cost.

    Args:
        data: the run.
    """
    r, s = data.record, data.summary
    counts = s["items"]
    planned = r["n_planned"] or sum(counts.values())
    done = counts.get(ItemOutcome.COMPLETED, 0)
    others = ", ".join(
        f"{n} {outcome}" for outcome, n in counts.items() if n and outcome != ItemOutcome.COMPLETED
    )
    coverage = f"{done} of {planned} completed ({pct(done / planned if planned else None)})"
    gate = "passed" if s["gate_passed"] else "FAILED"
    return {
        "name": r["name"],
        "run_id": data.run_id,
        "kind": r.get("kind"),
        "matrix_id": r.get("matrix_id"),
        "cell": r.get("cell"),
        "source_run_id": r.get("source_run_id"),
        "status": r["status"],
        "model": r.get("model") or r.get("target_kind"),
        "created": r.get("created_at"),
        "finished": r.get("finished_at"),
        "wall": f"{r['wall_ms'] / 1000:.2f} s" if r.get("wall_ms") else "–",
        "coverage": coverage + (f" · {others}" if others else ""),
        "rate": f"item error rate {pct(s['item_error_rate'])} "
        f"(limit {pct(s['fail_on_item_error_rate'], 0)}, gate {gate})",
        "trials": r.get("trials"),
        "seed": r.get("seed"),
        "cost": s["cost"],
        "tags": r.get("tags") or [],
        "view_url": view_run(data.run_id),
    }


def scores(data: RunData) -> dict[str, Any]:
    """Each scorer's statistics, its mean with CI and its distribution as figures.

    Args:
        data: the run.
    """
    rows = queries.scorer_table(data)
    for row in rows:
        others = [f"{n} {o}" for o, n in sorted(row["outcomes"].items()) if o != ScorerOutcome.SCORED and n]
        row["not_scored"] = ", ".join(others) if others else "–"
    shown = [row for row in rows if row["mean"] is not None]
    return {
        "rows": rows,
        "means": figures.score_means(shown) if shown else None,
        "distributions": figures.score_distributions(data, shown) if shown else None,
    }


def timing(data: RunData) -> dict[str, Any]:
    """Latency and cost histograms (or why there is no cost to plot), and the gauges.

    Args:
        data: the run.
    """
    costs = queries.item_costs(data)
    total, incomplete = data.n_items, costs["incomplete"]
    why = None
    if not (costs["known"] > 0).any():
        if incomplete:
            why = (
                f"{incomplete} of {total} items' accounting is incomplete "
                f"({reasons_text(costs['reasons'])}), so this is not $0"
            )
        elif not total:
            why = "the run has no items yet"
        else:
            why = "every item's accounting is complete and no call was billed (free or cached calls, or none)"
    return {
        "latency": figures.latency(data),
        "cost": None if why else figures.cost(costs["known"]),
        "why": why,
        "incomplete": incomplete,
        "total": total,
        "reasons": costs["reasons"],
        "gauges": data.summary["gauges"],
        "rate": _rate(data.summary.get("rate_control")),
    }


def _rate(rate: dict[str, Any] | None) -> dict[str, Any] | None:
    """The rate controller's figures and history chart, when it did something to tell."""
    if rate is None or not rate_worth_showing(rate):
        return None
    return {**rate_facts(rate), "chart": figures.rate_history(rate) if rate["history"]["rows"] else None}


def models(data: RunData) -> dict[str, Any]:
    """Tokens and cost per generation and judge model, the run's total, what the target's own
    code reported (kept apart), and each model's time to first token where its calls streamed.

    Args:
        data: the run.
    """
    s = data.summary
    caller = s.get("caller_cost_usd")
    return {
        "rows": queries.model_rows(data),
        "first_token": [row for row in s.get("timing_by_model") or [] if row.get("streamed_calls")],
        "total": {"planned": s["planned"], "cost": s["cost"], "tokens": s["tokens"]},
        "caller": None if caller is None else f"${caller:,.6g}",
    }


def failures(data: RunData) -> dict[str, Any]:
    """The failed items and the failed scores.

    Args:
        data: the run.
    """
    counts = data.summary["items"]
    return {
        "failed": queries.failed_items(data),
        "n_failed": counts[ItemOutcome.FAILED],
        "scorers": queries.failed_scores(data),
        "n_scorers": sum(row[ScorerOutcome.FAILED] for row in data.summary["scorers"]),
        "trials": data.record.get("trials", 1),
        "view_url": view_items(data.run_id, outcome=ItemOutcome.FAILED.value),
    }


def baseline(store: Store, data: RunData, baseline_id: str) -> dict[str, Any]:
    """`assay compare`'s verdicts against `baseline_id`, its forest plot, and the items whose
    scores changed most. A comparison that cannot be made is said in the section (`error`); runs
    that cannot be read together (unknown, of another dataset) raise `InputError`.

    Args:
        store: the store.
        data: the run (the candidate).
        baseline_id: the baseline run.
    """
    from assay.analysis.compare import CompareOptions, compare, load_sides

    base, cand = load_sides(store, [baseline_id], [data.run_id])
    section: dict[str, Any] = {
        "run_id": baseline_id,
        "model": base.records[0].get("model"),
        "candidate_model": cand.records[0].get("model"),
        "view_url": view_compare(baseline_id, data.run_id),
        "error": None,
    }
    try:
        doc = compare(base, cand, CompareOptions())
    except InputError as exc:
        return {**section, "error": str(exc)}
    paired = [row for row in doc["scorers"] if row.get("n_pairs")]
    notes = [] if doc["cost"]["certified"] else [f"cost delta not certified: {doc['cost']['reason']}"]
    changed = queries.changed_items(base, cand)
    for row in changed:
        row["changes"] = [
            {"scorer": scorer, "before": b, "after": a, "direction": "down" if (b or 0) > (a or 0) else "up"}
            for scorer, (b, a) in row["scores"].items()
            if b is None or a is None or b != a
        ]
    return {
        **section,
        "forest": figures.forest(paired) if paired else None,
        "scorers": doc["scorers"],
        "lines": doc["lines"],
        "notes": notes + [f"gate failed: {m}" for m in doc["failed_gates"]],
        "changed": changed,
    }


def sequential(store: Store, data: RunData) -> dict[str, Any] | None:
    """A run's sequential compare (`compare_to`): its verdict, interval and the figure of its
    confidence sequence over the pairs consumed; None for a run without one.

    Args:
        store: the store.
        data: the run.
    """
    from assay.analysis.monitor import sequence_of

    seq = sequence_of(store, data.run_id)
    if seq is None or not seq["items"]:
        return None
    return {**seq, "figure": figures.sequence(seq)}


def browser(data: RunData, artifacts_href: str) -> dict[str, Any]:
    """The item browser: its filters' choices and every row's data for the page's script.

    Args:
        data: the run.
        artifacts_href: the store's artifacts folder, relative to the page (or its s3:// URL).
    """
    rows = queries.browser_rows(data)
    turns = conversations(data.record)
    for row in rows:
        row["turns"] = turns.get(row["id"])
    return {
        "outcomes": sorted(outcome for outcome, n in data.summary["items"].items() if n),
        "total": data.n_items,
        "view_url": view_items(data.run_id),
        "payload": {
            "scorers": data.scorers,
            "trials": int(data.record.get("trials") or 1),
            "page": BROWSER_PAGE,
            "clip": CLIP_CHARS,
            "rows": rows,
            "artifacts": artifacts_href,
        },
    }


def labels(store: Store, data: RunData) -> list[dict[str, Any]] | None:
    """Each scorer with people's labels on the run: the judge's agreement with them and its
    corrected mean beside the raw one (`assay agreement`); None without labels.

    Args:
        store: the store.
        data: the run.
    """
    from assay.analysis.judge_trust import agreement_report, nan_to_none
    from assay.store.labels import run_labels

    if not store.location.names(f"labels/run_id={data.run_id}") and not data.record.get("source_run_id"):
        return None
    rows = []
    for scorer in sorted(set(run_labels(store, data.run_id)["scorer"].to_list()) & set(data.scorers)):
        try:
            rows.append(nan_to_none(agreement_report(store, data.run_id, scorer)))
        except InputError:
            continue  # only stale labels or none of this scorer's: nothing to say here
    return rows or None
