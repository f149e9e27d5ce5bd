"""Running one scorer on one sample, turning whatever happens into a `ScoreRecord`."""

from __future__ import annotations

import inspect
import math
import numbers
import time
from dataclasses import dataclass
from typing import Any

from assay.errors import BudgetDenied, ScorerNotApplicable
from assay.evaluators._base import Sample, Score, Scorer
from assay.evaluators._imports import import_callable, make_importable
from assay.outcomes import GAUGE_PREFIX, ScorerOutcome

_REPR_LIMIT = 200
# What scorers answer nearly always: checked by type first, since the ABC checks below (an
# awaitable? a `numbers.Real`?) cost more than the rest of a deterministic scorer's call.
_REAL = frozenset({bool, int, float})
_PLAIN = _REAL | {Score}


# Not frozen: two are made per item on the hot path, and a frozen one costs three times as much.
@dataclass(slots=True)
class ScoreRecord:
    """One scorer's result on one item x trial, as stored.

    Args:
        scorer: the scorer's name (its score column).
        scorer_kind: its `kind`.
        scorer_version: its class's `version`.
        score: the value in [0, 1]; None unless the outcome is `scored` (or, for a remote
            evaluator's gauge, `measured`: then the measurement, in its own unit).
        outcome: scored, failed, skipped or measured.
        error: why it failed, or None.
        duration_ms: wall time of `applies` and `score` together.
        explanation: the scorer's explanation, if it gave one.
        metadata: the scorer's metadata, if it gave any.
        label: a remote evaluator's label.
        judge_variance: a judge asked K times: the K scores' sample variance.
        judge_samples: that K.
        parts: for a scorer that returned several named scores: one record each (stored instead
            of this one).
    """

    scorer: str
    scorer_kind: str
    scorer_version: str
    score: float | None
    outcome: ScorerOutcome
    error: str | None
    duration_ms: float
    explanation: str | None = None
    metadata: dict[str, Any] | None = None
    label: str | None = None
    judge_variance: float | None = None
    judge_samples: int | None = None
    parts: tuple[ScoreRecord, ...] = ()


