"""What a person at a terminal sees once a command is done: summary tables (rich). The live
progress bar is `_progress`'s."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any

import polars as pl
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from assay import numbers
from assay.analysis import lines
from assay.outcomes import ItemOutcome, ScorerOutcome


def _console() -> Console:
    # Rich assumes 80 columns when stdout is not a terminal; a piped table should not be cut.
    return Console() if sys.stdout.isatty() else Console(width=160)


def _table(columns: tuple[str, ...], *, left: tuple[str, ...], wraps: tuple[str, ...] = ()) -> Table:
    """A table with a bold header: text columns (`left`) left-aligned, numbers right-aligned.

    Args:
        columns: the headings, in order.
        left: the headings of text columns.
        wraps: the columns long text may wrap in; the others keep one line.
    """
    table = Table(show_header=True, header_style="bold")
    for column in columns:
        table.add_column(column, justify="left" if column in left else "right", no_wrap=column not in wraps)
    return table


def print_summary(summary: dict[str, Any]) -> None:
    console = _console()
    counts = summary["items"]
    source = summary.get("source_run_id")
    console.print(
        f"[bold]{summary['name']}[/bold]  run [cyan]{summary['run_id']}[/cyan]"
        + (f" (rescore of [cyan]{source}[/cyan])" if source else "")
        + f"  status [bold]{summary['status']}[/bold]"
    )
    if summary.get("error"):
        console.print(
            f"stopped by: {escape(summary['error'])} (`assay resume {summary['run_id']}` continues it)"
        )
    console.print(escape(lines.items_line(summary)))
    console.print(escape(lines.gates_line(summary)))
    if summary.get("compare_to"):
        from assay.analysis.monitor import compare_line  # numpy and the sequence: only for such runs

        console.print(escape(compare_line(summary) or ""))
    if summary.get("failures"):
        console.print(escape(lines.failures_line(counts[ItemOutcome.FAILED], summary["failures"])))
    if not_answered := lines.not_answered_line(summary):
        console.print(escape(not_answered))
    if answers := lines.answers_line(summary):
        console.print(escape(answers))
    _print_scorers(console, summary)
    if summary.get("gauges"):
        gauges = _table(("gauge", "n", "mean", "min", "p50", "p95", "max"), left=("gauge",))
        for row in summary["gauges"]:
            gauges.add_row(
                row["gauge"],
                str(row["n"]),
                *(numbers.gauge(row["gauge"], row[k]) for k in ("mean", "min", "p50", "p95", "max")),
            )
        console.print(gauges)
    if summary.get("n_teardown_errors"):
        console.print(
            f"[yellow]warning: {summary['n_teardown_errors']} sandbox teardowns failed "
            f"(`assay clean {summary['run_id']}` removes what is left): {summary['teardown_errors'][0]}[/yellow]"
        )
    streamed = [row for row in summary.get("timing_by_model") or [] if row.get("streamed_calls")]
    if streamed:
        first = _table(
            ("model", "calls", "streamed", "first token p50", "first token p95", "total p50", "total p95"),
            left=("model",),
        )
        for row in streamed:
            first.add_row(
                escape(row["model"]),
                str(row["calls"]),
                str(row["streamed_calls"]),
                *(
                    numbers.ms(row[k])
                    for k in ("first_token_ms_p50", "first_token_ms_p95", "total_ms_p50", "total_ms_p95")
                ),
            )
        console.print(first)
    if batch := summary.get("batches"):
        console.print(f"batches: {batch['batches']} {_batches_line(batch)}")
        groups = batch.get("by_purpose") or []
        if len(groups) > 1 or any(group["label"] != "target" for group in groups):
            for group in groups:
                console.print(
                    f"  {escape(group['label'])}: {group['batches']} batches {_batches_line(group)}"
                )
    duration = summary["duration_ms"]
    wall = summary.get("wall_ms")
    console.print(
        "item duration: "
        + " · ".join(f"{k} {numbers.ms(duration[k])}" for k in ("mean", "p50", "p95", "max"))
        + (f" · wall {wall / 1000:.2f} s" if wall else "")
    )
    console.print(escape(numbers.cost_line(summary["cost"])))
    rate = summary.get("rate_control")
    if numbers.rate_worth_showing(rate):
        console.print(escape(numbers.rate_line(rate)))
    for scorer, found in summary.get("labels", {}).items():
        console.print(escape(_labelled_line(scorer, found)))
    if noise := summary.get("judge_noise"):
        from assay.analysis.judge_noise import noise_line

        for scorer, found in noise.items():
            console.print(escape(noise_line(scorer, found)))


def _labelled_line(scorer: str, found: dict[str, Any]) -> str:
    """`judge: raw judge 0.780 [0.762, 0.798] · corrected by 200 labels 0.701 [0.655, 0.747]`."""

    def shown(mean: dict[str, Any]) -> str:
        return (
            f"{numbers.num(mean['estimate'])} [{numbers.num(mean['ci_low'])}, {numbers.num(mean['ci_high'])}]"
        )

    parts = [f"{scorer}: raw judge {shown(found['judge_mean'])}" if found["judge_mean"] else f"{scorer}:"]
    corrected = found["corrected_mean"]
    if corrected:
        parts.append(
            f"corrected by {corrected['n_labelled']} labels {shown(corrected)} ({corrected['method']})"
        )
    else:
        parts.append(f"no corrected mean: {found['corrected_refused']}")
    if found["n_stale"]:
        parts.append(f"{found['n_stale']} stale labels left out")
    return " · ".join(parts)


def _batches_line(batch: dict[str, Any]) -> str:
    """`(1 in progress, 2 ended) holding 15 requests: 10 succeeded`."""
    counts = ", ".join(f"{n} {kind}" for kind, n in sorted(batch["request_counts"].items()) if n)
    return (
        f"({batch['in_progress']} in progress, {batch['ended']} ended) "
        f"holding {batch['requests']} requests" + (f": {counts}" if counts else "")
    )


def _print_scorers(console: Console, summary: dict[str, Any]) -> None:
    """The scorers' table, then a line per scorer that failed (how often, and its first error) —
    or, when nothing was scored, why the table is empty."""
    if not summary["scorers"]:
        console.print(lines.no_scores_line(summary))
        return
    table = Table(show_header=True, header_style="bold")
    for column in ("scorer", "mean", "min", "p50", "p95", "max", "scored", "failed", "skipped"):
        table.add_column(column, justify="left" if column == "scorer" else "right", no_wrap=True)
    for row in summary["scorers"]:
        table.add_row(
            row["scorer"],
            *(numbers.num(row[k]) for k in ("mean", "min", "p50", "p95", "max")),
            *(str(row[k]) for k in (ScorerOutcome.SCORED, ScorerOutcome.FAILED, ScorerOutcome.SKIPPED)),
        )
    console.print(table)
    for row in summary["scorers"]:
        if line := lines.scorer_failed_line(row):
            console.print(f"[yellow]{escape(line)}[/yellow]")


def print_matrix_summary(summary: dict[str, Any]) -> None:
    """A matrix run: each cell's summary, then the leaderboard."""
    for cell in summary["cells"]:
        print_summary(cell)
    print_leaderboard(summary["leaderboard"])


