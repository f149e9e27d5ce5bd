"""`assay report`: one self-contained HTML file describing a run, optionally against a baseline.

The page works offline and makes no network request: plotly.js is inlined once in the head, every
figure is a `Plotly.newPlot` call over inline JSON, the item browser is plain inline JavaScript
over an inline JSON block, and a Content-Security-Policy forbids loading anything from anywhere.

Every string that comes from a dataset, a target or a scorer (inputs, outputs, errors, ids, model
and scorer names) reaches the page either through `html.escape` (server-rendered tables), through
JSON whose `<`, `>` and `&` are written as `\\u003c`, `\\u003e`, `\\u0026` and which the browser
script puts into the page with `textContent` (the item browser), or through Plotly's own JSON
encoder, which escapes the same characters (figures; their labels are also HTML-escaped because
Plotly reads a few tags in labels).
"""

from __future__ import annotations

import html
import json
import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from assay import __version__ as _assay_version
from assay.analysis.stats import mean_interval
from assay.analysis.summary import summarise
from assay.errors import InputError
from assay.outcomes import Completeness, ItemOutcome, ScorerOutcome, Verdict
from assay.store import Store

# Long text is cut in the page (with a "more" toggle) past this many characters, and stored in
# the page only up to FULL_TEXT_LIMIT characters (the rest is dropped, with a note).
CLIP_CHARS = 280
FULL_TEXT_LIMIT = 20_000
# Items whose scores changed most, shown side by side with the baseline.
CHANGED_ITEMS = 20
# Rows of the item browser shown at once (the "show more" button adds as many again).
BROWSER_PAGE = 200

OUTCOME_COLOURS = {
    "completed": "#2e9d5b",
    "scored": "#2e9d5b",
    "failed": "#d64545",
    "skipped": "#9aa5b1",
    "cancelled": "#616e7c",
    "budget_skipped": "#e0a526",
    "budget_interrupted": "#e07b26",
}
VERDICT_COLOURS = {
    Verdict.REGRESSED.value: "#d64545",
    Verdict.IMPROVED.value: "#2e9d5b",
    Verdict.UNCHANGED.value: "#7b8794",
    Verdict.INCONCLUSIVE.value: "#e0a526",
}
ACCENT = "#3a6fd8"
_TOKEN_KINDS = ("input", "output", "reasoning", "cached")


# -- entry points ---------------------------------------------------------------------------------


def default_path(store: Store, run_id: str) -> Path:
    """`<store>/reports/<run_id>.html`."""
    return store.root / "reports" / f"{run_id}.html"


def write_report(
    store: Store, run_id: str, *, baseline: str | None = None, out: str | Path | None = None
) -> Path:
    """Write the report of `run_id` (compared with `baseline` when given); returns its path.

    Args:
        store: the store.
        run_id: the run to report on (the candidate when a baseline is given).
        baseline: a run of the same dataset to compare with.
        out: the HTML file to write (default `<store>/reports/<run_id>.html`).
    """
    path = Path(out) if out is not None else default_path(store, run_id)
    # Links to what attempts kept (transcripts, diffs, workspaces), relative to where the page is.
    artifacts = os.path.relpath(store.artifacts_root.resolve(), path.parent.resolve())
    page = build_report(store, run_id, baseline=baseline, artifacts_href=Path(artifacts).as_posix())
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{path.name}")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)
    return path


def build_report(
    store: Store, run_id: str, *, baseline: str | None = None, artifacts_href: str = "../artifacts"
) -> str:
    """The report as one HTML document (a string).

    Args:
        store: the store.
        run_id: the run.
        baseline: a run of the same dataset to compare with.
        artifacts_href: the store's artifacts folder, relative to where the page will be; the
            items' kept files (transcripts, diffs) link into it.
    """
    data = _RunData(store, run_id)
    figures = _Figures()
    sections = [_header(data)]
    if baseline is not None:  # first: a baseline that cannot be compared fails before any work
        sections.append(_baseline_section(store, data, baseline, figures))
    sections += [
        _scores_section(data, figures),
        _outcomes_section(data, figures),
        _timing_cost_section(data, figures),
        _models_section(data),
        _failures_section(data),
        _browser_section(data, artifacts_href),
    ]
    return _page(data, sections)


# -- data -----------------------------------------------------------------------------------------


class _RunData:
    """One run's record, summary, items and scores, read once."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.run_id = run_id
        self.record = store.read_run(run_id)
        self.summary = summarise(store, run_id)
        self.items = store.run_items(run_id).sort("item_index", "trial")
        self.scores = store.run_scores(run_id).sort("item_index", "trial", "scorer")
        self.scorers: list[str] = sorted(set(self.scores["scorer"].to_list()))
        self.kinds: dict[str, str] = dict(
            self.scores.select("scorer", "scorer_kind").unique("scorer").iter_rows()
        )


# -- formatting -----------------------------------------------------------------------------------


def _e(value: Any) -> str:
    """HTML-escaped text of a value ('–' for nothing)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return html.escape(str(value), quote=True)


