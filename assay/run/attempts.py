"""Attempts: each item x trial of a run with a `policy` or `attempts` > 1, as managed sessions.

Each attempt is a fresh `Session` (`assay.run.sessions`) with the target, admitted by the run's
`Gate`, driven by the policy (without one: one `start` with the item's prompt), and — when it
completed — scored by the run's `Scoring`. Every prompt is recorded as a row of `turns`.

    SessionItems(item, trial)               one item x trial: up to `attempts` attempts, the best kept
    ├── _Attempt                            one attempt: its session, driven, then scored
    │   ├── drive(session, policy)          the policy over the session -> the attempt's TargetResult
    │   └── (container) open_session        a fresh container per attempt, alive until it is scored
    └── best_attempt / attempt_passes       which attempt is kept, and when to stop early

An attempt passes when it completed, at least one scorer scored, and every scorer that did not
skip the item scored 1. Attempts stop at the first that passes; the best attempt is that one, else
the completed attempt with the highest mean score (the earliest of equals), else the last. The
item's row is the best attempt's, with every attempt's spend, tokens and duration (docs/sessions.md).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from assay.calls.accounting import Accounting
from assay.calls.capture import Scope
from assay.evaluators._imports import import_callable
from assay.outcomes import TOKEN_COLUMNS, TOKEN_KINDS, ItemOutcome, ScorerOutcome, token_column
from assay.run.admit import Called, Gate, Opening
from assay.run.rows import (
    Finished,
    ItemRow,
    ScoreRow,
    TurnRow,
    captured,
    completed_row,
    failed_row,
    gauge_values,
    skipped_row,
    to_json,
)
from assay.run.scoring import Scored, Scoring
from assay.run.sessions import Policy, Session, drive
from assay.spec.dataset import Item
from assay.targets import SessionTarget, TargetResult, kind_of


def attempt_passes(score_rows: list[ScoreRow]) -> bool:
    """Whether an attempt's scores pass: at least one scorer scored, and every scorer that did
    not skip the item scored 1 (a failed scorer is not a pass; a remote evaluator's gauge, a
    measurement, does not count)."""
    judged = [r for r in score_rows if r["outcome"] not in (ScorerOutcome.SKIPPED, ScorerOutcome.MEASURED)]
    return bool(judged) and all(r["outcome"] == ScorerOutcome.SCORED and r["score"] >= 1.0 for r in judged)


@dataclass(slots=True)
class _Attempt:
    """One attempt: its item row (outcome, output, failure), scores, spend and turns."""

    number: int
    row: ItemRow
    session: Session | None = None
    scores: list[ScoreRow] = field(default_factory=list)
    generation: Accounting = field(default_factory=Accounting)
    judging: list[Accounting] = field(default_factory=list)
    scopes: list[Scope | None] = field(default_factory=list)
    passed: bool = False
    queued_ms: float | None = None
    result: TargetResult | None = None

    @property
    def completed(self) -> bool:
        return self.row["outcome"] == ItemOutcome.COMPLETED

    @property
    def mean(self) -> float | None:
        scored = [r["score"] for r in self.scores if r["outcome"] == ScorerOutcome.SCORED]
        return sum(scored) / len(scored) if scored else None


def best_attempt(attempts: list[_Attempt]) -> _Attempt:
    """The passing attempt, else the completed one with the highest mean score (earliest of
    equals), else the last."""
    for attempt in attempts:
        if attempt.passed:
            return attempt
    completed = [a for a in attempts if a.completed]
    if completed:
        return max(completed, key=lambda a: (-1.0 if a.mean is None else a.mean, -a.number))
    return attempts[-1]


class SessionItems:
    """Each item as managed sessions (a spec with a policy or attempts): every attempt admitted
    by the run's gate, its answer the policy's, scored by the run's scorers.

    Args:
        target: the open target.
        gate: the run's gate.
        scoring: the run's scorers.
    """

    def __init__(self, target: SessionTarget, gate: Gate, scoring: Scoring) -> None:
        self._target = target
        self._gate = gate
        self._scoring = scoring
        plan = gate.plan
        self._policy: Policy | None = (
            import_callable(plan.spec.policy, spec_dir=str(plan.spec_dir)) if plan.spec.policy else None
        )
        self._attempts = plan.spec.attempts
        # A kind whose attempts are live sandboxes (`container`) holds each in its own container.
        self._live = kind_of(plan.spec.target).live_attempts

    async def __call__(self, item: Item, trial: int) -> Finished:
        """Up to `attempts` attempts of one item x trial, stopping at one that passes; returns the
        best attempt's item and score rows (spend and tokens of every attempt) and every turn."""
        attempts: list[_Attempt] = []
        for number in range(1, self._attempts + 1):
            attempt = await self._attempt(item, trial, number)
            if attempt is None:  # the budget closed before this attempt
                break
            attempts.append(attempt)
            if attempt.passed or attempt.row["outcome"] in (
                ItemOutcome.BUDGET_SKIPPED,
                ItemOutcome.BUDGET_INTERRUPTED,
            ):
                break
        return _finished(attempts)

    async def _attempt(self, item: Item, trial: int, number: int) -> _Attempt | None:
        gate, target = self._gate, self._target
        async with gate as opening:
            if opening is None:
                return None if number > 1 else _Attempt(number, skipped_row(item, trial))
            if not self._live:
                session = Session(target, item, trial, number)
                called = await gate.call(
                    item,
                    trial,
                    opening,
                    lambda: drive(session, self._policy),
                    instrumented=target.instrumented,
                )
                attempt = self._called(item, trial, number, session, opening, called)
            else:  # the container lives through the policy and the scorers: its slot is held
                return await self._live_attempt(item, trial, number, opening)
        if attempt.result is not None:
            await self._score(
                attempt,
                item,
                trial,
                self._scoring.score(
                    item,
                    trial,
                    attempt.result.output,
                    trajectory=attempt.result.trajectory,
                    tool_calls=attempt.result.calls,
                ),
            )
        return attempt

    async def _live_attempt(self, item: Item, trial: int, number: int, opening: Opening) -> _Attempt:
        """An attempt in a fresh container (`ContainerSession`): the policy drives the agent in
        it, then its workspace is exported and it is scored alive; torn down last."""
        container: Any = self._target  # a `ContainerAgent`: its kind's attempts are live
        box = await container.open_session(item, trial, number)
        session = Session(box, item, trial, number)
        try:

            async def answer() -> TargetResult:
                if box.failure is not None:  # provisioning failed: no prompt could be sent
                    raise box.failure
                return await drive(session, self._policy)

            called = await self._gate.call(item, trial, opening, answer, instrumented=False)
            attempt = self._called(item, trial, number, session, opening, called)
            if attempt.result is not None:
                live = await box.finish(attempt.result)
                if live.failure is not None:
                    attempt.row, attempt.result = (
                        failed_row(item, trial, opening.started_at, opening.started, live.failure),
                        None,
                    )
                else:
                    attempt.result = live.result
                    attempt.row = completed_row(
                        item, trial, opening.started_at, called.duration_ms, live.result
                    )
                    await self._score(attempt, item, trial, self._scoring.score_live(item, trial, live))
        finally:
            teardown_error = await box.close()
        attempt.row["teardown_error"] = teardown_error
        attempt.row["sandbox"] = to_json(box.state.facts)  # now with the scoring and cleanup timings
        return attempt

    def _called(
        self, item: Item, trial: int, number: int, session: Session, opening: Opening, called: Called
    ) -> _Attempt:
        attempt = _Attempt(
            number,
            {},
            session,
            generation=called.generation,
            scopes=[called.scope],
            queued_ms=opening.queued_ms,
        )
        if called.result is None:
            attempt.row = called.stopped
        else:
            attempt.row = completed_row(item, trial, opening.started_at, called.duration_ms, called.result)
            attempt.result = called.result
        return attempt

    async def _score(self, attempt: _Attempt, item: Item, trial: int, scoring: Awaitable[Scored]) -> None:
        scored = await scoring
        attempt.scores, attempt.judging = scored.rows, scored.judging
        attempt.scopes += scored.scopes
        attempt.passed = attempt_passes(attempt.scores)


