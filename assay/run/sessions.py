"""Managed sessions: a policy driving a target through `start` / `resume`.

A run with a `policy` (`module:function`) or `attempts` > 1 runs each item x trial as one or more
*attempts* (`assay.run.attempts`). Each attempt is a fresh `Session` with the target; the policy
receives it and sends prompts with `await session.start(prompt)` then
`await session.resume(prompt)`, each continuing the same conversation (an `openai` target sends the
messages so far, an `http_agent` its session id, a `python` target receives `history`). Without a
policy an attempt is one `start` with the item's prompt. Every prompt is recorded as a row of the
`turns` dataset.

    Session                 what a policy receives: `start`, `resume`, `history`, `cancelled`
    └── Turn                one prompt and what became of it (a `turns` row)
    drive(session, policy)  the policy over the session -> the attempt's TargetResult

Rules the session enforces (docs/sessions.md):

- Calls are sequential: a `start` / `resume` while another prompt is in flight raises
  `SessionError` ("requires sequential start/resume calls") and fails the attempt even if the
  policy catches it. A call after the policy returned raises `SessionError` ("settled").
- A prompt the policy started and did not await is awaited before the attempt ends; one still in
  flight when the policy raised or was cancelled is cancelled.
- The attempt's output is what the policy returned; `None` means the last prompt's answer. As in
  the seed, the attempt needs a completed last prompt: if it failed, the attempt fails with its
  failure; if it was cancelled or refused, or no prompt was sent, the attempt fails "returned
  without a completed prompt" (kind `protocol`), whatever the policy returned.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from assay.calls.accounting import Accounting, Ledger, Usage, current_ledger
from assay.errors import BudgetDenied, SessionError, TargetFailure
from assay.outcomes import TOKEN_KINDS, FailureKind, ItemOutcome, TurnMethod
from assay.spec.dataset import Item
from assay.targets import SessionState, SessionTarget, TargetResult

Policy = Callable[["Session"], Awaitable[Any]]

_SEQUENTIAL = "the session requires sequential start/resume calls: await each prompt before sending the next"
_SETTLED = "the session has settled: start/resume/box.exec was called after the policy returned"


@dataclass(slots=True)
class Turn:
    """One prompt of a session and what became of it (a row of the `turns` dataset).

    Args:
        index: its position in the session, from 0.
        method: `start` or `resume`.
        prompt: what was sent.
        started_at: when it was sent.
        outcome: `completed`, `failed`, `cancelled` or `budget_interrupted`.
        output: the answer, when completed.
        result: the target's whole result, when completed.
        failure: the failure, when failed.
        error: why it did not complete.
        tokens: token counts by kind (None where unknown).
        tokens_known: whether the counts are the whole truth (see docs/sessions.md).
        spend: the prompt's measured spend.
        duration_ms: its wall time, retries included.
    """

    index: int
    method: TurnMethod
    prompt: Any
    started_at: datetime
    outcome: ItemOutcome = ItemOutcome.CANCELLED
    output: Any = None
    result: TargetResult | None = None
    failure: TargetFailure | None = None
    error: str | None = None
    tokens: dict[str, int | None] = field(default_factory=dict)
    tokens_known: bool = False
    spend: Accounting = field(default_factory=Accounting)
    duration_ms: float = 0.0


class Session:
    """What a policy receives: one attempt's session with the target.

    Attributes:
        prompt: the item's prompt (an `openai` target's rendered `prompt` template, else the
            item's input): what a policy usually `start`s with.
        item: the dataset item (`item_id`, `input`, `expected`, `fields`, `annotations`).
        trial: the item's trial, from 0.
        attempt: this attempt, from 1.
        session_id: the session's id (an `http_agent` harness receives it).
        cancelled: set when the attempt is cancelled (`item_timeout`, the run cancelled); a policy
            doing work of its own should stop when it is set.
        turns: the prompts sent so far (`Turn`), oldest first.
        history: the completed prompts and answers so far, as chat messages.
        box: a `container` target's live attempt container, for checks between prompts:
            `await session.box.exec(argv)` (as the agent's user, output captured and redacted,
            time-limited); refused while a prompt is in flight and once the session settled.
            None for other targets.

    Args:
        target: the open target.
        item: the item.
        trial: the trial.
        attempt: the attempt's number, from 1.
    """

    def __init__(self, target: SessionTarget, item: Item, trial: int, attempt: int = 1) -> None:
        self.item = item
        self.trial = trial
        self.attempt = attempt
        self.prompt = target.item_prompt(item)
        self.session_id = uuid.uuid4().hex
        self.cancelled = asyncio.Event()
        self.turns: list[Turn] = []
        self._target = target
        self._state = SessionState(self.session_id)
        self._active: asyncio.Future[Any] | None = None
        self._started = False
        self._settled = False
        self.misuse: SessionError | None = None
        live_box = getattr(target, "box", None)
        self.box = _SessionBox(self, live_box) if live_box is not None else None

    @property
    def history(self) -> list[dict[str, Any]]:
        return list(self._state.history)

    def _idle(self) -> None:
        """Refuse work between prompts while a prompt is in flight or once the session settled."""
        if self._settled:
            raise SessionError(_SETTLED)
        if self._active is not None and not self._active.done():
            self.misuse = self.misuse or SessionError(_SEQUENTIAL)
            raise SessionError(_SEQUENTIAL)

    def start(self, prompt: Any) -> asyncio.Future[Any]:
        """Send the session's first prompt; await it for the answer.

        Raises:
            SessionError: another prompt is in flight, the session has settled, or it started.
            TargetFailure: (when awaited) the prompt failed for good; the session may go on.
            BudgetDenied: (when awaited) the run's budget refused the call.
        """
        return self._invoke(TurnMethod.START, prompt)

    def resume(self, prompt: Any) -> asyncio.Future[Any]:
        """Send the next prompt of the conversation; await it for the answer. Raises as `start`."""
        return self._invoke(TurnMethod.RESUME, prompt)

    def _invoke(self, method: TurnMethod, prompt: Any) -> asyncio.Future[Any]:
        # Checked here, synchronously, so that a second call made before the first is awaited
        # (or scheduled) is refused at once rather than racing it.
        if self._settled:
            raise SessionError(_SETTLED)
        if self._active is not None and not self._active.done():
            problem = _SEQUENTIAL
        elif method is TurnMethod.START and self._started:
            problem = "the session has already started: continue it with resume(prompt)"
        elif method is TurnMethod.RESUME and not self._started:
            problem = "resume before start: a session begins with start(prompt)"
        else:
            # Recorded now: a prompt cancelled before its task first ran is still a sent prompt.
            turn = Turn(
                len(self.turns), method, prompt, datetime.now(UTC), error="cancelled before it was sent"
            )
            self.turns.append(turn)
            self._active = asyncio.ensure_future(self._turn(turn))
            return self._active
        self.misuse = self.misuse or SessionError(problem)
        raise SessionError(problem)

    async def _turn(self, turn: Turn) -> Any:
        method, prompt = turn.method, turn.prompt
        turn.started_at = datetime.now(UTC)
        started = time.perf_counter()
        parent = current_ledger()
        ledger = None
        try:
            if parent is None:  # a session used on its own: nothing to measure into
                turn.result = await self._target.turn(self.item, self.trial, prompt, self._state)
            else:
                with Ledger(
                    parent.kind, parent.prices, parent.budget, parent.capture, parent.cache
                ) as ledger:
                    try:
                        turn.result = await self._target.turn(self.item, self.trial, prompt, self._state)
                    finally:
                        parent.records.extend(ledger.records)
        except TargetFailure as failure:
            turn.outcome, turn.failure, turn.error = ItemOutcome.FAILED, failure, failure.message
            raise
        except BudgetDenied as denied:
            turn.outcome, turn.error = ItemOutcome.BUDGET_INTERRUPTED, str(denied)
            raise
        except asyncio.CancelledError:
            turn.error = "cancelled while in flight"
            raise
        else:
            turn.outcome, turn.output = ItemOutcome.COMPLETED, turn.result.output
            if method is TurnMethod.START:
                self._started = True
            self._state.history += [
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": turn.result.output},
            ]
            return turn.output
        finally:
            turn.duration_ms = (time.perf_counter() - started) * 1000
            _measure_turn(turn, ledger, self._target.instrumented)

    async def _settle(self, *, cancel: bool) -> None:
        """Refuse further calls; finish (or, with `cancel`, cancel) a prompt still in flight."""
        self._settled = True
        active = self._active
        if active is None or active.done():
            if active is not None and not active.cancelled():
                active.exception()  # retrieved: a failed prompt the policy never awaited is recorded
            return
        if cancel:
            active.cancel()
        try:
            await asyncio.wait({active})  # its outcome is recorded on its turn
        except asyncio.CancelledError:  # this attempt cancelled meanwhile: so is the prompt
            active.cancel()
            await asyncio.wait({active})
            raise
        finally:
            if active.done() and not active.cancelled():
                active.exception()  # retrieved, so asyncio does not log it as never retrieved


class _SessionBox:
    """`session.box`: the target's box, usable only between prompts (`Session._idle`)."""

    def __init__(self, session: Session, box: Any) -> None:
        self._session = session
        self._box = box

    async def exec(self, argv: list[str], **options: Any) -> Any:
        """Run `argv` in the attempt's container (see `assay.targets.container.session.Box`).

        Raises:
            SessionError: a prompt is in flight, or the session has settled.
        """
        self._session._idle()
        return await self._box.exec(argv, **options)