def _num(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else _e(value)


def _pct(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value * 100:.{digits}f}%"


def _usd(value: float) -> str:
    if value == 0:
        return "$0"
    if abs(value) >= 100:
        return f"${value:,.2f}"
    return f"${value:.4g}" if abs(value) >= 0.001 else f"${value:.3g}"


def _signed(value: float) -> str:
    return f"{value:+.1f}".replace("-", "−")


def _reasons_text(reasons: dict[str, int]) -> str:
    return ", ".join(f"{name} ×{n}" for name, n in sorted(reasons.items()) if n)


def money(usd: float | None, completeness: str | None, reasons: dict[str, int] | None = None) -> str:
    """Cost as HTML that never shows a bare $0 for accounting that is not complete: complete
    figures as they are, incomplete ones as a lower bound (or "unknown" when nothing was
    measured) with the reasons."""
    usd = usd or 0.0
    why = _reasons_text(reasons or {})
    if completeness in (None, Completeness.COMPLETE):
        return f'<span class="money">{_usd(usd)}</span>'
    label = "unverified" if completeness == Completeness.UNVERIFIED else "incomplete"
    figure = f"≥ {_usd(usd)}" if usd > 0 else "unknown"
    note = f"{label}: {why}" if why else label
    return f'<span class="money incomplete">{figure}</span> <span class="note">({_e(note)})</span>'


def _datetime(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return _e(value)


def _text(json_text: str | None) -> str:
    """The text of a JSON text column: a string as itself, anything else as indented JSON."""
    if json_text is None:
        return ""
    try:
        value = json.loads(json_text)
    except (TypeError, ValueError):
        return str(json_text)
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=1, ensure_ascii=False)


def _cut(text: str) -> str:
    if len(text) <= FULL_TEXT_LIMIT:
        return text
    return text[:FULL_TEXT_LIMIT] + f"\n… (cut in this report: {len(text):,} characters in all)"


def clip(text: str | None, cls: str = "") -> str:
    """Escaped text in a box; long text is cut to a few lines with a "more" toggle."""
    text = _cut(text or "")
    long = len(text) > CLIP_CHARS or text.count("\n") > 4
    classes = " ".join(c for c in ("clip", "long" if long else "", cls) if c)
    box = f'<div class="{classes}">{html.escape(text)}</div>'
    return box + ('<button type="button" class="more">more</button>' if long else "")


def _json_script(element_id: str, value: Any) -> str:
    """Data for the page's scripts: JSON that can never close its <script> element."""
    text = json.dumps(value, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{element_id}">{text}</script>'


def _badge(word: str | None, palette: dict[str, str] = OUTCOME_COLOURS) -> str:
    if word is None:
        return "–"
    colour = palette.get(word, "#7b8794")
    return f'<span class="badge" style="background:{colour}">{_e(word)}</span>'


def _table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    """A table of already-escaped cells."""
    header = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>'


def _label(text: str) -> str:
    """A dataset-derived label for a Plotly figure (Plotly reads a few HTML tags in labels)."""
    return html.escape(text, quote=False)


# -- figures --------------------------------------------------------------------------------------


class _Figures:
    """Turns Plotly figures into `<div>`s that draw themselves with the page's inline plotly.js."""

    def html(self, figure: Any, name: str, height: int, note: str = "") -> str:
        import plotly.io as pio

        figure.update_layout(
            template="plotly_white",
            height=height,
            margin={"l": 10, "r": 20, "t": figure.layout.margin.t or 40, "b": 40},
            font={"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12},
            title_font_size=14,
        )
        figure.update_yaxes(automargin=True)
        figure.update_xaxes(automargin=True)
        body = pio.to_html(
            figure,
            full_html=False,
            include_plotlyjs=False,
            include_mathjax=False,
            div_id=f"fig-{name}",
            default_height=f"{height}px",
            default_width="100%",
            config={"displaylogo": False, "responsive": True},
        )
        return f'<div class="figure">{body}{note}</div>'


def _plotlyjs() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


# -- sections -------------------------------------------------------------------------------------


def _section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{_e(title)}</h2>{body}</section>'


def _header(data: _RunData) -> str:
    r, s = data.record, data.summary
    counts = s["items"]
    planned = r["n_planned"] or sum(counts.values())
    done = counts.get(ItemOutcome.COMPLETED, 0)
    others = ", ".join(
        f"{n} {_e(outcome)}" for outcome, n in counts.items() if n and outcome != ItemOutcome.COMPLETED
    )
    coverage = f"{done} of {planned} completed ({_pct(done / planned if planned else None)})"
    if others:
        coverage += f" · {others}"
    gate = "passed" if s["gate_passed"] else "FAILED"
    rate = (
        f"item error rate {_pct(s['item_error_rate'])} (limit {_pct(s['fail_on_item_error_rate'], 0)}, "
        f"gate {gate})"
    )
    cost = s["cost"]
    facts = [
        (
            "run",
            f"<code>{_e(data.run_id)}</code>" + (f" ({_e(r['kind'])})" if r.get("kind") != "run" else ""),
        ),
        (
            "status",
            _badge(r["status"], {"completed": "#2e9d5b", "failed_gate": "#d64545", "running": ACCENT}),
        ),
        ("model", _e(r.get("model") or r.get("target_kind"))),
        ("created", _datetime(r.get("created_at"))),
        ("finished", _datetime(r.get("finished_at"))),
        ("wall time", f"{r['wall_ms'] / 1000:.2f} s" if r.get("wall_ms") else "–"),
        ("items", f"{coverage}<br>{rate}"),
        ("trials · seed", f"{_num(r.get('trials'))} · {_num(r.get('seed'))}"),
        ("cost", money(cost["usd"], cost["completeness"], cost["reasons"])),
    ]
    if r.get("source_run_id"):
        facts.insert(1, ("rescore of", f"<code>{_e(r['source_run_id'])}</code>"))
    if r.get("matrix_id"):
        facts.insert(1, ("matrix · cell", f"<code>{_e(r['matrix_id'])}</code> · {_e(r.get('cell'))}"))
    if r.get("tags"):
        facts.append(("tags", " ".join(f'<span class="tag">{_e(t)}</span>' for t in r["tags"])))
    grid = "".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in facts)
    return (
        f'<header><h1>{_e(r["name"])} <span class="sub">Assay report</span></h1>'
        f'<dl class="facts">{grid}</dl></header>'
    )


def scorer_table(data: _RunData) -> list[dict[str, Any]]:
    """Per scorer: kind, scored count, mean and 95 % CI (Student t over every scored value),
    quantiles and the other outcomes' counts."""
    rows = []
    for scorer in data.scorers:
        frame = data.scores.filter(pl.col("scorer") == scorer)
        values = frame.filter(pl.col("outcome") == ScorerOutcome.SCORED)["score"].drop_nulls().to_numpy()
        low, high = mean_interval(values) if values.size else (math.nan, math.nan)
        outcomes = dict(frame.group_by("outcome").len().iter_rows())
        rows.append(
            {
                "scorer": scorer,
                "kind": data.kinds.get(scorer),
                "n": int(values.size),
                "mean": float(values.mean()) if values.size else None,
                "ci_low": None if math.isnan(low) else low,
                "ci_high": None if math.isnan(high) else high,
                "min": float(values.min()) if values.size else None,
                "median": float(pl.Series(values).median()) if values.size else None,
                "max": float(values.max()) if values.size else None,
                "outcomes": outcomes,
            }
        )
    return rows


def _scores_section(data: _RunData, figures: _Figures) -> str:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    stats = scorer_table(data)
    if not stats:
        return _section("scores", "Scores", '<p class="empty">No scores in this run.</p>')
    shown = [row for row in stats if row["mean"] is not None]
    body = ""
    if shown:
        low = [row["mean"] - row["ci_low"] if row["ci_low"] is not None else 0 for row in shown]
        high = [row["ci_high"] - row["mean"] if row["ci_high"] is not None else 0 for row in shown]
        dots = go.Figure(
            go.Scatter(
                x=[row["mean"] for row in shown],
                y=[_label(row["scorer"]) for row in shown],
                mode="markers",
                marker={"size": 11, "color": ACCENT},
                error_x={
                    "type": "data",
                    "symmetric": False,
                    "array": high,
                    "arrayminus": low,
                    "thickness": 2,
                },
                customdata=[[row["n"], row["ci_low"], row["ci_high"]] for row in shown],
                hovertemplate="%{y}: %{x:.3f}<br>95% CI [%{customdata[1]:.3f}, %{customdata[2]:.3f}]"
                "<br>n = %{customdata[0]}<extra></extra>",
            )
        )
        dots.update_layout(title="Mean score per scorer, with 95 % CI", showlegend=False)
        dots.update_xaxes(range=[-0.02, 1.02], title="score", zeroline=False)
        dots.update_yaxes(autorange="reversed")
        body += figures.html(dots, "scores", 90 + 44 * len(shown))

    def outcomes_text(counts: dict[str, int]) -> str:
        parts = [f"{n} {o}" for o, n in sorted(counts.items()) if o != ScorerOutcome.SCORED and n]
        return _e(", ".join(parts)) if parts else "–"

    rows = [
        [
            f"<b>{_e(row['scorer'])}</b>",
            _e(row["kind"]),
            _num(row["n"]),
            _num(row["mean"]),
            f"[{_num(row['ci_low'])}, {_num(row['ci_high'])}]" if row["ci_low"] is not None else "–",
            _num(row["min"]),
            _num(row["median"]),
            _num(row["max"]),
            outcomes_text(row["outcomes"]),
        ]
        for row in stats
    ]
    body += _table(
        ["scorer", "kind", "scored", "mean", "95 % CI", "min", "median", "max", "not scored"],
        rows,
        "numeric",
    )
    body += (
        '<p class="note">95 % CI: Student t over every scored value (item × trial). Failed items have no '
        "scores: they are counted as failures, never as 0.</p>"
    )

    if shown:
        cols = min(3, len(shown))
        nrows = math.ceil(len(shown) / cols)
        hist = make_subplots(
            rows=nrows,
            cols=cols,
            subplot_titles=[_label(row["scorer"]) for row in shown],
            horizontal_spacing=0.06,
            vertical_spacing=0.18 / max(1, nrows - 1) if nrows > 1 else 0.1,
        )
        for i, row in enumerate(shown):
            values = (
                data.scores.filter(
                    pl.col("scorer") == row["scorer"], pl.col("outcome") == ScorerOutcome.SCORED
                )["score"]
                .drop_nulls()
                .to_list()
            )
            hist.add_trace(
                go.Histogram(
                    x=values,
                    xbins={"start": -0.025, "end": 1.025, "size": 0.05},
                    marker={"color": ACCENT, "line": {"color": "white", "width": 1}},
                    name=_label(row["scorer"]),
                    hovertemplate="score %{x}<br>%{y} items<extra></extra>",
                ),
                row=i // cols + 1,
                col=i % cols + 1,
            )
        hist.update_xaxes(range=[-0.05, 1.05])
        hist.update_layout(title="Score distributions", showlegend=False, bargap=0.05)
        hist.update_layout(margin={"t": 80})
        body += figures.html(hist, "distributions", 110 + 230 * nrows)
    return _section("scores", "Scores", body)


def _outcomes_section(data: _RunData, figures: _Figures) -> str:
    import plotly.graph_objects as go

    counts = data.summary["items"]
    total = sum(counts.values())
    categories = ["items"] + [f"scorer: {_label(s)}" for s in data.scorers]
    per_scorer = {
        s: dict(data.scores.filter(pl.col("scorer") == s).group_by("outcome").len().iter_rows())
        for s in data.scorers
    }
    # One legend for both: an item's `completed` and a scorer's `scored` are the same success.
    groups = [
        ("completed / scored", OUTCOME_COLOURS["completed"], ItemOutcome.COMPLETED, ScorerOutcome.SCORED),
        ("failed", OUTCOME_COLOURS["failed"], ItemOutcome.FAILED, ScorerOutcome.FAILED),
        ("skipped", OUTCOME_COLOURS["skipped"], None, ScorerOutcome.SKIPPED),
        ("cancelled", OUTCOME_COLOURS["cancelled"], ItemOutcome.CANCELLED, ScorerOutcome.CANCELLED),
        (
            "budget_skipped",
            OUTCOME_COLOURS["budget_skipped"],
            ItemOutcome.BUDGET_SKIPPED,
            ScorerOutcome.BUDGET_SKIPPED,
        ),
        (
            "budget_interrupted",
            OUTCOME_COLOURS["budget_interrupted"],
            ItemOutcome.BUDGET_INTERRUPTED,
            ScorerOutcome.BUDGET_INTERRUPTED,
        ),
    ]
    series = [
        (
            name,
            colour,
            [counts.get(item, 0) if item else 0] + [per_scorer[s].get(scorer, 0) for s in data.scorers],
        )
        for name, colour, item, scorer in groups
    ]
    # Scorers never run on an item that did not complete: show that gap, not a shorter bar.
    gap = [0] + [max(0, total - sum(per_scorer[s].values())) for s in data.scorers]
    series.append(("no score (item not completed)", "#d9dee4", gap))
    bars = go.Figure()
    for name, colour, xs in series:
        if not any(xs):
            continue
        bars.add_trace(
            go.Bar(
                x=xs,
                y=categories,
                orientation="h",
                name=name,
                marker={"color": colour, "line": {"color": "white", "width": 1}},
                text=[str(x) if x else "" for x in xs],
                textposition="inside",
                insidetextanchor="middle",
                hovertemplate="%{y}: %{x} " + name + "<extra></extra>",
            )
        )
    bars.update_layout(
        title="Item and scorer outcomes",
        barmode="stack",
        legend={"orientation": "h", "y": -0.3, "traceorder": "normal"},
    )
    bars.update_yaxes(autorange="reversed")
    bars.update_xaxes(title="item × trial", range=[0, max(total, 1)])
    return _section("outcomes", "Outcomes", figures.html(bars, "outcomes", 160 + 40 * len(categories)))


def _timing_cost_section(data: _RunData, figures: _Figures) -> str:
    import plotly.graph_objects as go

    items = data.items
    latency = go.Figure()
    timed = items.filter(pl.col("duration_ms").is_not_null())
    top = float(timed["duration_ms"].max() or 0.0)
    bins = {"start": 0, "end": top * 1.0001 + 1e-9, "size": _nice_bin(top)}
    for outcome in (ItemOutcome.COMPLETED, ItemOutcome.FAILED):
        values = timed.filter(pl.col("outcome") == outcome)["duration_ms"].to_list()
        if values:
            latency.add_trace(
                go.Histogram(
                    x=values,
                    name=outcome.value,
                    xbins=bins,
                    marker={"color": OUTCOME_COLOURS[outcome.value], "line": {"color": "white", "width": 1}},
                    hovertemplate="%{x} ms<br>%{y} items<extra></extra>",
                )
            )
    d = data.summary["duration_ms"]
    latency.update_layout(
        title=f"Latency per item (p50 {_num(d['p50'], 0)} ms, p95 {_num(d['p95'], 0)} ms)",
        barmode="stack",
        legend={"orientation": "h", "y": -0.3, "traceorder": "normal"},
    )
    latency.update_xaxes(title="duration ms (target call, retries included)", rangemode="tozero")
    latency.update_yaxes(title="items")
    parts = [figures.html(latency, "latency", 320)]

    reasons = _merge(items["cost_reasons"])
    incomplete = items.filter(pl.col("cost_completeness") != Completeness.COMPLETE).height
    measured = items.filter(pl.col("operations").fill_null(0) > 0)  # items that made model calls
    known = measured["cost_usd"].fill_null(0)
    if measured.is_empty() or not (known > 0).any():
        if incomplete:
            why = (
                f"{incomplete} of {items.height} items' accounting is incomplete ({_reasons_text(reasons)}), "
                "so this is not $0"
            )
        elif items.is_empty():
            why = "the run has no items yet"
        else:
            why = "every item's accounting is complete and no call was billed (free or cached calls, or none)"
        parts.append(
            f'<div class="figure placeholder"><h3>Cost per item</h3><p>No measured cost to plot: {_e(why)}.</p></div>'
        )
    else:
        top = float(known.max())
        cost = go.Figure(
            go.Histogram(
                x=known.to_list(),
                xbins={"start": 0, "end": top * 1.0001, "size": _nice_bin(top)},
                marker={"color": ACCENT, "line": {"color": "white", "width": 1}},
                hovertemplate="$%{x}<br>%{y} items<extra></extra>",
            )
        )
        cost.update_layout(title="Known cost per item (generation + judging)", showlegend=False)
        cost.update_xaxes(title="USD per item", tickformat="$.2~g", rangemode="tozero")
        cost.update_yaxes(title="items")
        note = (
            f'<p class="note incomplete">{incomplete} of {items.height} items\' accounting is incomplete '
            f"({_e(_reasons_text(reasons))}): their figures are lower bounds.</p>"
            if incomplete
            else '<p class="note">Every measured item\'s accounting is complete.</p>'
        )
        parts.append(figures.html(cost, "cost", 320, note))
    body = '<div class="pair">' + "".join(parts) + "</div>" + _gauges_table(data.summary["gauges"])
    return _section("timing", "Latency and cost", body)


def _gauges_table(gauges: list[dict[str, Any]]) -> str:
    """The run's gauges (per completed item: duration, steps, tool calls, tokens, cost) as a table;
    nothing when the run has none."""
    if not gauges:
        return ""
    rows = [
        [
            f"<code>{_e(g['gauge'])}</code>",
            _e(g["n"]),
            *(_e(f"{g[k]:.6g}") for k in ("mean", "p50", "p95", "max")),
        ]
        for g in gauges
    ]
    return (
        '<h3>Gauges</h3><p class="note">Measured per completed item; an item whose value is unknown '
        "is left out, not counted as 0.</p>"
        + _table(["gauge", "items", "mean", "p50", "p95", "max"], rows, "gauges")
    )


def _nice_bin(top: float, bins: int = 25) -> float:
    """A round bin width (1, 2 or 5 × 10^k) giving about `bins` bins from 0 to `top`."""
    if not top > 0:
        return 1.0
    raw = top / bins
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _merge(column: pl.Series) -> dict[str, int]:
    merged: dict[str, int] = {}
    for text in column.drop_nulls():
        for name, n in json.loads(text).items():
            merged[name] = merged.get(name, 0) + n
    return merged


def model_rows(data: _RunData) -> list[dict[str, Any]]:
    """Tokens and cost per (role, model): generation from the items (their judging share taken
    out), judging from the scores of model-graded scorers."""
    items, scores = data.items, data.scores
    fallback = data.record.get("model") or f"({data.record.get('target_kind') or 'target'})"
    judging = scores.group_by("item_id", "trial").agg(
        pl.col("operations").fill_null(0).sum().alias("judge_ops"),
        pl.col("cost_reasons").alias("judge_reasons"),
    )
    gen = items.join(judging, on=["item_id", "trial"], how="left").with_columns(
        pl.col("model").fill_null(fallback).alias("key"),
        (pl.col("operations").fill_null(0) - pl.col("judge_ops").fill_null(0)).alias("gen_ops"),
    )
    timing = {row["model"]: row for row in data.summary.get("timing_by_model") or []}
    rows: list[dict[str, Any]] = []
    for key in sorted(set(gen["key"].to_list())):
        group = gen.filter(pl.col("key") == key)
        reasons = _merge(group["cost_reasons"])
        for lists in group["judge_reasons"].drop_nulls():
            for name, n in _merge(pl.Series(lists, dtype=pl.String)).items():
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
                "role": "generation",
                "model": key,
                "items": group.height,
                "calls": int(group["gen_ops"].sum()),
                **{f"tokens_{k}": int(group[f"tokens_{k}"].fill_null(0).sum()) for k in _TOKEN_KINDS},
                "cost_usd": float(group["cost_generation_usd"].fill_null(0).sum()),
                "completeness": completeness.value,
                "reasons": reasons,
                "wire_ms_p50": t.get("wire_ms_p50"),
                "wire_ms_p95": t.get("wire_ms_p95"),
            }
        )
    judged = scores.filter(pl.col("model").is_not_null() | (pl.col("operations").fill_null(0) > 0))
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
                "role": f"judging · {scorer}",
                "model": model,
                "items": group.height,
                "calls": int(group["operations"].fill_null(0).sum()),
                **{f"tokens_{k}": int(group[f"tokens_{k}"].fill_null(0).sum()) for k in _TOKEN_KINDS},
                "cost_usd": float(group["cost_usd"].fill_null(0).sum()),
                "completeness": completeness,
                "reasons": _merge(group["cost_reasons"]),
                "wire_ms_p50": None,
                "wire_ms_p95": None,
            }
        )
    return rows


