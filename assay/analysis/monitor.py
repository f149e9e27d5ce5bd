"""A run's sequential compare (`compare_to`): the confidence sequence updated after each batch.

The run visits its items in a seeded random order (`assay.run.compare_to.seeded_order`). After
each committed batch the monitor extends the sequence over the longest prefix of that order
whose items are all committed — never over items that happened to finish early, so which items
the sequence sees does not depend on how long they took — skipping items not scored on both
sides. Once the verdict is known (and `stop: decided`), `stop` turns true: the run admits no
more items, finishes those in flight, and closes as `stopped_early`.

`sequence_of` recomputes the same sequence from the stored rows, so `assay compare` and the
report give the run's own verdict and interval, at the item count the run decided at.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from assay._lazy import lazy_module
from assay.analysis.sequential import ConfidenceSequence, SequenceState
from assay.outcomes import ItemOutcome, RunStatus, ScorerOutcome, Verdict
from assay.run.compare_to import CommitMonitor, seeded_key
from assay.run.plan import RunPlan
from assay.store import Store

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")


def scores_by_pair(scores: pl.DataFrame, scorer: str) -> dict[tuple[str, int], float]:
    """One run's scored values of `scorer` by (item_id, trial)."""
    scored = scores.filter((pl.col("scorer") == scorer) & (pl.col("outcome") == ScorerOutcome.SCORED))
    return {
        (item_id, trial): score
        for item_id, trial, score in scored.select("item_id", "trial", "score").iter_rows()
    }


class SequentialMonitor:
    """The sequence of one run against its baseline, fed in the run's seeded order.

    Args:
        order: (item_id, trial) in the run's seeded order.
        baseline: the baseline's scores of the scorer by (item_id, trial).
        alpha: the sequence's alpha.
        threshold: the verdict's threshold.
        scorer: the scorer compared.
        stops: whether a verdict stops the run (`stop: decided`) or is only recorded (`never`).
    """

    def __init__(
        self,
        order: list[tuple[str, int]],
        baseline: dict[tuple[str, int], float],
        *,
        alpha: float,
        threshold: float,
        scorer: str,
        stops: bool,
    ) -> None:
        self.scorer = scorer
        self._order = order
        self._baseline = baseline
        self._candidate: dict[tuple[str, int], float | None] = {}
        self._next = 0
        self._stops = stops
        self.sequence = ConfidenceSequence(alpha=alpha, threshold=threshold)
        self.path: list[tuple[int, float, float]] = []  # (pairs, low, high) after each batch
        self.decided: SequenceState | None = None
        self.decided_at: int | None = None  # resuming: the pairs it decided at before
        self.stop = False

    def committed(self, items: list[dict[str, Any]], scores: list[dict[str, Any]]) -> None:
        """Take a committed batch's item and score rows; extend the sequence over the new prefix."""
        for row in items:
            self._candidate.setdefault((row["item_id"], row["trial"]), None)
        for row in scores:
            if row.get("scorer") == self.scorer and row.get("outcome") == ScorerOutcome.SCORED:
                self._candidate[(row["item_id"], row["trial"])] = row["score"]
        deltas = []
        while self._next < len(self._order) and self._order[self._next] in self._candidate:
            key = self._order[self._next]
            mine, theirs = self._candidate[key], self._baseline.get(key)
            if mine is not None and theirs is not None:
                deltas.append(mine - theirs)
            self._next += 1
        # A resumed run that had decided looks again exactly where it decided: the same verdict.
        cut = (self.decided_at or 0) - self.sequence.state.n
        if 0 < cut < len(deltas):
            self._feed(deltas[:cut])
            deltas = deltas[cut:]
        self._feed(deltas)

    def _feed(self, deltas: list[float]) -> None:
        if not deltas:
            return
        self.sequence.update(deltas)
        state = self.sequence.state
        self.path.append((state.n, state.low, state.high))
        if self.decided is None and state.verdict != Verdict.INCONCLUSIVE:
            self.decided = state
            self.stop = self._stops

    def columns(self) -> dict[str, Any]:
        """The run record's `compare_*` result columns: at the decision when it stopped the run,
        else (monitor only, or undecided) over every pair the run has."""
        state = self.decided if self._stops and self.decided is not None else self.sequence.state
        return {
            "compare_verdict": state.verdict.value,
            "compare_items": state.n,
            "compare_delta": _finite(state.mean),
            "compare_low": _finite(state.low),
            "compare_high": _finite(state.high),
        }


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def monitor_for(plan: RunPlan) -> SequentialMonitor | None:
    """The plan's monitor when its spec has `compare_to`, fed what earlier executions committed."""
    compare = plan.spec.compare_to
    if compare is None:
        return None
    scorer = plan.spec.compared_scorer
    assert scorer is not None and compare.baseline is not None  # `with_compare_to` gave one
    order = [(plan.items[position].item_id, trial) for position, trial in plan.work]
    monitor = SequentialMonitor(
        order,
        scores_by_pair(plan.store.run_scores(compare.baseline), scorer),
        alpha=compare.alpha,
        threshold=compare.threshold,
        scorer=scorer,
        stops=compare.stop == "decided",
    )
    if plan.record.get("compare_verdict") not in (None, Verdict.INCONCLUSIVE):
        monitor.decided_at = plan.record.get("compare_items")
    if plan.done:  # a resumed run: what its earlier executions committed, as one batch
        feed_stored(monitor, plan)
    return monitor


