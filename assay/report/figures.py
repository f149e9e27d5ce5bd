"""The report's Plotly figures, each as the `<div>` and `<script>` that draw it with the page's
inline plotly.js.

What a figure returns is Plotly's own HTML: its JSON encoder writes `<`, `>` and `/` as `\\u003c`,
`\\u003e` and `\\u002f`, so no data can close the script. Dataset-derived labels (scorer names) are
also HTML-escaped with `label`, because Plotly reads a few tags in the text it draws.
"""

from __future__ import annotations

import html
import itertools
import math
from typing import Any

import polars as pl

from assay.numbers import num
from assay.outcomes import ItemOutcome, ScorerOutcome, Verdict
from assay.report.data import RunData, scored_values, scorer_outcomes
from assay.report.style import ACCENT, OUTCOME_COLOURS, VERDICT_COLOURS

FONT = "system-ui, -apple-system, Segoe UI, Roboto, sans-serif"
HORIZONTAL_LEGEND = {"orientation": "h", "y": -0.3, "traceorder": "normal"}


def plotlyjs() -> str:
    """plotly.js itself, to inline once in the page's head."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def label(text: str) -> str:
    """A dataset-derived label for a figure (Plotly reads a few HTML tags in labels).

    Args:
        text: the label.
    """
    return html.escape(text, quote=False)


def nice_bin(top: float, bins: int = 25) -> float:
    """A round bin width (1, 2 or 5 × 10^k) giving about `bins` bins from 0 to `top`.

    Args:
        top: the largest value.
        bins: about how many bins.
    """
    if not top > 0:
        return 1.0
    raw = top / bins
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _html(figure: Any, name: str, height: int) -> str:
    """`figure` in the page's look, as HTML that draws it into `<div id="fig-{name}">`."""
    import plotly.io as pio

    figure.update_layout(
        template="plotly_white",
        height=height,
        margin={"l": 10, "r": 20, "t": figure.layout.margin.t or 40, "b": 40},
        font={"family": FONT, "size": 12},
        title_font_size=14,
    )
    figure.update_yaxes(automargin=True)
    figure.update_xaxes(automargin=True)
    return pio.to_html(
        figure,
        full_html=False,
        include_plotlyjs=False,
        include_mathjax=False,
        div_id=f"fig-{name}",
        default_height=f"{height}px",
        default_width="100%",
        config={"displaylogo": False, "responsive": True},
    )


def score_means(shown: list[dict[str, Any]]) -> str:
    """Each scorer's mean with its 95 % CI, as dots with error bars.

    Args:
        shown: `scorer_table` rows that have a mean.
    """
    import plotly.graph_objects as go

    low = [row["mean"] - row["ci_low"] if row["ci_low"] is not None else 0 for row in shown]
    high = [row["ci_high"] - row["mean"] if row["ci_high"] is not None else 0 for row in shown]
    dots = go.Figure(
        go.Scatter(
            x=[row["mean"] for row in shown],
            y=[label(row["scorer"]) for row in shown],
            mode="markers",
            marker={"size": 11, "color": ACCENT},
            error_x={"type": "data", "symmetric": False, "array": high, "arrayminus": low, "thickness": 2},
            customdata=[[row["n"], row["ci_low"], row["ci_high"]] for row in shown],
            hovertemplate="%{y}: %{x:.3f}<br>95% CI [%{customdata[1]:.3f}, %{customdata[2]:.3f}]"
            "<br>n = %{customdata[0]}<extra></extra>",
        )
    )
    dots.update_layout(title="Mean score per scorer, with 95 % CI", showlegend=False)
    dots.update_xaxes(range=[-0.02, 1.02], title="score", zeroline=False)
    dots.update_yaxes(autorange="reversed")
    return _html(dots, "scores", 90 + 44 * len(shown))


# The score distributions' bins: 0.05 wide, centred on 0, 0.05, ..., 1.
_SCORE_BIN = 0.05