def _models_section(data: _RunData) -> str:
    rows = model_rows(data)
    cells = [
        [
            _e(row["role"]),
            f"<code>{_e(row['model'])}</code>",
            _num(row["items"]),
            _num(row["calls"]),
            *(_num(row[f"tokens_{k}"]) for k in _TOKEN_KINDS),
            money(row["cost_usd"], row["completeness"], row["reasons"]),
            _badge(row["completeness"], {"complete": "#2e9d5b", "incomplete": "#e0a526"}),
            f"{_num(row['wire_ms_p50'], 0)} / {_num(row['wire_ms_p95'], 0)}" if row["wire_ms_p50"] else "–",
        ]
        for row in rows
    ]
    s = data.summary
    tokens, cost = s["tokens"], s["cost"]
    cells.append(
        [
            "<b>run total</b>",
            "",
            _num(s["planned"]),
            _num(cost["operations"]),
            *(_num(tokens[k]) for k in _TOKEN_KINDS),
            money(cost["usd"], cost["completeness"], cost["reasons"]),
            _badge(cost["completeness"], {"complete": "#2e9d5b", "incomplete": "#e0a526"}),
            "",
        ]
    )
    table = _table(
        [
            "role",
            "model",
            "rows",
            "calls",
            "tokens in",
            "tokens out",
            "reasoning",
            "cached",
            "cost",
            "completeness",
            "p50 / p95 wire ms",
        ],
        cells,
        "numeric models",
    )
    caller = s.get("caller_cost_usd")
    note = (
        '<p class="note">Measured figures only; an incomplete cost is a lower bound (reasons: <i>unpriced</i> '
        "— a model missing from the price table, <i>uninstrumented</i> — a Python target Assay cannot see "
        "into, <i>unknown_outcome</i> — a call that may have been billed).</p>"
    )
    if caller is not None:
        note += f'<p class="note">The target\'s own code reported ${caller:,.6g} (not measured, not included).</p>'
    return _section("models", "Tokens and cost per model", table + note)