def _measure_turn(turn: Turn, ledger: Ledger | None, instrumented: bool) -> None:
    """A turn's tokens and spend. Tokens are known only for an instrumented target whose calls
    all settled and which reported its usage; a call whose fate is unknown (the connection broke
    or timed out mid-answer) or a prompt cancelled in flight may have been billed."""
    spend = ledger.total() if ledger is not None else Accounting()
    turn.spend = spend if instrumented else Accounting.uninstrumented()
    if not instrumented:
        turn.tokens, turn.tokens_known = dict.fromkeys(TOKEN_KINDS), False
        return
    usage = turn.result.usage if turn.result is not None else None
    if usage is not None:
        turn.tokens = usage.by_kind()
        reported = usage.input_tokens is not None and usage.output_tokens is not None
    else:
        turn.tokens = {name: spend.tokens.get(name, 0) for name in TOKEN_KINDS}
        reported = turn.result is None  # a failed prompt: what its settled calls counted
    turn.tokens_known = reported and spend.unknown == 0 and turn.outcome is not ItemOutcome.CANCELLED


async def drive(session: Session, policy: Policy | None) -> TargetResult:
    """Run `policy` over `session` (without one: `start` with the item's prompt) and make the
    attempt's result of it.

    Raises:
        TargetFailure: the attempt failed (a prompt's failure the policy let through, a misuse
            of the session, the policy's own exception, or nothing answered).
        BudgetDenied: a call the attempt needed was refused by the budget.
        asyncio.CancelledError: the attempt was cancelled (`session.cancelled` is set).
    """
    try:
        returned = await (policy(session) if policy is not None else session.start(session.prompt))
    except asyncio.CancelledError:
        session.cancelled.set()
        await session._settle(cancel=True)
        raise
    except BaseException as exc:
        await session._settle(cancel=True)
        if isinstance(exc, TargetFailure | BudgetDenied) or not isinstance(exc, Exception):
            raise
        if isinstance(exc, SessionError):
            raise _policy_failure(str(exc), FailureKind.PROTOCOL) from exc
        raise _policy_failure(
            f"the policy raised {type(exc).__name__}: {exc}", FailureKind.EXCEPTION
        ) from exc
    await session._settle(cancel=False)
    if session.misuse is not None:
        raise _policy_failure(str(session.misuse), FailureKind.PROTOCOL)
    return _result(session, None if policy is None else returned)