def feed_stored(monitor: CommitMonitor, plan: RunPlan) -> None:
    """Feed `monitor` every row the run has committed, as one batch (rows it saw already change
    nothing)."""
    items = plan.store.run_items(plan.run_id).select("item_id", "trial").to_dicts()
    scores = plan.store.run_scores(plan.run_id).select("item_id", "trial", "scorer", "outcome", "score")
    monitor.committed(items, scores.to_dicts())


def sequence_of(store: Store, run_id: str, baseline_run: str | None = None) -> dict[str, Any] | None:
    """A sequential run's confidence sequence recomputed from the store: its verdict, interval and
    path over the pairs it used (all of them with `compare_items` unset). None for another run.

    Args:
        store: the store.
        run_id: the candidate run.
        baseline_run: only if the run's `compare_to` baseline is this run.
    """
    record = store.read_run(run_id)
    baseline = record.get("compare_baseline")
    if not baseline or (baseline_run is not None and baseline_run != baseline):
        return None
    scorer, seed = record["compare_scorer"], record["seed"]
    mine = scores_by_pair(store.run_scores(run_id), scorer)
    theirs = scores_by_pair(store.run_scores(baseline), scorer)
    pairs = sorted((k for k in mine if k in theirs), key=lambda k: seeded_key(seed, k[0], k[1]))
    used = record.get("compare_items")
    pairs = pairs[:used] if used is not None else pairs
    sequence = ConfidenceSequence(alpha=record["compare_alpha"], threshold=record["compare_threshold"])
    path = sequence.update([mine[k] - theirs[k] for k in pairs])
    state = sequence.state
    return {
        "baseline": baseline,
        "scorer": scorer,
        "threshold": state.threshold,
        "alpha": state.alpha,
        "stop": record.get("compare_stop"),
        "stopped_early": record["status"] == RunStatus.STOPPED_EARLY,
        "verdict": state.verdict.value,
        "items": state.n,
        "delta": _finite(state.mean),
        "low": _finite(state.low),
        "high": _finite(state.high),
        "path": [(n + 1, low, high) for n, (low, high) in enumerate(path)],
    }


def compare_line(summary: dict[str, Any]) -> str | None:
    """Why a sequential run stopped (or where its compare stands), in one line; None without one.

    `stopped early after 523 of 2000 items: accuracy regressed vs run R (Δ −5.2 pts, 95 %
    confidence sequence [−8.1, −2.3], threshold 2 pts)`.
    """
    compare = summary.get("compare_to")
    if not compare:
        return None
    confidence = f"{(1 - compare['compare_alpha']) * 100:g} %"
    interval = (
        f"Δ {compare['compare_delta'] * 100:+.1f} pts, {confidence} confidence sequence "
        f"[{compare['compare_low'] * 100:+.1f}, {compare['compare_high'] * 100:+.1f}]"
        if compare["compare_delta"] is not None
        else "no pairs yet"
    )
    verdict = (
        f"{compare['compare_scorer']} {compare['compare_verdict']} vs run {compare['compare_baseline']} "
        f"({interval}, threshold {compare['compare_threshold'] * 100:g} pts, over {compare['compare_items']} pairs)"
    )
    if summary["status"] == RunStatus.STOPPED_EARLY:
        done = sum(n for outcome, n in summary["items"].items() if outcome != ItemOutcome.CANCELLED)
        return f"stopped early after {done} of {summary['planned']} items: {verdict}"
    return f"sequential compare: {verdict}"