def print_runs(runs: pl.DataFrame) -> None:
    if "source_run_id" in runs.columns:  # a rescore is labelled as one, naming its source
        label = pl.lit("rescore of ") + pl.col("source_run_id")
        runs = runs.with_columns(
            kind=pl.when(pl.col("source_run_id").is_not_null()).then(label).otherwise(pl.col("kind"))
        ).drop("source_run_id")
    if "tags" in runs.columns:
        runs = runs.with_columns(tags=pl.col("tags").list.join(","))
    table = Table(show_header=True, header_style="bold")
    for column in runs.columns:
        table.add_column(column, no_wrap=column in ("run_id", "kind", "created_at"))
    for row in runs.iter_rows():
        table.add_row(*(f"{v:%Y-%m-%d %H:%M:%S}" if isinstance(v, datetime) else numbers.num(v) for v in row))
    _console().print(table)


def run_named(run_id: str | None, runs: dict[str, dict[str, Any]]) -> str:
    """`20261202T0210-ab12cd (mock-1, cell a, tags nightly)`: a run with its model, cell and tags
    (`runs`: run id -> those facts, as a comparison, a leaderboard or the nightly carries them)."""
    if run_id is None:
        return "–"
    facts = runs.get(run_id, {})
    said = [facts.get("model"), facts.get("cell") and f"cell {facts['cell']}"]
    said.append(facts.get("tags") and "tags " + ",".join(facts["tags"]))
    words = ", ".join(str(fact) for fact in said if fact)
    return f"{run_id} ({escape(words)})" if words else run_id


def _named(comparison: dict[str, Any], side: str) -> str:
    """A side's runs, each with its model, cell and tags."""
    return "+".join(run_named(run_id, comparison.get("runs", {})) for run_id in comparison[side])