def _failures_section(data: _RunData) -> str:
    failed = data.items.filter(pl.col("outcome") == ItemOutcome.FAILED)
    if failed.is_empty():
        body = '<p class="empty">No item failed.</p>'
    else:
        rows = [
            [
                f"<code>{_e(r['item_id'])}</code>"
                + (f" #{r['trial']}" if data.record.get("trials", 1) > 1 else ""),
                clip(r["error"], "error"),
                _e(r["failure_kind"]),
                _e(r["failure_provider"]),
                _num(r["failure_http_status"]),
                _e({True: "yes", False: "no"}.get(r["failure_retryable"])),
                f"<code>{_e(r['failure_request_id'])}</code>" if r["failure_request_id"] else "–",
            ]
            for r in failed.iter_rows(named=True)
        ]
        body = _table(
            ["item", "error", "kind", "provider", "HTTP", "retryable", "request id"], rows, "failures"
        )
    scorer_failed = data.scores.filter(pl.col("outcome") == ScorerOutcome.FAILED)
    if not scorer_failed.is_empty():
        rows = [
            [f"<code>{_e(r['item_id'])}</code>", _e(r["scorer"]), clip(r["error"], "error")]
            for r in scorer_failed.iter_rows(named=True)
        ]
        body += "<h3>Scorer failures</h3>" + _table(["item", "scorer", "error"], rows, "failures")
    title = f"Failures ({failed.height} items)" if failed.height else "Failures"
    return _section("failures", title, body)


