"""How the report writes values (numbers, percentages, money, dates, missing values) and which
colours it gives words. The functions are the templates' filters: they return plain text, never
markup, and the templates escape what they print."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any, NamedTuple

from assay.outcomes import Completeness, ItemOutcome, RunStatus, ScorerOutcome, TokenKind, Verdict

DASH = "–"
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


def dash(value: Any) -> str:
    """The text of a value, '–' for nothing (None or NaN).

    Args:
        value: anything.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return DASH
    return str(value)


def num(value: Any, digits: int = 3) -> str:
    """A number: floats to `digits` places, integers with thousands separators, '–' for nothing.

    Args:
        value: the number (anything else is shown as its text).
        digits: places after the point, for floats.
    """
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return DASH
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else dash(value)


def pct(value: float | None, digits: int = 1) -> str:
    """A fraction as a percentage.

    Args:
        value: the fraction (None: '–').
        digits: places after the point.
    """
    return DASH if value is None else f"{value * 100:.{digits}f}%"


def usd(value: float) -> str:
    """Dollars, with as many digits as a small figure needs.

    Args:
        value: the amount.
    """
    if value == 0:
        return "$0"
    if abs(value) >= 100:
        return f"${value:,.2f}"
    return f"${value:.4g}" if abs(value) >= 0.001 else f"${value:.3g}"


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


def reasons_text(reasons: dict[str, int]) -> str:
    """Why accounting is incomplete: `unpriced ×3, uninstrumented ×1`.

    Args:
        reasons: counts by reason.
    """
    return ", ".join(f"{name} ×{n}" for name, n in sorted(reasons.items()) if n)


class Money(NamedTuple):
    """A cost as shown: the figure, and for accounting that is not complete, why (`note`)."""

    figure: str
    note: str | None


def money_parts(
    amount: float | None, completeness: str | None, reasons: dict[str, int] | None = None
) -> Money:
    """A cost that never reads as a bare $0 when its accounting is not complete: complete figures
    as they are, incomplete ones as a lower bound (or "unknown" when nothing was measured) with
    the reasons.

    Args:
        amount: the measured dollars (None: 0).
        completeness: the accounting's completeness (None: complete).
        reasons: why it is incomplete, counted.
    """
    amount = amount or 0.0
    if completeness in (None, Completeness.COMPLETE):
        return Money(usd(amount), None)
    label = Completeness.UNVERIFIED if completeness == Completeness.UNVERIFIED else Completeness.INCOMPLETE
    why = reasons_text(reasons or {})
    return Money(f"≥ {usd(amount)}" if amount > 0 else "unknown", f"{label}: {why}" if why else label.value)