def _finished(attempts: list[_Attempt]) -> Finished:
    """The item's rows: the best attempt's, with every attempt's spend, tokens and turns."""
    best = best_attempt(attempts)
    row = dict(best.row)
    turns = [t for a in attempts if a.session is not None for t in a.session.turns]
    # As the seed: the sums of the counts that are known, flagged when some were not (a
    # prompt that broke off or was cancelled may have been billed for more).
    for name in TOKEN_KINDS:
        known = [t.tokens[name] for t in turns if t.tokens.get(name) is not None]
        row[token_column(name)] = sum(known) if known else None
    row["tokens_known"] = bool(turns) and all(t.tokens_known for t in turns)
    # What the target reported spending, as the seed sums it: every attempt's (the money was spent).
    costs = [
        a.result.caller_cost for a in attempts if a.result is not None and a.result.caller_cost is not None
    ]
    if costs:
        row["caller_cost_usd"] = math.fsum(costs)
    spend = Accounting.total([a.generation for a in attempts] + [j for a in attempts for j in a.judging])
    operation_ids, requests = captured([s for a in attempts for s in a.scopes])
    row.update(
        spend.columns(),
        operation_ids=operation_ids,
        started_at=attempts[0].row["started_at"],
        queued_ms=attempts[0].queued_ms,
        duration_ms=sum(a.row.get("duration_ms") or 0.0 for a in attempts),
        attempt=best.number,
        attempts_made=len(attempts),
    )
    item_row: ItemRow = row
    # Gauges measure the item as a whole: every attempt's duration, tokens and generation cost.
    # A gauge is a measurement or no row: a lower bound of the tokens is not one.
    measured: ItemRow = item_row if row["tokens_known"] else {**item_row, **dict.fromkeys(TOKEN_COLUMNS)}  # type: ignore[typeddict-item]
    gauges = (
        gauge_values(measured, best.result, Accounting.total([a.generation for a in attempts]))
        if best.completed and best.result is not None
        else []
    )
    turn_rows = [r for a in attempts for r in _turn_rows(a, a is best)]
    return Finished(item_row, best.scores, requests, turn_rows, gauges)