# -- baseline -------------------------------------------------------------------------------------


def _baseline_section(store: Store, data: _RunData, baseline: str, figures: _Figures) -> str:
    import plotly.graph_objects as go

    from assay.analysis.compare import CompareOptions, compare, load_sides

    base, cand = load_sides(store, [baseline], [data.run_id])
    head = (
        f"<p>Baseline <code>{_e(baseline)}</code> → candidate <code>{_e(data.run_id)}</code> (this run).</p>"
    )
    try:
        doc = compare(base, cand, CompareOptions())
    except InputError as exc:
        return _section("baseline", "Against the baseline", head + f'<p class="empty">{_e(exc)}</p>')
    rows = [row for row in doc["scorers"] if row.get("n_pairs")]
    body = head
    if rows:
        forest = go.Figure()
        for verdict in Verdict:
            group = [row for row in rows if row["verdict"] == verdict]
            if not group:
                continue
            forest.add_trace(
                go.Scatter(
                    x=[row["delta"] * 100 for row in group],
                    y=[_label(row["scorer"]) for row in group],
                    mode="markers",
                    name=verdict.value,
                    marker={"size": 12, "color": VERDICT_COLOURS[verdict], "symbol": "diamond"},
                    error_x={
                        "type": "data",
                        "symmetric": False,
                        "array": [(row["ci_high"] - row["delta"]) * 100 for row in group],
                        "arrayminus": [(row["delta"] - row["ci_low"]) * 100 for row in group],
                        "thickness": 2.5,
                        "color": VERDICT_COLOURS[verdict],
                    },
                    customdata=[
                        [row["ci_low"] * 100, row["ci_high"] * 100, row["n_pairs"], row["threshold"] * 100]
                        for row in group
                    ],
                    hovertemplate="%{y}: %{x:+.1f} pts<br>95% CI [%{customdata[0]:+.1f}, %{customdata[1]:+.1f}]"
                    "<br>n = %{customdata[2]} pairs, threshold %{customdata[3]:.0f} pts<extra>"
                    + verdict.value
                    + "</extra>",
                )
            )
        forest.add_vline(x=0, line={"color": "#52606d", "width": 1})
        low = min(0.0, *(row["ci_low"] * 100 for row in rows))
        high = max(0.0, *(row["ci_high"] * 100 for row in rows))
        pad = max(1.0, (high - low) * 0.08)
        forest.update_xaxes(range=[low - pad, high + pad])
        forest.update_layout(
            title="Δ score per scorer (candidate − baseline), 95 % paired bootstrap CI",
            legend={"orientation": "h", "y": -0.3, "title": {"text": "verdict"}},
            showlegend=True,
        )
        forest.update_xaxes(title="Δ points", zeroline=False)
        forest.update_yaxes(autorange="reversed")
        body += figures.html(forest, "forest", 150 + 46 * len(rows))
    table_rows = [
        [
            f"<b>{_e(row['scorer'])}</b>",
            _num(row.get("n_pairs")),
            _num(row.get("baseline_mean")),
            _num(row.get("candidate_mean")),
            _signed(row["delta"] * 100) if row.get("n_pairs") else "–",
            f"[{_signed(row['ci_low'] * 100)}, {_signed(row['ci_high'] * 100)}]"
            if row.get("n_pairs")
            else "–",
            _num(row.get("p_value")),
            f"{row['threshold'] * 100:g}",
            _badge(row["verdict"], VERDICT_COLOURS),
        ]
        for row in doc["scorers"]
    ]
    body += _table(
        ["scorer", "pairs", "baseline", "candidate", "Δ pts", "95 % CI", "p", "threshold pts", "verdict"],
        table_rows,
        "numeric",
    )
    body += "<ul class='lines'>" + "".join(f"<li>{_e(line)}</li>" for line in doc["lines"]) + "</ul>"
    notes = []
    if not doc["cost"]["certified"]:
        notes.append(f"cost delta not certified: {doc['cost']['reason']}")
    notes += [f"gate failed: {m}" for m in doc["failed_gates"]]
    if notes:
        body += "<ul class='gates'>" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>"
    body += _changed_items(base, cand)
    return _section("baseline", "Against the baseline", body)