def score_distributions(data: RunData, shown: list[dict[str, Any]]) -> str:
    """A histogram of each scorer's values, up to three side by side, counted into bins
    (`bin_counts`).

    Args:
        data: the run.
        shown: `scorer_table` rows that have a mean.
    """
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    cols = min(3, len(shown))
    nrows = math.ceil(len(shown) / cols)
    hist = make_subplots(
        rows=nrows,
        cols=cols,
        subplot_titles=[label(row["scorer"]) for row in shown],
        horizontal_spacing=0.06,
        vertical_spacing=0.18 / max(1, nrows - 1) if nrows > 1 else 0.1,
    )
    for i, row in enumerate(shown):
        values = scored_values(data, row["scorer"]).to_frame("score")
        bins = bin_counts(values, "score", _SCORE_BIN, start=-_SCORE_BIN / 2)
        hist.add_trace(
            go.Bar(
                x=[start + _SCORE_BIN / 2 for _, start, _ in bins],
                y=[n for _, _, n in bins],
                width=_SCORE_BIN,
                marker={"color": ACCENT, "line": {"color": "white", "width": 1}},
                name=label(row["scorer"]),
                hovertemplate="score %{x}<br>%{y} items<extra></extra>",
            ),
            row=i // cols + 1,
            col=i % cols + 1,
        )
    hist.update_xaxes(range=[-0.05, 1.05])
    hist.update_layout(title="Score distributions", showlegend=False, bargap=0.05)
    hist.update_layout(margin={"t": 80})
    return _html(hist, "distributions", 110 + 230 * nrows)


# One legend for items and scorers: an item's `completed` and a scorer's `scored` are the same success.
_OUTCOME_GROUPS: list[tuple[ItemOutcome | None, ScorerOutcome]] = [
    (ItemOutcome.COMPLETED, ScorerOutcome.SCORED),
    (ItemOutcome.FAILED, ScorerOutcome.FAILED),
    (None, ScorerOutcome.SKIPPED),
    (ItemOutcome.CANCELLED, ScorerOutcome.CANCELLED),
    (ItemOutcome.BUDGET_SKIPPED, ScorerOutcome.BUDGET_SKIPPED),
    (ItemOutcome.BUDGET_INTERRUPTED, ScorerOutcome.BUDGET_INTERRUPTED),
]


def _group_name(item: ItemOutcome | None, scorer: ScorerOutcome) -> str:
    """`completed / scored`, or the one word both share."""
    return scorer.value if item is None or item.value == scorer.value else f"{item} / {scorer}"