def print_comparison(comparison: dict[str, Any]) -> None:
    from assay.analysis.lines import gauge_line

    console = _console()
    console.print(
        f"[bold]compare[/bold] {_named(comparison, 'baseline')} → {_named(comparison, 'candidate')}"
        f"  · comparison [cyan]{comparison['comparison_id']}[/cyan] (stored in the store's comparisons/)"
    )
    table = _table(
        ("scorer", "n", "baseline", "candidate", "delta", "95% CI", "p", "verdict"),
        left=("scorer", "verdict"),
    )
    for row in comparison["scorers"]:
        if not row.get("n_pairs"):
            table.add_row(row["scorer"], "0", "–", "–", "–", "–", "–", row["verdict"])
            continue
        table.add_row(
            row["scorer"],
            str(row["n_pairs"]),
            numbers.num(row["baseline_mean"]),
            numbers.num(row["candidate_mean"]),
            f"{row['delta']:+.3f}",
            f"[{row['ci_low']:+.3f}, {row['ci_high']:+.3f}] {row.get('ci_method', '')}"
            + (
                f" (judge noise se {row['judge_noise_se']:.3f})"
                if row.get("judge_noise_se") is not None
                else ""
            ),
            numbers.num(row["p_value"]),
            row["verdict"] + (f" ({row['adjustment']})" if row.get("p_adjusted") is not None else ""),
        )
    console.print(table)
    for line in comparison["lines"]:
        console.print(line)
    for row in comparison.get("gauges", []):
        console.print(f"[dim]{gauge_line(row)}[/dim]")
    cost = comparison["cost"]
    if not cost["certified"]:
        console.print(f"cost delta not certified: {cost['reason']}")
    for message in comparison["failed_gates"]:
        console.print(f"[red]gate failed:[/red] {message}")


def print_power(report: dict[str, Any]) -> None:
    console = _console()
    console.print(
        f"items needed to detect a difference of {report['mde'] * 100:g} pts with {report['power'] * 100:g}% power "
        f"(two-sided α = {report['alpha']:g}), from run {report['run_id']}:"
    )
    table = _table(("scorer", "mean", "SD of differences", "items needed", "items in run"), left=("scorer",))
    for row in report["scorers"]:
        table.add_row(
            row["scorer"],
            numbers.num(row["mean"]),
            numbers.num(row["sd_of_differences"]),
            numbers.num(row["items_needed"]),
            str(row["n_scored"]),
        )
    console.print(table)
    console.print(
        "The SD assumes two independent runs of this run's variance; paired runs correlate, so this "
        "over-states what you need (docs/statistics.md)."
    )


def print_agreement(report: dict[str, Any]) -> None:
    console = _console()
    figures = report["agreement"]
    console.print(
        f"[bold]{report['scorer']}[/bold] against people's labels, run {report['run_id']}: "
        f"{report['n_labelled']} of {report['n_scored']} scored items labelled ({figures['scale']} scale)"
        + (f", {report['n_stale']} stale labels left out (the output changed)" if report["n_stale"] else "")
    )
    table = _table(("figure", "value", "interval", "n"), left=("figure",))
    shown = ("accuracy", "kappa", "weighted_kappa", "exact_agreement", "spearman", "mae", "bias")
    for name in (key for key in shown if key in figures):
        figure = figures[name]
        interval = f"[{numbers.num(figure['ci_low'])}, {numbers.num(figure['ci_high'])}]"
        table.add_row(name.replace("_", " "), numbers.num(figure["value"]), interval, str(figure["n"]))
    for name, label in (
        ("judge_mean", "mean, raw judge"),
        ("corrected_mean", "mean, corrected (human scale)"),
    ):
        if (mean := report.get(name)) is not None:
            interval = f"[{numbers.num(mean['ci_low'])}, {numbers.num(mean['ci_high'])}]"
            n = mean["n_labelled"] if name == "corrected_mean" else mean["n_items"]
            table.add_row(label, numbers.num(mean["estimate"]), interval, str(n))
    console.print(table)
    if "confusion" in figures:
        c = figures["confusion"]
        console.print(
            f"confusion (judge vs people): {c['tp']} both pass, {c['fp']} judge only, {c['fn']} people only, {c['tn']} both fail"
        )
    if report.get("corrected_refused"):
        console.print(f"no corrected mean: {report['corrected_refused']}")


def print_labels_power(report: dict[str, Any]) -> None:
    needed, alone = report["labels_needed"], report["labels_alone_needed"]
    _console().print(
        f"{report['scorer']}: a corrected mean with an interval {report['width']:g} wide needs "
        + (f"{needed} labels" if needed is not None else "more labels than the run has items")
        + f" of {report['n_items']} items (the labels alone: {alone}), from the judge-human correlation"
        f" {numbers.num(report['correlation'])} over {report['n_labelled']} labels of run {report['run_id']}"
    )