def changed_items(base: Any, cand: Any, limit: int = CHANGED_ITEMS) -> list[dict[str, Any]]:
    """The (item_id, trial) pairs whose scores (or outcome) changed most, largest change first
    (regressions before improvements of the same size)."""

    def scores(side: Any) -> dict[tuple[str, int], dict[str, float]]:
        out: dict[tuple[str, int], dict[str, float]] = {}
        for item_id, trial, scorer, score in side.mean_scores().iter_rows():
            out.setdefault((item_id, trial), {})[scorer] = score
        return out

    def items(side: Any) -> dict[tuple[str, int], dict[str, Any]]:
        frame = side.items.unique(["item_id", "trial"], keep="first", maintain_order=True)
        return {(r["item_id"], r["trial"]): r for r in frame.iter_rows(named=True)}

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

        def side(row: dict[str, Any] | None) -> tuple[str | None, str | None, str | None]:
            return (row["outcome"], row["output"], row["error"]) if row else (None, None, None)

        out.append(
            {
                "item_id": key[0],
                "trial": key[1],
                "index": first.get("item_index") or 0,
                "input": first.get("input"),
                "expected": first.get("expected"),
                "baseline": side(b_row),
                "candidate": side(c_row),
                "scores": deltas,
                "change": change + (1 if outcome_changed else 0),
                "signed": signed,
            }
        )
    out.sort(key=lambda r: (-r["change"], r["signed"], r["index"], r["trial"]))
    return out[:limit]


def _side_text(side: tuple[str | None, str | None, str | None]) -> str:
    outcome, output, error = side
    if outcome is None:
        return '<p class="empty">not in this run</p>'
    if outcome == ItemOutcome.COMPLETED:
        return clip(_text(output))
    return _badge(outcome) + (clip(error, "error") if error else "")


def _changed_items(base: Any, cand: Any) -> str:
    rows = changed_items(base, cand)
    if not rows:
        return '<h3>Items whose scores changed</h3><p class="empty">No item\'s scores changed.</p>'
    cells = []
    for row in rows:
        changes = []
        for scorer, (before, after) in row["scores"].items():
            if before is not None and after is not None and before == after:
                continue
            direction = "down" if (before or 0) > (after or 0) else "up"
            changes.append(
                f'<div class="delta {direction}">{_e(scorer)}: {_num(before, 2)} → {_num(after, 2)}</div>'
            )
        cells.append(
            [
                f"<code>{_e(row['item_id'])}</code>" + (f" #{row['trial']}" if row["trial"] else ""),
                "".join(changes) or "–",
                clip(_text(row["input"]))
                + (
                    f'<div class="expected">expected: {clip(_text(row["expected"]))}</div>'
                    if row["expected"]
                    else ""
                ),
                _side_text(row["baseline"]),
                _side_text(row["candidate"]),
            ]
        )
    return f"<h3>Items whose scores changed most ({len(rows)} shown)</h3>" + _table(
        ["item", "scores", "input", "baseline output", "candidate output"], cells, "changed"
    )


# -- the item browser -----------------------------------------------------------------------------


def browser_rows(data: _RunData) -> list[dict[str, Any]]:
    """One row per item × trial for the browser: scores by scorer (null when not scored, with the
    scorer's outcome) and the item's texts, cut to FULL_TEXT_LIMIT."""
    by_item: dict[tuple[str, int], dict[str, Any]] = {}
    for item_id, trial, scorer, score, outcome in data.scores.select(
        "item_id", "trial", "scorer", "score", "outcome"
    ).iter_rows():
        by_item.setdefault((item_id, trial), {})[scorer] = (score, outcome)
    rows = []
    for r in data.items.iter_rows(named=True):
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
                "input": _cut(_text(r["input"])),
                "expected": _cut(_text(r["expected"])) if r["expected"] is not None else "",
                "output": _cut(r["output_text"] if r["output_text"] is not None else _text(r["output"])),
                "error": _cut(r["error"] or ""),
                # Files the attempt kept, linked from its row; a workspace folder is one link.
                "files": [f for f in r.get("artifacts") or [] if not f.endswith("/workspace")],
            }
        )
    return rows