def outcomes(data: RunData) -> str:
    """Stacked bars of the items' outcomes and each scorer's.

    Args:
        data: the run.
    """
    import plotly.graph_objects as go

    counts = data.summary["items"]
    total = sum(counts.values())
    categories = ["items"] + [f"scorer: {label(s)}" for s in data.scorers]
    per_scorer = scorer_outcomes(data)
    series = [
        (
            _group_name(item, scorer),
            OUTCOME_COLOURS[scorer.value],
            [counts.get(item, 0) if item else 0] + [per_scorer[s].get(scorer, 0) for s in data.scorers],
        )
        for item, scorer in _OUTCOME_GROUPS
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
    bars.update_layout(title="Item and scorer outcomes", barmode="stack", legend=HORIZONTAL_LEGEND)
    bars.update_yaxes(autorange="reversed")
    bars.update_xaxes(title="item × trial", range=[0, max(total, 1)])
    return _html(bars, "outcomes", 160 + 40 * len(categories))


def latency(data: RunData) -> str:
    """A histogram of the items' durations, completed and failed stacked, counted into bins by
    Polars (`bin_counts`): a page of a million items holds its bins, not its durations.

    Args:
        data: the run.
    """
    timed = data.items.filter(pl.col("duration_ms").is_not_null())
    width = nice_bin(float(timed.select(pl.col("duration_ms").max()).collect().item() or 0.0))
    counts = bin_counts(timed, "duration_ms", width, by="outcome")
    series = {
        outcome.value: [(start, n) for kind, start, n in counts if kind == outcome]
        for outcome in (ItemOutcome.COMPLETED, ItemOutcome.FAILED)
    }
    d = data.summary["duration_ms"]
    return binned(
        "latency",
        f"Latency per item (p50 {num(d['p50'], 0)} ms, p95 {num(d['p95'], 0)} ms)",
        "duration ms (target call, retries included)",
        width,
        series,
        "items",
    )


def rate_history(rate: dict[str, Any]) -> str:
    """The rate controller's history: its window and calls in flight over the run, and when
    answers were refused for rate (a mark per sample where the count rose).

    Args:
        rate: the summary's `rate_control` (columns `t, limit, in_flight, rate_limited`).
    """
    import plotly.graph_objects as go

    columns = rate["history"]["columns"]
    rows = [dict(zip(columns, row, strict=True)) for row in rate["history"]["rows"]]
    t = [row["t"] for row in rows]
    figure = go.Figure()
    figure.add_trace(
        go.Scatter(
            x=t, y=[row["limit"] for row in rows], name="window", line={"shape": "hv", "color": ACCENT}
        )
    )
    figure.add_trace(
        go.Scatter(
            x=t, y=[row["in_flight"] for row in rows], name="in flight", line={"shape": "hv", "color": "#888"}
        )
    )
    refused = [
        (a["t"], a["limit"]) for a, b in itertools.pairwise(rows) if b["rate_limited"] > a["rate_limited"]
    ]
    if refused:
        figure.add_trace(
            go.Scatter(
                x=[x for x, _ in refused],
                y=[y for _, y in refused],
                name="429",
                mode="markers",
                marker={"color": OUTCOME_COLOURS[ItemOutcome.FAILED.value], "symbol": "x"},
            )
        )
    figure.update_layout(title="Rate control: window and calls in flight", legend=HORIZONTAL_LEGEND)
    figure.update_xaxes(title="seconds since the controller started", rangemode="tozero")
    figure.update_yaxes(title="calls", rangemode="tozero")
    return _html(figure, "rate", 280)


def cost(known: pl.Series) -> str:
    """A histogram of the items' known cost, counted into bins (`bin_counts`).

    Args:
        known: each measured item's cost in USD (some of them above 0).
    """
    width = nice_bin(float(known.max()))  # type: ignore[arg-type]
    bins = [(start, n) for _, start, n in bin_counts(known.to_frame("usd"), "usd", width)]
    return binned(
        "cost",
        "Known cost per item (generation + judging)",
        "USD per item",
        width,
        {"items": bins},
        "items",
        x_format="$.2~g",
    )


def forest(rows: list[dict[str, Any]]) -> str:
    """Each scorer's Δ (candidate − baseline) with its CI, coloured by verdict.

    Args:
        rows: the comparison's scorer rows that have pairs.
    """
    import plotly.graph_objects as go

    figure = go.Figure()
    for verdict in Verdict:
        group = [row for row in rows if row["verdict"] == verdict]
        if not group:
            continue
        figure.add_trace(
            go.Scatter(
                x=[row["delta"] * 100 for row in group],
                y=[label(row["scorer"]) for row in group],
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
    figure.add_vline(x=0, line={"color": "#52606d", "width": 1})
    low = min(0.0, *(row["ci_low"] * 100 for row in rows))
    high = max(0.0, *(row["ci_high"] * 100 for row in rows))
    pad = max(1.0, (high - low) * 0.08)
    figure.update_xaxes(range=[low - pad, high + pad])
    figure.update_layout(
        # The intervals' own method (a pass rate's is Newcombe's, a mean's the bootstrap).
        title="Δ score per scorer (candidate − baseline), 95 % paired CI "
        f"({', '.join(sorted({str(row.get('ci_method') or 'bootstrap') for row in rows}))})",
        legend={"orientation": "h", "y": -0.3, "title": {"text": "verdict"}},
        showlegend=True,
    )
    figure.update_xaxes(title="Δ points", zeroline=False)
    figure.update_yaxes(autorange="reversed")
    return _html(figure, "forest", 150 + 46 * len(rows))


def sequence(seq: dict[str, Any]) -> str:
    """A sequential compare's confidence sequence over the pairs consumed: the band narrowing to
    the stop, the threshold band and zero.

    Args:
        seq: `assay.analysis.monitor.sequence_of`'s result (its `path`: (pairs, low, high)).
    """
    import plotly.graph_objects as go

    path = seq["path"]
    step = max(1, len(path) // 1000)  # at most ~1,000 points a line
    shown = path[::step] + ([path[-1]] if (len(path) - 1) % step else [])
    pairs = [n for n, _, _ in shown]
    low = [max(-100.0, lo * 100) for _, lo, _ in shown]
    high = [min(100.0, hi * 100) for _, _, hi in shown]
    colour = VERDICT_COLOURS.get(seq["verdict"], ACCENT)
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=pairs, y=high, mode="lines", name="upper", line={"color": colour}))
    figure.add_trace(
        go.Scatter(x=pairs, y=low, mode="lines", name="lower", line={"color": colour}, fill="tonexty")
    )
    threshold = seq["threshold"] * 100
    for y, dash in ((threshold, "dot"), (-threshold, "dot"), (0.0, "solid")):
        figure.add_hline(y=y, line={"color": "#52606d", "width": 1, "dash": dash})
    figure.add_vline(x=seq["items"], line={"color": colour, "width": 1, "dash": "dash"})
    figure.update_layout(
        title=(
            f"{label(seq['scorer'])}: Δ {(1 - seq['alpha']) * 100:g} % confidence sequence over the pairs "
            f"consumed — {seq['verdict']} after {seq['items']}"
        ),
        showlegend=False,
    )
    span = max(abs(v) for v in (*low[len(low) // 10 :], *high[len(high) // 10 :], threshold * 2))
    figure.update_yaxes(title="Δ points (candidate − baseline)", range=[-span * 1.1, span * 1.1])
    figure.update_xaxes(title="pairs consumed (seeded order)", rangemode="tozero")
    return _html(figure, "sequence", 340)


def binned(
    name: str,
    title: str,
    x_title: str,
    width: float,
    series: dict[str, list[tuple[float, int]]],
    y_title: str,
    *,
    x_format: str | None = None,
) -> str:
    """A histogram drawn from counts already made (bin start, count), one stacked trace per
    series: a million values cost the page their bins only (`assay view`).

    Args:
        name: the figure's id (`fig-<name>`).
        title: its title.
        x_title: the values' axis.
        width: the bins' width.
        series: per trace name (an outcome's colour when it is one), its bins.
        y_title: the counts' axis.
        x_format: the values' tick format (plotly's, d3's), e.g. `$.2~g`.
    """
    import plotly.graph_objects as go

    figure = go.Figure()
    for trace, bins in series.items():
        if bins:
            figure.add_trace(
                go.Bar(
                    x=[start + width / 2 for start, _ in bins],
                    y=[n for _, n in bins],
                    width=width,
                    name=label(trace),
                    marker={
                        "color": OUTCOME_COLOURS.get(trace, ACCENT),
                        "line": {"color": "white", "width": 1},
                    },
                )
            )
    figure.update_layout(title=title, barmode="stack", legend=HORIZONTAL_LEGEND)
    figure.update_xaxes(title=x_title, rangemode="tozero", tickformat=x_format)
    figure.update_yaxes(title=y_title)
    return _html(figure, name, 320)


def bin_counts(
    rows: pl.DataFrame | pl.LazyFrame, column: str, width: float, *, by: str | None = None, start: float = 0.0
) -> list[tuple[Any, float, int]]:
    """(group, bin start, count) of `column` in bins of `width` from `start`, counted by Polars
    (a million values are never Python floats): per value of `by`, or one group (None).

    Args:
        rows: the values' rows (a lazy frame: its scan, read only for the counts).
        column: the values' column.
        width: the bins' width.
        by: the column whose values are the groups (stacked traces), if any.
        start: where the first bin starts.
    """
    keys = [
        pl.col(by) if by else pl.lit(None).alias("group"),
        ((pl.col(column) - start) // width).cast(pl.Int64).alias("bin"),
    ]
    counts = rows.lazy().group_by(keys).len().sort("bin").collect()
    return [(group, start + float(b) * width, int(n)) for group, b, n in counts.iter_rows()]