def print_leaderboard(board: dict[str, Any]) -> None:
    console = _console()
    console.print(
        f"[bold]leaderboard[/bold] matrix [cyan]{board['matrix_id']}[/cyan] (vs {board['baseline_cell']})"
    )
    columns = (
        "scorer",
        "rank",
        "cell",
        "model",
        "mean",
        "95% CI",
        "error rate",
        "$/item",
        "p50 ms",
        "p95 ms",
        "vs baseline",
    )
    table = _table(columns, left=("scorer", "cell", "model", "vs baseline"))
    runs = board.get("runs", {})
    for row in board["rows"]:
        versus = (
            "baseline"
            if row["cell"] == row["baseline_cell"]
            else (
                f"{row['delta_vs_baseline']:+.3f} [{row['delta_ci_low']:+.3f}, {row['delta_ci_high']:+.3f}] "
                f"({row.get('delta_ci_method')}) {row['verdict_vs_baseline']}"
                + (f" ({row['adjustment']}-adjusted)" if row.get("p_adjusted") is not None else "")
                if row["delta_vs_baseline"] is not None
                else str(row["verdict_vs_baseline"] or "–")
            )
        )
        table.add_row(
            row["scorer"],
            str(row["rank"]),
            row["cell"],
            escape(runs.get(row["run_id"], {}).get("model") or "–"),
            numbers.num(row["mean"]),
            f"[{numbers.num(row['ci_low'])}, {numbers.num(row['ci_high'])}] {row.get('ci_method') or ''}",
            numbers.num(row["item_error_rate"] and row["item_error_rate"] * 100, 1) + "%"
            if row["item_error_rate"] is not None
            else "–",
            numbers.usd(row["cost_per_item_usd"]),
            numbers.num(row["latency_p50_ms"], 1),
            numbers.num(row["latency_p95_ms"], 1),
            versus,
        )
    console.print(table)


def print_estimate(report: dict[str, Any]) -> None:
    console = _console()
    console.print(
        f"[bold]estimate[/bold] {report['spec']}: {report['items']} items x {report['trials']} trials"
    )
    columns = ("cell", "kind", "model", "calls", "input tok", "output tok", "expected $", "max $", "note")
    table = _table(columns, left=("cell", "kind", "model", "note"), wraps=("note",))
    for line in report["lines"]:
        table.add_row(
            line.get("cell") or "–",
            line["kind"] + (f" ({line['scorer']})" if line.get("scorer") else ""),
            line.get("model") or "–",
            str(line["calls"]) + (f" (≤{line['calls_max']})" if line.get("calls_max") else ""),
            numbers.num(line.get("input_tokens")),
            numbers.num(line.get("output_tokens_expected")),
            numbers.usd(line.get("cost_usd_expected")),
            numbers.usd(line.get("cost_usd_max")),
            line.get("note", ""),
        )
    console.print(table)
    console.print(escape(estimate_line(report)))


def estimate_line(report: dict[str, Any]) -> str:
    """The estimate's cost in one line: "unknown" first when a model has no price; "at most" only
    for a real maximum (every call's output capped by max_tokens).

    Args:
        report: `assay.analysis.estimate.estimate`'s report.
    """
    expected, most = numbers.usd(report["cost_usd_expected"]), numbers.usd(report["cost_usd_max"])
    if report.get("cost_usd_expected_upper_bound"):
        expected += " (an upper bound: output at max_tokens, no stored run of this spec measured it)"
    if report["cost_usd_max_bounded"]:
        figures = f"expected {expected}, at most {most}"
    else:
        figures = f"expected {expected}, no upper bound (a call without max_tokens)"
    budget = f" · budget {report['budget']}" if report["budget"] else ""
    unpriced = report["unpriced_models"]
    if unpriced:
        names = ", ".join(unpriced)
        head = f"cost unknown: {names} {'is' if len(unpriced) == 1 else 'are'} unpriced (add it to the spec's `prices`)"
        return head + (f"; the priced calls: {figures}" if report["priced_calls"] else "") + budget
    return f"cost {figures}{budget}"


def print_nightly(report: dict[str, Any]) -> None:
    """The nightly benchmark: a line per spec (its comparison, or why there is none), what was pruned."""
    runs = report.get("runs", {})
    for spec in report["specs"]:
        comparison = spec.get("comparison")
        said = comparison["lines"] if comparison else [spec.get("note", "")]
        versus = f" vs {run_named(spec['baseline'], runs)}" if spec.get("baseline") else ""
        print(
            f"{spec['name']} {run_named(spec['run_id'], runs)}{versus} ({spec['status']}): "
            + " | ".join(said)
        )
        if spec.get("removed"):
            print(f"  removed {len(spec['removed'])} old nightly run(s): {', '.join(spec['removed'])}")
    for failure in report["failures"]:
        print(f"gate failed: {failure}")
