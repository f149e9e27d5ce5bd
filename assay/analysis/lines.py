"""A run's summary and a comparison in plain lines, worded once: the terminal prints them around its
tables (`assay/cli/_terminal.py`), a Prefect flow run logs them (`tasks/host.py`) and publishes a
comparison as Markdown (`tasks/publish.py`)."""

from __future__ import annotations

from typing import Any

from assay import numbers
from assay.outcomes import FailureKind, ItemOutcome, ScorerOutcome

# The failure kinds of a reply that was no answer (assay/outcomes.py, `FailureKind`).
NOT_ANSWERS = (FailureKind.REFUSAL, FailureKind.LENGTH, FailureKind.UNASKED_TOOL_CALL)


def cut(text: str, limit: int = 160) -> str:
    """`text` cut to `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def gates_line(summary: dict[str, Any]) -> str:
    """`gates: item error rate 0.0% (...), limit 5.0% passed; scorer judge error rate 6.7% (2
    failed of 30), limit 5.0% FAILED`: every gate the run applied (`run_gates`)."""
    return "gates: " + "; ".join(
        f"{gate['message']} {'passed' if gate['passed'] else 'FAILED'}" for gate in summary.get("gates", [])
    )


def items_line(summary: dict[str, Any]) -> str:
    """`items: 38 completed, 2 failed of 40 planned · item error rate 5.0% (limit 5%, gate passed)`."""
    outcomes = ", ".join(f"{n} {outcome}" for outcome, n in summary["items"].items() if n)
    gate = "passed" if summary["gate_passed"] else "FAILED"
    return (
        f"items: {outcomes or 'none'} of {summary['planned']} planned · item error rate "
        f"{numbers.pct(summary['item_error_rate'])} (limit {summary['fail_on_item_error_rate'] * 100:g}%, gate {gate})"
    )


def failures_line(n_failed: int, groups: list[dict[str, Any]]) -> str:
    """The failed items in one line, grouped by error: `30 failed: connection refused by
    127.0.0.1:8799 (30)`.

    Args:
        n_failed: how many items failed.
        groups: `summary.failure_groups`, most frequent first; a group with error None is the rest.
    """
    named = [f"{cut(g['error'])} ({g['n']})" if g["error"] else f"other errors ({g['n']})" for g in groups]
    return f"{n_failed} failed: " + " · ".join(named)


def answers_line(summary: dict[str, Any]) -> str | None:
    """`answers: 12 as tool calls (15 calls) · 40 reasoned (18,204 reasoning tokens)`: what the
    completed items answered beyond words; None when all answered in words (or the summary
    predates the count)."""
    answers = summary.get("answers") or {}
    said = []
    if answers.get("tool_calls"):
        calls = answers.get("calls", 0)
        said.append(f"{answers['tool_calls']} as tool calls ({calls} call{'s' if calls != 1 else ''})")
    if answers.get("reasoned"):
        tokens = (summary.get("tokens") or {}).get("reasoning") or 0
        said.append(f"{answers['reasoned']} reasoned ({tokens:,} reasoning tokens)")
    return "answers: " + " · ".join(said) if said else None


def not_answered_line(summary: dict[str, Any]) -> str | None:
    """`not answered (failed, never scored): 2 refusal · 1 length`: the replies that were no
    answer, by kind; None when there were none (or the summary predates the count)."""
    kinds = summary.get("failure_kinds") or {}
    named = [f"{kinds[kind]} {kind}" for kind in NOT_ANSWERS if kinds.get(kind)]
    return "not answered (failed, never scored): " + " · ".join(named) if named else None


def no_scores_line(summary: dict[str, Any]) -> str:
    """Why a summary has no scorer rows."""
    completed = summary["items"].get(ItemOutcome.COMPLETED, 0)
    return "no scores: " + ("no item completed" if not completed else "no scorer ran")


def scorer_failed_line(row: dict[str, Any]) -> str | None:
    """`judge: 30 of 30 failed — JudgeError: no score found in …`; None when the scorer never failed.

    Args:
        row: one of `summary.scorers`.
    """
    if not row[ScorerOutcome.FAILED]:
        return None
    total = sum(row.get(outcome, 0) for outcome in ScorerOutcome if outcome is not ScorerOutcome.MEASURED)
    return (
        f"{row['scorer']}: {row[ScorerOutcome.FAILED]} of {total} failed — "
        f"{cut(row.get('first_error') or 'no error recorded')}"
    )


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """A run's summary as the lines a log shows: what ended how, the items, the failures grouped,
    each scorer's mean and counts (and first error), the cost.

    Args:
        summary: a run's summary (`assay.analysis.summary.RunSummary`).
    """
    source = summary.get("source_run_id")
    lines = [
        f"{summary['name']} run {summary['run_id']}"
        + (f" (rescore of {source})" if source else "")
        + (f" cell {summary['cell']}" if summary.get("cell") else "")
        + f": {summary['status']}"
    ]
    if "reasons" in summary:  # unavailable (`assay.run.record.unavailable`): nothing ran
        return [*lines, "nothing ran: " + "; ".join(summary["reasons"])]
    if summary.get("error"):
        lines.append(f"stopped by: {summary['error']} (`assay resume {summary['run_id']}` continues it)")
    lines.append(items_line(summary))
    lines.append(gates_line(summary))
    if summary.get("compare_to"):
        from assay.analysis.monitor import compare_line  # numpy and the sequence: only for such runs

        lines.append(compare_line(summary) or "")
    if summary.get("failures"):
        lines.append(failures_line(summary["items"][ItemOutcome.FAILED], summary["failures"]))
    if not_answered := not_answered_line(summary):
        lines.append(not_answered)
    if not summary["scorers"]:
        lines.append(no_scores_line(summary))
    for row in summary["scorers"]:
        lines.append(
            f"scorer {row['scorer']}: mean {numbers.num(row['mean'])} · "
            + ", ".join(
                f"{row[o]} {o}" for o in (ScorerOutcome.SCORED, ScorerOutcome.FAILED, ScorerOutcome.SKIPPED)
            )
        )
    lines += [line for row in summary["scorers"] if (line := scorer_failed_line(row))]
    lines.append(numbers.cost_line(summary["cost"]))
    return lines


def gauge_line(row: dict[str, Any]) -> str:
    """`gauge.duration_ms 1,834 ms → 1,620 ms (−11.7%) over 40 pairs`: one gauge's paired means,
    in its unit (`numbers.gauge`: `$0.000026`, never `2.6e-05`)."""
    change = "" if row["change_pct"] is None else f" ({signed(row['change_pct'])}%)"
    name = row["gauge"]
    return (
        f"{name} {numbers.gauge(name, row['baseline_mean'])} → {numbers.gauge(name, row['candidate_mean'])}"
        f"{change} over {row['n_pairs']} pairs"
    )


def comparison_markdown(comparison: dict[str, Any]) -> str:
    """The comparison for people: the human lines, the per-scorer table, the gauges, the gates, the
    runs."""
    lines = [f"# Comparison {comparison['comparison_id']}", ""]
    lines += [f"- **{line}**" for line in comparison["lines"]]
    lines += [
        "",
        "| scorer | n | baseline | candidate | delta | 95% CI | p | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in comparison["scorers"]:
        if not row.get("n_pairs"):
            lines.append(f"| {row['scorer']} | 0 | | | | | | {row['verdict']} |")
            continue
        lines.append(
            f"| {row['scorer']} | {row['n_pairs']} | {row['baseline_mean']:.3f} | {row['candidate_mean']:.3f} | "
            f"{row['delta']:+.3f} | [{row['ci_low']:+.3f}, {row['ci_high']:+.3f}] | {row['p_value']:.3g} | "
            f"{row['verdict']} |"
        )
    gauges = comparison.get("gauges", [])
    if gauges:
        # Measurements of the targets' work, paired like the scores; informative, never a verdict.
        lines += ["", "Gauges (paired means; no verdict):", "", *(f"- {gauge_line(row)}" for row in gauges)]
    lines += [
        "",
        f"Baseline runs: {', '.join(comparison['baseline'])}",
        "",
        f"Candidate runs: {', '.join(comparison['candidate'])}",
        "",
    ]
    failed = comparison["failed_gates"]
    lines += (
        ["Gates: all passed."] if not failed else ["Gates failed:", *(f"- {message}" for message in failed)]
    )
    return "\n".join(lines)


def signed(value: float) -> str:
    """`+1.5` / `−1.5`: one decimal, a true minus sign."""
    return f"{value:+.1f}".replace("-", "−")
