"""Scoring one output: the run's scorers, their cut-off, and the judging spend they are measured into.

One `Scoring` per run serves every way an item is produced — a target's answer (`assay.run.execute`),
a managed session's best attempt (`assay.run.sessions`), a stored output (`assay.run.rescore`).
Deterministic scorers run in turn on the event loop; the others (model judges, remote evaluators,
user code that awaits) run at once under `scorer_concurrency`, each measured into its own ledger
and capture scope. A closed budget skips the non-deterministic ones; a `CutOff` (a sandbox's
scoring-stage deadline) fails those it stops, the others keep their scores.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, NamedTuple

from assay.calls.accounting import Accounting, Ledger
from assay.calls.capture import Scope
from assay.evaluators import Sample, Scorer, ScoreRecord, evaluate
from assay.outcomes import BudgetClosedBy, ScorerOutcome, SpendKind
from assay.run.plan import RunPlan
from assay.run.rows import BUDGET_REACHED, NO_SPEND, ScoreRow, score_row
from assay.spec.dataset import Item


@dataclass(frozen=True, slots=True)
class CutOff:
    """A deadline for scorers (event-loop time), and what a scorer it cuts off records.

    Args:
        at: the deadline, on the running loop's clock.
        why: the message of a scorer it cut off.
    """

    at: float
    why: str

    def passed(self) -> bool:
        return asyncio.get_running_loop().time() >= self.at


class Scored(NamedTuple):
    """One output's scoring: its score rows, and the judging spend and capture scopes of the
    scorers that may have called a model (deterministic ones spend nothing)."""

    rows: list[ScoreRow]
    judging: list[Accounting]
    scopes: list[Scope]


class Scoring:
    """The run's scorers, ready to score one output at a time.

    Args:
        plan: the run's plan (its scorers, budget, prices, capture and response cache).
    """

    def __init__(self, plan: RunPlan) -> None:
        self._plan = plan
        self._spec_dir = str(plan.spec_dir)
        self._scorers: list[Scorer] = list(plan.spec.scorers)
        self._sync: list[Scorer] = []
        self._async: list[Scorer] = []
        for scorer in self._scorers:
            (self._async if _is_async(scorer, self._spec_dir) else self._sync).append(scorer)

    def in_flight(self, concurrency: int) -> int:
        """Outputs in scoring at once: `concurrency`, or a batched judge's batches' worth
        (`Scorer.in_flight`), so that its batches fill."""
        return max([concurrency, *(scorer.in_flight(concurrency) for scorer in self._scorers)])

    async def score(
        self, item: Item, trial: int, output: Any, *, cut_off: CutOff | None = None, **context: Any
    ) -> Scored:
        """Score one output.

        Args:
            item: the item it answers.
            trial: its trial.
            output: the output.
            cut_off: a deadline for the scorers; one it cuts off (or that would start after it)
                fails with its message, the others keep theirs.
            context: more `Sample` fields (an agent's trajectory, a sandbox's workspace).
        """
        sample = Sample(
            output=output,
            item_id=item.item_id,
            trial=trial,
            input=item.input,
            expected=item.expected,
            annotations=item.annotations,
            fields=item.fields,
            **context,
        )
        rows: list[ScoreRow] = []
        # Sync scorers hold the loop anyway: awaiting them in turn spares a task per scorer per item.
        # They cannot await a model call either, so they have nothing to measure.
        for scorer in self._sync:
            if cut_off is not None and cut_off.passed():
                record = unscored(scorer, ScorerOutcome.FAILED, cut_off.why)
            else:
                record = await evaluate(scorer, sample, spec_dir=self._spec_dir)
            _add_rows(rows, item, trial, record, NO_SPEND, None)
        if not self._async:
            return Scored(rows, [], [])
        if len(self._async) == 1 and cut_off is None:
            results = [await self._measured(self._async[0], sample, item, trial)]
        else:
            limiter = asyncio.Semaphore(self._plan.spec.scorer_concurrency)

            async def bounded(scorer: Scorer) -> tuple[ScoreRecord, Accounting, Scope | None]:
                async with limiter:
                    if cut_off is None:
                        return await self._measured(scorer, sample, item, trial)
                    try:
                        async with asyncio.timeout_at(cut_off.at):
                            return await self._measured(scorer, sample, item, trial)
                    except TimeoutError:
                        return unscored(scorer, ScorerOutcome.FAILED, cut_off.why), Accounting(), None

            results = await asyncio.gather(*(bounded(s) for s in self._async))
        for record, spend, scope in results:
            _add_rows(rows, item, trial, record, spend, scope)
        return Scored(rows, [spend for _, spend, _ in results], [scope for _, _, scope in results if scope])

    async def score_live(self, item: Item, trial: int, attempt: Any) -> Scored:
        """Score an attempt whose sandbox is alive (`assay.targets.container.attempt.ContainerAttempt`)
        within the scoring stage's deadline: scorers it cuts off fail naming it, the others keep
        their scores; a sandbox that cannot be prepared for scoring fails every scorer, never the
        run."""
        cut_off = CutOff(
            asyncio.get_running_loop().time() + attempt.scoring_deadline,
            f"scoring stage exceeded its deadline of {attempt.scoring_deadline:g}s (target.deadlines.scoring)",
        )
        try:
            async with asyncio.timeout_at(cut_off.at):
                await attempt.before_scoring()
        except Exception as exc:  # noqa: BLE001 - a scorer's failure, not the run's
            if isinstance(exc, TimeoutError):
                return self.failed(item, trial, cut_off.why)
            return self.failed(item, trial, f"preparing the sandbox for scoring failed: {exc}")
        result = attempt.result
        return await self.score(
            item,
            trial,
            result.output,
            cut_off=cut_off,
            trajectory=result.trajectory,
            **attempt.sample_context,
        )

    def failed(self, item: Item, trial: int, why: str) -> Scored:
        """Every scorer failed on this item for one reason (its sandbox could not be prepared)."""
        rows = [
            score_row(item, trial, unscored(s, ScorerOutcome.FAILED, why), NO_SPEND, None)
            for s in self._scorers
        ]
        return Scored(rows, [], [])

    async def _measured(
        self, scorer: Scorer, sample: Sample, item: Item, trial: int
    ) -> tuple[ScoreRecord, Accounting, Scope | None]:
        plan = self._plan
        budget = plan.budget
        if budget.closed and not type(scorer).deterministic:
            budget.note_closure(BudgetClosedBy.SCORER)
            return unscored(scorer, ScorerOutcome.BUDGET_SKIPPED, BUDGET_REACHED), Accounting(), None
        scope = plan.capture.scope(item.item_id, trial, scorer.name)
        with Ledger(SpendKind.JUDGING, plan.prices, budget, scope, plan.response_cache) as ledger:
            record = await evaluate(scorer, sample, spec_dir=self._spec_dir)
        return record, ledger.total(), scope


def _add_rows(
    rows: list[ScoreRow], item: Item, trial: int, record: ScoreRecord, spend: Accounting, scope: Scope | None
) -> None:
    """Add a scorer's rows: one, or one per named score of a scorer that answered several (a remote
    evaluator), its spend and calls with the first."""
    if not record.parts:
        rows.append(score_row(item, trial, record, spend, scope))
        return
    for n, part in enumerate(record.parts):
        rows.append(score_row(item, trial, part, spend if n == 0 else NO_SPEND, scope if n == 0 else None))


def unscored(scorer: Scorer, outcome: ScorerOutcome, why: str) -> ScoreRecord:
    """A scorer's record when it did not get to score (the budget, a stage deadline)."""
    return ScoreRecord(
        scorer=scorer.name,
        scorer_kind=scorer.kind,
        scorer_version=type(scorer).version,
        score=None,
        outcome=outcome,
        error=why,
        duration_ms=0.0,
    )


def _is_async(scorer: Scorer, spec_dir: str) -> bool:
    try:
        return scorer.is_async(spec_dir)
    except Exception:  # noqa: BLE001 - an unimportable user scorer fails on every item, where it is recorded
        return False