def _browser_section(data: _RunData, artifacts_href: str) -> str:
    outcomes = sorted(set(data.items["outcome"].to_list()))
    payload = {
        "scorers": data.scorers,
        "trials": int(data.record.get("trials") or 1),
        "page": BROWSER_PAGE,
        "clip": CLIP_CHARS,
        "rows": browser_rows(data),
        "artifacts": artifacts_href,
    }
    outcome_options = "".join(f'<option value="{_e(o)}">{_e(o)}</option>' for o in outcomes)
    scorer_options = "".join(f'<option value="{_e(s)}">{_e(s)}</option>' for s in data.scorers)
    ops = "".join(f'<option value="{op}">{_e(op)}</option>' for op in ("<", "<=", "=", ">=", ">"))
    head = "".join(
        f"<th>{_e(c)}</th>" for c in ["item", "outcome", *data.scorers, "input", "expected", "output"]
    )
    controls = f"""
<div class="filters" role="search">
  <label>outcome <select id="f-outcome"><option value="">all</option>{outcome_options}</select></label>
  <label>scorer <select id="f-scorer"><option value="">any</option>{scorer_options}</select></label>
  <select id="f-op" aria-label="comparison">{ops}</select>
  <input id="f-value" type="number" step="any" value="1" aria-label="score" size="4">
  <label class="grow">search <input id="f-search" type="search" placeholder="id, input, expected, output, error"></label>
  <span id="f-count" class="count"></span>
</div>"""
    table = (
        f'<div class="scroll"><table id="items" class="browser"><thead><tr>{head}</tr></thead>'
        '<tbody></tbody></table></div><button type="button" id="f-more" class="show-more" hidden>'
        f"show {BROWSER_PAGE} more</button>"
    )
    return _section("browser", "Items", controls + table + _json_script("items-data", payload))


# -- the page -------------------------------------------------------------------------------------

_CSS = """
:root { --fg:#1f2933; --muted:#616e7c; --line:#e4e7eb; --bg:#f5f7fa; --card:#fff; --accent:#3a6fd8; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--fg);
  font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif; }
main { max-width:1280px; margin:0 auto; padding:24px 28px 60px; }
header h1 { margin:0 0 12px; font-size:26px; } header .sub { color:var(--muted); font-weight:400; font-size:16px; }
nav { margin:0 0 16px; display:flex; gap:14px; flex-wrap:wrap; }
nav a { color:var(--accent); text-decoration:none; } nav a:hover { text-decoration:underline; }
.facts { display:grid; grid-template-columns:repeat(auto-fill,minmax(230px,1fr)); gap:10px 18px; margin:0;
  background:var(--card); border:1px solid var(--line); border-radius:8px; padding:14px 18px; }
.facts div:has(br) { grid-column: span 2; }
.facts dt { color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.04em; }
.facts dd { margin:2px 0 0; }
section { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:16px 20px; margin:18px 0; }
section h2 { margin:0 0 12px; font-size:18px; } section h3 { font-size:15px; margin:18px 0 8px; }
.figure { margin:6px 0 12px; min-width:0; }
.pair { display:grid; grid-template-columns:1fr 1fr; gap:18px; }
@media (max-width:900px) { .pair { grid-template-columns:1fr; } }
.placeholder { border:1px dashed var(--line); border-radius:6px; padding:12px 16px; color:var(--muted); }
.placeholder h3 { margin-top:0; color:var(--fg); }
table { border-collapse:collapse; width:100%; margin:8px 0; }
th, td { text-align:left; padding:6px 8px; border-bottom:1px solid var(--line); vertical-align:top; }
th { font-size:12px; color:var(--muted); font-weight:600; background:#fafbfc; }
table.browser th { position:sticky; top:0; z-index:1; }
table.numeric td:not(:first-child):not(:last-child) { font-variant-numeric:tabular-nums; }
code { font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; background:#f0f2f5; padding:1px 4px;
  border-radius:3px; word-break:break-all; }
.badge { display:inline-block; color:#fff; border-radius:10px; padding:1px 8px; font-size:12px; white-space:nowrap; }
.tag { display:inline-block; background:#eef2fb; color:var(--accent); border-radius:4px; padding:0 6px; margin-right:4px; }
.money { font-variant-numeric:tabular-nums; } .money.incomplete { color:#b7791f; font-weight:600; }
.note { color:var(--muted); font-size:12px; } .note.incomplete { color:#b7791f; } .empty { color:var(--muted); font-style:italic; }
.clip { white-space:pre-wrap; word-break:break-word; font:12px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; }
.clip.long:not(.open) { max-height:5.9em; overflow:hidden;
  -webkit-mask-image:linear-gradient(#000 60%,transparent); mask-image:linear-gradient(#000 60%,transparent); }
.clip.error { color:#b42318; }
.files a { margin-right:8px; font-size:12px; color:var(--accent); }
button.more, .show-more { border:1px solid var(--line); background:#fff; color:var(--accent); border-radius:4px;
  font-size:11px; padding:0 6px; cursor:pointer; margin-top:2px; }
.show-more { font-size:13px; padding:4px 12px; margin:10px 0; }
.expected { margin-top:6px; color:var(--muted); font-size:12px; }
.expected > .clip:not(.long) { display:inline; margin-left:4px; }
.delta { white-space:nowrap; } .delta.down { color:#b42318; } .delta.up { color:#1d7a45; }
ul.lines, ul.gates { margin:8px 0; padding-left:20px; } ul.gates li { color:#b42318; }
table.changed td:nth-child(n+3) { width:28%; }
.filters { display:flex; flex-wrap:wrap; gap:8px 14px; align-items:center; margin-bottom:10px; }
.filters label { color:var(--muted); font-size:12px; display:flex; gap:6px; align-items:center; }
.filters .grow { flex:1; min-width:220px; } .filters .grow input { flex:1; }
.filters select, .filters input { font:inherit; font-size:13px; padding:3px 6px; border:1px solid #cbd2d9; border-radius:4px; }
#f-value { width:70px; } .count { color:var(--muted); font-size:12px; margin-left:auto; }
.scroll { overflow-x:auto; max-height:80vh; overflow-y:auto; border:1px solid var(--line); border-radius:6px; }
table.browser { margin:0; } table.browser td.text { min-width:220px; max-width:420px; }
table.browser td.score { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
table.browser td.state { color:var(--muted); font-style:italic; text-align:right; }
footer { color:var(--muted); font-size:12px; text-align:center; margin-top:30px; }
"""