def _cut(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _REPR_LIMIT else text[: _REPR_LIMIT - 3] + "..."


async def evaluate(scorer: Scorer, sample: Sample, *, spec_dir: str | None = None) -> ScoreRecord:
    """Run `scorer` on `sample`. Never raises for the scorer's faults: they become `failed` records.

    Args:
        scorer: the scorer spec.
        sample: what it scores.
        spec_dir: the spec's folder, made importable for `applies` and user scorers.

    Raises:
        asyncio.CancelledError: when the task is cancelled; the caller records that.
    """
    start = time.perf_counter()
    # `except Exception` on purpose: CancelledError is a BaseException and must reach the caller.
    try:
        # Only code the spec names is imported from its folder (most scorers import nothing).
        if scorer.applies is not None or type(scorer).imports_code:
            make_importable(spec_dir)
        if scorer.applies is not None:
            applies = import_callable(scorer.applies)
            applied = applies(sample.output, sample.input, sample.annotations)
            if inspect.isawaitable(applied):
                applied = await applied
            if not applied:
                return _record(scorer, start, ScorerOutcome.SKIPPED)
        result = scorer.score(sample)
        if type(result) not in _PLAIN and inspect.isawaitable(result):
            result = await result
    except BudgetDenied as exc:
        return _record(scorer, start, ScorerOutcome.BUDGET_INTERRUPTED, error=str(exc))
    except ScorerNotApplicable as exc:
        return _record(scorer, start, ScorerOutcome.SKIPPED, explanation=str(exc))
    except Exception as exc:  # noqa: BLE001
        # An exception may carry the scorer's metadata (an LLM judge's unreadable reply): keep it.
        metadata = getattr(exc, "metadata", None)
        return _record(
            scorer,
            start,
            ScorerOutcome.FAILED,
            error=f"{type(exc).__name__}: {exc}",
            metadata=metadata if isinstance(metadata, dict) else None,
        )

    if type(result) in _REAL and 0 <= result <= 1:  # nearly every answer: the plain record at once
        return ScoreRecord(
            scorer.name,
            scorer.kind,
            type(scorer).version,
            float(result),
            ScorerOutcome.SCORED,
            None,
            (time.perf_counter() - start) * 1000,
        )
    if isinstance(result, list) and result and all(isinstance(part, Score) and part.name for part in result):
        parts = tuple(_checked(scorer, start, sample, part) for part in result)
        return ScoreRecord(**{**_fields(_record(scorer, start, ScorerOutcome.SCORED)), "parts": parts})
    return _checked(scorer, start, sample, result)


def _record(
    scorer: Scorer,
    start: float,
    outcome: ScorerOutcome,
    *,
    score: float | None = None,
    error: str | None = None,
    explanation: str | None = None,
    metadata: dict[str, Any] | None = None,
    name: str | None = None,
    label: str | None = None,
    judge_variance: float | None = None,
    judge_samples: int | None = None,
) -> ScoreRecord:
    """`scorer`'s record, its duration measured from `start` (`time.perf_counter`) until now."""
    return ScoreRecord(
        scorer=scorer.name if name is None else f"{scorer.name}.{name}",
        scorer_kind=scorer.kind,
        scorer_version=type(scorer).version,
        score=score,
        outcome=outcome,
        error=error,
        duration_ms=(time.perf_counter() - start) * 1000,
        explanation=explanation,
        metadata=metadata,
        label=label,
        judge_variance=judge_variance,
        judge_samples=judge_samples,
    )


def _fields(record: ScoreRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in ScoreRecord.__slots__}


def _measured(scorer: Scorer, start: float, sample: Sample, gauge: Score) -> ScoreRecord:
    """A named gauge's record: `measured` when its value is a finite number (in any unit), under
    `gauge.<scorer>.<name>`; failed otherwise."""
    value = gauge.value
    if not (type(value) in _REAL or isinstance(value, numbers.Real)) or not math.isfinite(value):
        return _record(
            scorer,
            start,
            ScorerOutcome.FAILED,
            error=(
                f"scorer {scorer.name!r} returned gauge {gauge.name!r} = {_cut(value)} for input "
                f"{_cut(sample.input)}: a gauge must be a finite number"
            ),
            name=gauge.name,
            label=gauge.label,
        )
    measured = _record(
        scorer,
        start,
        ScorerOutcome.MEASURED,
        score=float(value),
        explanation=gauge.explanation,
        metadata=gauge.metadata,
        name=gauge.name,
        label=gauge.label,
    )
    return ScoreRecord(**{**_fields(measured), "scorer": f"{GAUGE_PREFIX}{measured.scorer}"})


def _checked(scorer: Scorer, start: float, sample: Sample, result: Any) -> ScoreRecord:
    """The record of one answer: scored when it is a finite number in [0, 1], failed otherwise."""
    explanation = metadata = name = label = judge_variance = judge_samples = None
    if isinstance(result, Score):
        name, label, explanation, metadata = result.name, result.label, result.explanation, result.metadata
        judge_variance, judge_samples = result.judge_variance, result.judge_samples
        if result.gauge and name and label != "error":
            return _measured(scorer, start, sample, result)
        result = result.value
    if label == "error":
        return _record(
            scorer,
            start,
            ScorerOutcome.FAILED,
            error=explanation or "the evaluator reported an error",
            name=name,
            label=label,
        )
    # bool is a numbers.Real; the chained comparison is False for NaN and the infinities.
    if not ((type(result) in _REAL or isinstance(result, numbers.Real)) and 0 <= result <= 1):
        return _record(
            scorer,
            start,
            ScorerOutcome.FAILED,
            error=(
                f"scorer {scorer.name!r} returned {_cut(result)} for input {_cut(sample.input)}: "
                "scores must be finite numbers in [0, 1]"
            ),
            name=name,
            label=label,
        )
    return _record(
        scorer,
        start,
        ScorerOutcome.SCORED,
        score=float(result),
        explanation=explanation,
        metadata=metadata,
        name=name,
        label=label,
        judge_variance=judge_variance,
        judge_samples=judge_samples,
    )
