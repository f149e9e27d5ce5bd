"""How the report writes values (numbers, percentages and money through `assay.numbers`, the
formatter the terminal and the Prefect artifacts share; dates; missing values) and which colours it
gives words. The functions are the templates' filters: they return plain text, never markup, and
the templates escape what they print."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from assay.numbers import dash
from assay.outcomes import Completeness, ItemOutcome, RunStatus, ScorerOutcome, TokenKind, Verdict

ACCENT = "#3a6fd8"
NEUTRAL = "#7b8794"
# Item and scorer outcomes share some words (`failed`, `cancelled`, `budget_*`): one colour each.
OUTCOME_COLOURS = {
    ItemOutcome.COMPLETED.value: "#2e9d5b",
    ScorerOutcome.SCORED.value: "#2e9d5b",
    ItemOutcome.FAILED.value: "#d64545",
    ScorerOutcome.SKIPPED.value: "#9aa5b1",
    ItemOutcome.CANCELLED.value: "#616e7c",
    ItemOutcome.BUDGET_SKIPPED.value: "#e0a526",
    ItemOutcome.BUDGET_INTERRUPTED.value: "#e07b26",
}
VERDICT_COLOURS = {
    Verdict.REGRESSED.value: "#d64545",
    Verdict.IMPROVED.value: "#2e9d5b",
    Verdict.UNCHANGED.value: NEUTRAL,
    Verdict.INCONCLUSIVE.value: "#e0a526",
}
STATUS_COLOURS = {
    RunStatus.COMPLETED.value: "#2e9d5b",
    RunStatus.FAILED_GATE.value: "#d64545",
    RunStatus.RUNNING.value: ACCENT,
    RunStatus.STOPPED_EARLY.value: "#2e9d5b",
}
COMPLETENESS_COLOURS = {Completeness.COMPLETE.value: "#2e9d5b", Completeness.INCOMPLETE.value: "#e0a526"}
# The heading of each token kind's column; a kind added to `TokenKind` without one fails at import.
_TOKEN_HEADINGS = {
    TokenKind.INPUT: "tokens in",
    TokenKind.OUTPUT: "tokens out",
    TokenKind.REASONING: "reasoning",
    TokenKind.CACHED: "cached",
    TokenKind.CACHE_WRITE: "cache write",
}
TOKEN_HEADINGS = [_TOKEN_HEADINGS[kind] for kind in TokenKind]


def signed(value: float) -> str:
    """A signed figure with one decimal and a true minus sign.

    Args:
        value: the figure.
    """
    return f"{value:+.1f}".replace("-", "−")


def when(value: Any) -> str:
    """A timestamp in UTC to the second.

    Args:
        value: a datetime (anything else is shown as its text).
    """
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return dash(value)
