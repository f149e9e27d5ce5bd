"""How Assay writes numbers for people — one formatter for the terminal, the HTML report and the
Prefect artifacts, so a figure reads the same wherever it is shown.

Money in plain decimals with the digits a small figure needs (`$0.000056`, never `5.59e-05`),
milliseconds rounded (`8,665 ms`, `3.2 ms`), ratios as percentages (`3.3%`), and a dash for a
value that is not there. Plain text, never markup: the report's templates escape what they print.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from assay.outcomes import Completeness

DASH = "–"


def missing(value: Any) -> bool:
    """Whether `value` is nothing to show: None, or a float that is not finite."""
    return value is None or (isinstance(value, float) and not math.isfinite(value))


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
    if missing(value):
        return DASH
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else dash(value)


def pct(value: float | None, digits: int = 1) -> str:
    """A ratio as a percentage: `0.0333` → `3.3%`.

    Args:
        value: the ratio (None: '–').
        digits: places after the point.
    """
    return DASH if missing(value) else f"{value * 100:.{digits}f}%"


def usd(value: float | None) -> str:
    """Dollars in plain decimals: cents for large sums, four significant digits down to a cent,
    two below it — `$1,234.57`, `$0.1235`, `$0.000056`, `$0`.

    Args:
        value: the amount (None: '–').
    """
    if missing(value):
        return DASH
    assert value is not None
    if value == 0:
        return "$0"
    sign, size = ("-" if value < 0 else ""), abs(value)
    if size >= 100:
        return f"{sign}${size:,.2f}"
    if size >= 0.01:
        return f"{sign}${size:.4g}"
    places = 1 - math.floor(math.log10(size))  # two significant digits
    return f"{sign}${size:.{places}f}".rstrip("0")


def ms(value: float | None) -> str:
    """Milliseconds, rounded: whole from 10 ms up (`8,665 ms`), one decimal below (`3.2 ms`).

    Args:
        value: the duration in ms (None: '–').
    """
    if missing(value):
        return DASH
    assert value is not None
    return f"{value:,.0f} ms" if abs(value) >= 10 else f"{value:.1f} ms"


def gauge(name: str, value: float | None) -> str:
    """A gauge's value in its unit, which its name ends with (`gauge.cost_usd`, `gauge.duration_ms`);
    counts and other measures with up to six significant digits.

    Args:
        name: the gauge's name.
        value: its value.
    """
    if name.endswith("_usd"):
        return usd(value)
    if name.endswith("_ms"):
        return ms(value)
    return DASH if missing(value) else f"{value:,.6g}"


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


def cost_line(cost: dict[str, Any]) -> str:
    """The run's cost with its completeness: `cost $0.000056 (complete)`, `cost unknown: gpt-x is
    unpriced`, `cost ≥ $0.0012 (incomplete: unknown_outcome ×2)`.

    Args:
        cost: the summary's `cost`.
    """
    shown = money_parts(cost["usd"], cost["completeness"], cost["reasons"])
    unpriced = cost.get("unpriced_models") or []
    if unpriced:
        models = ", ".join(unpriced)
        why = f"{models} {'is' if len(unpriced) == 1 else 'are'} unpriced (add it to the spec's `prices`)"
        return f"cost {shown.figure}: {why}"
    return f"cost {shown.figure} ({shown.note or 'complete'})"


def rate_facts(rate: dict[str, Any]) -> dict[str, Any]:
    """A run's rate controller (its `rate_control`) in a few figures: where its window is shared
    (`local`, `dask`), its ceiling, peak and final window, the answers seen and refused for rate,
    the time no call could leave, the `rpm` / `tpm` it paced to and the pace it learned. Windows to
    one decimal.

    Args:
        rate: the summary's `rate_control` (`assay.calls.rate.RateController.summary`); runs
            stored before `peak` / `paused_s` existed get the peak from the history.
    """
    rows = rate["history"]["rows"]
    return {
        "endpoint": rate["endpoint"],
        "share": rate.get("share", "local"),
        "members": rate.get("members"),
        "ceiling": rate["ceiling"],
        "peak": round(rate.get("peak", max((row[1] for row in rows), default=rate["limit"])), 1),
        "final": round(rate["limit"], 1),
        "responses": rate["responses"],
        "rate_limited": rate["rate_limited"],
        "paused_s": rate.get("paused_s"),
        "rpm": rate.get("rpm"),
        "tpm": rate.get("tpm"),
        "learned_rpm": rate.get("learned_rpm"),
    }


def rate_worth_showing(rate: dict[str, Any] | None) -> bool:
    """Whether a run's rate controller did anything to tell: answers refused for rate, a pause,
    or a window shared with other processes (`assay show` and the report show it then)."""
    return bool(rate) and bool(
        rate["rate_limited"] or rate.get("paused_s") or rate.get("share", "local") != "local"
    )


def rate_line(rate: dict[str, Any]) -> str:
    """The rate controller in one line: `rate control (http://… m, shared through dask by 2
    processes): window peak 12 final 7.5 of 32 · 31 of 640 answers 429 · paused 4.2 s · paced
    to 1200 rpm · pace learned 1020 rpm`.

    Args:
        rate: the summary's `rate_control`.
    """
    f = rate_facts(rate)
    shared = f", shared through {f['share']}" if f["share"] != "local" else ""
    if shared and f["members"]:
        shared += f" by {f['members']} processes"
    paced = " and ".join(f"{f[k]:g} {k}" for k in ("rpm", "tpm") if f.get(k))
    return (
        f"rate control ({f['endpoint']}{shared}): window peak {f['peak']:g} final {f['final']:g} "
        f"of {f['ceiling']} · {f['rate_limited']} of {f['responses']} answers 429"
        + (f" · paused {f['paused_s']:.1f} s" if f["paused_s"] else "")
        + (f" · paced to {paced}" if paced else "")
        + (f" · pace learned {f['learned_rpm']:g} rpm" if f.get("learned_rpm") else "")
    )