def _turn_rows(attempt: _Attempt, best: bool) -> list[TurnRow]:
    row = attempt.row
    judged = [r for r in attempt.scores if r["outcome"] != ScorerOutcome.MEASURED]
    scores = to_json({r["scorer"]: r["score"] for r in judged}) if attempt.completed else None
    common = {
        "item_id": row["item_id"],
        "item_index": row["item_index"],
        "trial": row["trial"],
        "attempt": attempt.number,
        "session_id": attempt.session.session_id if attempt.session is not None else None,
        "attempt_outcome": str(row["outcome"]),
        "attempt_passed": attempt.passed,
        "attempt_scores": scores,
        "best": best,
    }
    turns = attempt.session.turns if attempt.session is not None else []
    if not turns:  # an attempt that sent nothing is still kept
        return [
            {
                **common,
                "outcome": str(row["outcome"]),
                "error": row.get("error"),
                "failure_kind": row.get("failure_kind"),
                "started_at": row["started_at"],
                "duration_ms": row.get("duration_ms"),
            }
        ]
    return [
        {
            **common,
            "index": t.index,
            "method": t.method.value,
            "prompt": to_json(t.prompt),
            "output": to_json(t.output) if t.outcome is ItemOutcome.COMPLETED else None,
            "outcome": t.outcome.value,
            "error": t.error,
            "failure_kind": str(t.failure.kind) if t.failure is not None else None,
            "finish_reason": (
                t.result.finish_reason
                if t.result is not None
                else t.failure.finish_reason
                if t.failure is not None
                else None
            ),
            "model": t.result.model if t.result is not None else None,
            **{token_column(name): n for name, n in t.tokens.items()},
            "tokens_known": t.tokens_known,
            "cost_usd": t.spend.known_cost,
            "cost_completeness": t.spend.completeness.value,
            "started_at": t.started_at,
            "duration_ms": t.duration_ms,
        }
        for t in turns
    ]