_SCRIPT = r"""
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var button = event.target.closest("button.more");
    if (!button) return;
    var box = button.previousElementSibling;
    var open = box.classList.toggle("open");
    button.textContent = open ? "less" : "more";
  });
  var source = document.getElementById("items-data");
  if (!source) return;
  var data = JSON.parse(source.textContent);
  var tbody = document.querySelector("#items tbody");
  var ui = {
    outcome: document.getElementById("f-outcome"), scorer: document.getElementById("f-scorer"),
    op: document.getElementById("f-op"), value: document.getElementById("f-value"),
    search: document.getElementById("f-search"), count: document.getElementById("f-count"),
    more: document.getElementById("f-more")
  };
  var colours = { completed: "#2e9d5b", failed: "#d64545", cancelled: "#616e7c",
                  budget_skipped: "#e0a526", budget_interrupted: "#e07b26" };
  function cell(tr, cls) { var td = document.createElement("td"); if (cls) td.className = cls; tr.appendChild(td); return td; }
  function textCell(tr, text, extra) {
    var td = cell(tr, "text");
    var box = document.createElement("div");
    var long = text.length > data.clip || text.split("\n").length > 5;
    box.className = "clip" + (long ? " long" : "") + (extra ? " " + extra : "");
    box.textContent = text;
    td.appendChild(box);
    if (long) {
      var button = document.createElement("button");
      button.type = "button"; button.className = "more"; button.textContent = "more";
      td.appendChild(button);
    }
    return td;
  }
  var rows = data.rows.map(function (r) {
    var tr = document.createElement("tr");
    var id = cell(tr, "id"), code = document.createElement("code");
    code.textContent = r.id + (data.trials > 1 ? " #" + r.trial : "");
    id.appendChild(code);
    var badge = document.createElement("span");
    badge.className = "badge"; badge.style.background = colours[r.outcome] || "#7b8794";
    badge.textContent = r.outcome;
    cell(tr, "").appendChild(badge);
    data.scorers.forEach(function (s) {
      var v = r.scores[s];
      if (typeof v === "number") {
        var td = cell(tr, "score");
        td.textContent = v.toFixed(3);
        td.style.background = "hsl(" + Math.round(120 * Math.max(0, Math.min(1, v))) + ",65%,92%)";
      } else {
        cell(tr, "state").textContent = r.states[s] || "–";
      }
    });
    textCell(tr, r.input);
    textCell(tr, r.expected);
    var last = (r.outcome === "completed" || !r.error) ? textCell(tr, r.output) : textCell(tr, r.error, "error");
    if (r.files.length) {
      var links = document.createElement("div");
      links.className = "files";
      r.files.forEach(function (path) {
        var a = document.createElement("a");
        a.href = data.artifacts + "/" + path.split("/").map(encodeURIComponent).join("/");
        a.textContent = path.split("/").pop();
        a.rel = "noopener";
        links.appendChild(a);
      });
      last.appendChild(links);
    }
    tr.hidden = true;
    tbody.appendChild(tr);
    var hay = [r.id, r.input, r.expected, r.output, r.error].join("\n").toLowerCase();
    return { r: r, tr: tr, hay: hay };
  });
  var limit = data.page;
  function compare(x, op, v) {
    if (op === "<") return x < v; if (op === "<=") return x <= v; if (op === "=") return x === v;
    if (op === ">=") return x >= v; return x > v;
  }
  function apply() {
    var outcome = ui.outcome.value, scorer = ui.scorer.value, op = ui.op.value;
    var v = parseFloat(ui.value.value), q = ui.search.value.trim().toLowerCase();
    var matched = 0, shown = 0;
    rows.forEach(function (row) {
      var ok = !outcome || row.r.outcome === outcome;
      if (ok && scorer) {
        var x = row.r.scores[scorer];
        ok = typeof x === "number" && (isNaN(v) || compare(x, op, v));
      }
      if (ok && q) ok = row.hay.indexOf(q) !== -1;
      var show = ok && shown < limit;
      if (ok) matched += 1;
      if (show) shown += 1;
      row.tr.hidden = !show;
    });
    ui.count.textContent = shown < matched
      ? "showing " + shown + " of " + matched + " matching (" + rows.length + " items)"
      : matched + " of " + rows.length + " items";
    ui.more.hidden = shown >= matched;
  }
  function reset() { limit = data.page; apply(); }
  [ui.outcome, ui.scorer, ui.op].forEach(function (el) { el.addEventListener("change", reset); });
  [ui.value, ui.search].forEach(function (el) { el.addEventListener("input", reset); });
  ui.more.addEventListener("click", function () { limit += data.page; apply(); });
  apply();
})();
"""

# Nothing may be fetched: no scripts, styles, fonts, images or connections from anywhere.
_CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'"
)


def _page(data: _RunData, sections: list[str]) -> str:
    nav = "".join(
        f'<a href="#{anchor}">{title}</a>'
        for anchor, title in (
            ("baseline", "Baseline"),
            ("scores", "Scores"),
            ("outcomes", "Outcomes"),
            ("timing", "Latency & cost"),
            ("models", "Models"),
            ("failures", "Failures"),
            ("browser", "Items"),
        )
        if f'id="{anchor}"' in "".join(sections)
    )
    title = f"{data.record['name']} · {data.run_id} — Assay report"
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="assay {_e(_assay_version)}">
<title>{_e(title)}</title>
<style>{_CSS}</style>
<script>window.PlotlyConfig = {{MathJaxConfig: "local"}};</script>
<script>{_plotlyjs()}</script>
</head>
<body>
<main>
{sections[0]}
<nav>{nav}</nav>
{"".join(sections[1:])}
<footer>Generated {generated} by Assay {_e(_assay_version)} · self-contained: works offline, loads nothing.</footer>
</main>
<script>{_SCRIPT}</script>
</body>
</html>
"""