def _result(session: Session, returned: Any) -> TargetResult:
    """The attempt's result: what the policy returned (None: the last prompt's answer), with the
    completed prompts' figures summed and the last one's model and caller metadata."""
    # As the seed: an attempt is only as good as its last prompt. One that did not complete fails
    # the attempt with its own failure, whatever the policy returned; no prompt at all is a
    # protocol failure.
    if not session.turns:
        raise _policy_failure("the policy returned without a completed prompt", FailureKind.PROTOCOL)
    last = session.turns[-1]
    if last.outcome is not ItemOutcome.COMPLETED:
        if last.failure is not None:
            raise last.failure
        raise _policy_failure(
            f"the policy returned without a completed prompt: its last prompt ended {last.outcome}: "
            f"{last.error}",
            FailureKind.PROTOCOL,
        )
    done = [t for t in session.turns if t.result is not None]
    results = [t.result for t in done if t.result is not None]
    final = results[-1] if results else None
    costs = [r.caller_cost for r in results if r.caller_cost is not None]
    steps = [step for r in results for step in (r.trajectory or [])]
    return TargetResult(
        output=returned if returned is not None else session.turns[-1].output,
        model=final.model if final else None,
        # How the last prompt's reply ended: the attempt's answer is that prompt's.
        finish_reason=final.finish_reason if final else None,
        finish_reason_raw=final.finish_reason_raw if final else None,
        usage=_sum_usage(session.turns),
        wire_ms=sum(r.wire_ms or 0.0 for r in results),
        retry_ms=sum(r.retry_ms for r in results),
        retries=sum(r.retries for r in results),
        caller_cost=sum(costs) if costs else None,
        caller_metadata=final.caller_metadata if final else None,
        caller_reserved=final.caller_reserved if final else None,
        artifacts=[a for r in results for a in (r.artifacts or [])] or None,
        trajectory=steps or None,
    )


def _sum_usage(turns: list[Turn]) -> Usage | None:
    """Tokens over prompts; None when any prompt's are not known (a wrong sum is worse than none)."""
    if not turns or not all(t.tokens_known for t in turns):
        return None
    return Usage.of_kinds({name: sum(t.tokens.get(name) or 0 for t in turns) for name in TOKEN_KINDS})


def _policy_failure(message: str, kind: FailureKind) -> TargetFailure:
    return TargetFailure(message, kind=kind, provider="policy")
