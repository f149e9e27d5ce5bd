"""Executing a shard: items through the target, outputs through the scorers, rows to Parquet.

Plain asyncio. One limiter (`RunPlan`'s concurrency) bounds the whole run's in-flight target
calls across every shard — shards are awaited together on one event loop — and one per item
bounds its scorers. Finished items are committed in batches, so a killed process loses at most
the items in flight and one unflushed batch; those run again on resume. A batch is committed only
while this process holds the run's lease (assay/lease.py): one that lost it starts and commits
nothing more.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

import pyarrow as pa

from assay import _schema
from assay.calls.accounting import Accounting, Ledger, measuring, token_columns
from assay.calls.capture import Scope
from assay.errors import BudgetDenied, TargetFailure
from assay.outcomes import (
    BudgetClosedBy,
    Completeness,
    FailureKind,
    Gauge,
    ItemOutcome,
    RowKind,
    ScorerOutcome,
    SpendKind,
    token_column,
)
from assay.run import progress
from assay.run.plan import RunPlan, Shard
from assay.spec.dataset import Item
from assay.targets import Target, TargetResult, kind_of
from evaluators import Sample, Scorer, ScoreRecord, evaluate
from evaluators._base import RunContext, run_context

_NO_SPEND = Accounting()
_BATCH_ROWS = 500
_BATCH_SECONDS = 2.0


@dataclass(slots=True)
class ShardReport:
    """What a shard did: outcome counts of the items it executed, and how many it found done."""

    shard: int
    executed: dict[str, int] = field(default_factory=dict)
    already_done: int = 0


class ShardExecutor:
    """Runs shards of one plan: each item produced by `_run_item`, scored, committed in batches.
    Subclasses say where an item's output comes from (a target, or a stored run).

    Args:
        plan: the run's plan.
    """

    def __init__(self, plan: RunPlan) -> None:
        self.plan = plan
        self._search_path = str(plan.spec_dir)
        self._sync_scorers: list[Scorer] = []
        self._async_scorers: list[Scorer] = []
        for scorer in plan.spec.scorers:
            (self._async_scorers if _is_async(scorer, self._search_path) else self._sync_scorers).append(
                scorer
            )

    async def _run_item(self, item: Item, trial: int) -> Finished:
        raise NotImplementedError

    async def run_shard(self, shard: Shard) -> ShardReport:
        plan = self.plan
        run_context.set(RunContext(plan.run_id, self._search_path))
        report = ShardReport(shard=shard.index)
        todo = []
        for position, trial in shard.work:
            if (plan.items[position].item_id, trial) in plan.done:
                report.already_done += 1
            else:
                todo.append((plan.items[position], trial))
        batch = _Batch(plan, shard.index)
        pending = iter(todo)

        async def drain() -> None:
            for item, trial in pending:
                if plan.lease.lost is not None:  # another process drives the run now: start nothing
                    raise plan.lease.lost
                finished = await self._run_item(item, trial)
                outcome = finished.item["outcome"]
                report.executed[outcome] = report.executed.get(outcome, 0) + 1
                batch.add(finished)
                progress.current().item_done(outcome, finished.item.get("cost_usd"))

        # A few workers draining the shard rather than a task per item (cheaper by ~10 us an item);
        # the run-wide limiter in `_run_item` still bounds the target calls in flight.
        workers = [asyncio.ensure_future(drain()) for _ in range(min(plan.spec.concurrency, len(todo)))]
        try:
            await asyncio.gather(*workers)
        finally:
            # On cancellation or an infrastructure error, stop the shard's other items (a retry
            # runs them again) and commit what finished, so none of it runs twice — once they have
            # stopped, so that none adds an item after the last commit.
            for worker in workers:
                worker.cancel()
            try:
                if workers:
                    await asyncio.wait(workers)
            finally:
                batch.flush()
        return report

    async def _score(
        self, item: Item, trial: int, output: Any, *, cut_off: _CutOff | None = None, **context: Any
    ) -> tuple[list[dict[str, Any]], list[Accounting], list[Scope]]:
        """Score one output; returns the score rows, each scorer's judging spend, and the capture
        scopes of the scorers that may have called a model. `context`: more `Sample` fields (an
        agent's trajectory, a sandbox's workspace). `cut_off`: a deadline for the scorers; one it
        cuts off (or that would start after it) fails with its message, the others keep theirs."""
        sample = Sample(
            output=output,
            item_id=item.item_id,
            input=item.input,
            expected=item.expected,
            annotations=item.annotations,
            fields=item.fields,
            **context,
        )
        # Sync scorers hold the loop anyway: awaiting them in turn spares a task per scorer per item.
        # They cannot await a model call either, so they have nothing to measure.
        if cut_off is None:
            results = [
                (await evaluate(s, sample, search_path=self._search_path), _NO_SPEND, None)
                for s in self._sync_scorers
            ]
        else:
            results = [
                (await evaluate(s, sample, search_path=self._search_path), _NO_SPEND, None)
                if not cut_off.passed()
                else (_unscored(s, ScorerOutcome.FAILED, cut_off.why), _NO_SPEND, None)
                for s in self._sync_scorers
            ]
        if len(self._async_scorers) == 1 and cut_off is None:
            results.append(await self._measured(self._async_scorers[0], sample, item, trial))
        elif self._async_scorers:
            limiter = asyncio.Semaphore(self.plan.spec.scorer_concurrency)

            async def bounded(scorer: Scorer) -> tuple[ScoreRecord, Accounting, Scope | None]:
                async with limiter:
                    if cut_off is None:
                        return await self._measured(scorer, sample, item, trial)
                    try:
                        async with asyncio.timeout_at(cut_off.at):
                            return await self._measured(scorer, sample, item, trial)
                    except TimeoutError:
                        return _unscored(scorer, ScorerOutcome.FAILED, cut_off.why), Accounting(), None

            results += await asyncio.gather(*(bounded(s) for s in self._async_scorers))
        # A scorer that answered several named scores (a remote evaluator) is stored as one row each;
        # its spend and calls go with the first.
        rows = [
            _score_row(item, trial, part, spend if n == 0 else _NO_SPEND, scope if n == 0 else None)
            for record, spend, scope in results
            for n, part in enumerate(record.parts or (record,))
        ]
        return (
            rows,
            [spend for _, spend, _ in results],
            [scope for _, _, scope in results if scope is not None],
        )

    async def _measured(
        self, scorer: Scorer, sample: Sample, item: Item, trial: int
    ) -> tuple[ScoreRecord, Accounting, Scope | None]:
        budget = self.plan.budget
        if budget.closed and not type(scorer).deterministic:
            budget.note_closure(BudgetClosedBy.SCORER)
            return _unscored(scorer, ScorerOutcome.BUDGET_SKIPPED, _BUDGET_REACHED), Accounting(), None
        scope = self.plan.capture.scope(item.item_id, trial, scorer.name)
        with measuring(
            SpendKind.JUDGING, self.plan.prices, budget, scope, self.plan.response_cache
        ) as ledger:
            record = await evaluate(scorer, sample, search_path=self._search_path)
        return record, ledger.total(), scope


@dataclass(frozen=True, slots=True)
class _CutOff:
    """A deadline for scorers (event-loop time), and what a scorer it cuts off records."""

    at: float
    why: str

    def passed(self) -> bool:
        return asyncio.get_running_loop().time() >= self.at


class Finished(NamedTuple):
    """One item's rows: its item row, its score rows, its captured request records, for a
    managed session (`assay.run.sessions`) its turns, and its gauges as (name, value) pairs (made
    into `kind = gauge` rows at commit, column by column: there is one per item per gauge)."""

    item: dict[str, Any]
    scores: list[dict[str, Any]]
    requests: list[dict[str, Any]]
    turns: list[dict[str, Any]] | tuple[()] = ()
    gauges: list[tuple[str, float]] | tuple[()] = ()


def _captured(scopes: list[Scope | None]) -> tuple[list[str] | None, list[dict[str, Any]]]:
    present = [scope for scope in scopes if scope is not None]
    if not present:
        return None, []
    return [i for scope in present for i in scope.operation_ids], [
        r for scope in present for r in scope.records
    ]


class Executor(ShardExecutor):
    """Runs shards against one open target, with one limiter for the whole run's target calls.

    Args:
        plan: the run's plan.
        target: the open target.
    """

    def __init__(self, plan: RunPlan, target: Target) -> None:
        super().__init__(plan)
        self.target = target
        self.limiter = asyncio.Semaphore(plan.spec.concurrency)
        # A sandboxed target's attempt stays alive while it is scored (scorers may exec in it).
        self._sandboxed = kind_of(plan.spec.target).live_attempts
        # Only a spec with a policy or attempts pays for sessions; a plain item takes the path below.
        self._sessions = None
        if plan.spec.sessions:
            from assay.run.sessions import SessionRunner  # it builds on this module

            self._sessions = SessionRunner(self)

    async def _run_sandboxed(self, item: Item, trial: int) -> Finished:
        """One attempt in a sandbox: run, score while it lives, tear down last. The slot is held
        throughout, so `concurrency` bounds the sandboxes alive at once."""
        waited = time.perf_counter()
        async with self.limiter:
            started_at = datetime.now(UTC)
            started = time.perf_counter()
            queued_ms = (started - waited) * 1000
            if self.plan.budget.closed:  # judges' spend counts; no new sandbox once it is reached
                self.plan.budget.note_closure(BudgetClosedBy.CASE)
                return Finished(_skipped_row(item, trial), [], [])
            attempt = await self.target.begin(item, trial)  # type: ignore[attr-defined]
            try:
                if attempt.failure is not None:
                    failure = attempt.failure
                    row = _failed_row(item, trial, started_at, started, failure)
                    row.update(Accounting.uninstrumented().columns(), queued_ms=queued_ms)
                    finished = Finished(row, [], [])
                else:
                    result = attempt.result
                    row = _completed_row(
                        item, trial, started_at, (time.perf_counter() - started) * 1000, result
                    )
                    row["queued_ms"] = queued_ms
                    score_rows, judging, judge_scopes = await self._score_live(item, trial, attempt)
                    operation_ids, requests = _captured(judge_scopes)
                    generation = Accounting.uninstrumented()
                    row.update(
                        Accounting.total([generation, *judging]).columns(), operation_ids=operation_ids
                    )
                    finished = Finished(row, score_rows, requests, (), gauge_values(row, result, generation))
            finally:
                teardown_error = await attempt.close()
            finished.item["teardown_error"] = teardown_error
            if attempt.facts is not None:  # now with the scoring and cleanup timings
                finished.item["sandbox"] = _json(attempt.facts)
            return finished

    async def _score_live(
        self, item: Item, trial: int, attempt: Any
    ) -> tuple[list[dict[str, Any]], list[Accounting], list[Scope]]:
        """Score an attempt whose sandbox is alive, within the scoring stage's deadline: scorers it
        cuts off fail naming it, the others keep their scores; a sandbox that cannot be prepared
        for scoring fails every scorer, never the run."""
        result = attempt.result
        cut_off = _CutOff(
            asyncio.get_running_loop().time() + attempt.scoring_deadline,
            f"scoring stage exceeded its deadline of {attempt.scoring_deadline:g}s (target.deadlines.scoring)",
        )
        try:
            async with asyncio.timeout_at(cut_off.at):
                await attempt.before_scoring()
        except Exception as exc:  # noqa: BLE001 - a scorer's failure, not the run's
            why = (
                cut_off.why
                if isinstance(exc, TimeoutError)
                else f"preparing the sandbox for scoring failed: {exc}"
            )
            records = [_unscored(scorer, ScorerOutcome.FAILED, why) for scorer in self.plan.spec.scorers]
            return [_score_row(item, trial, r, _NO_SPEND, None) for r in records], [], []
        return await self._score(
            item,
            trial,
            result.output,
            cut_off=cut_off,
            trajectory=result.trajectory,
            **attempt.sample_context,
        )

    async def _run_item(self, item: Item, trial: int) -> Finished:
        if self._sandboxed:
            return await self._run_sandboxed(item, trial)
        if self._sessions is not None:
            return await self._sessions.run(item, trial)
        budget = self.plan.budget
        waited = time.perf_counter()
        async with self.limiter:
            started_at = datetime.now(UTC)
            started = time.perf_counter()
            queued_ms = (started - waited) * 1000
            if budget.closed:  # checked after the wait for a slot, which may have been long
                budget.note_closure(BudgetClosedBy.CASE)
                return Finished(_skipped_row(item, trial), [], [])
            scope = self.plan.capture.scope(item.item_id, trial)
            with measuring(
                SpendKind.GENERATION, self.plan.prices, budget, scope, self.plan.response_cache
            ) as ledger:
                try:
                    async with asyncio.timeout(self.plan.spec.item_timeout):
                        result = await self.target(item, trial)
                except BudgetDenied as denied:
                    row = _stopped_row(item, trial, started_at, ItemOutcome.BUDGET_INTERRUPTED, str(denied))
                    return self._unfinished({**row, **ledger.total().columns()}, scope)
                except TargetFailure as failure:
                    row = _failed_row(item, trial, started_at, started, failure)
                    return self._unfinished({**row, **self._spend(ledger)}, scope)
                except TimeoutError:
                    failure = TargetFailure(
                        f"item timed out after {self.plan.spec.item_timeout:g}s (item_timeout)",
                        kind=FailureKind.TIMEOUT,
                        provider=self.plan.spec.target.kind,
                        retryable=True,
                    )
                    row = _failed_row(item, trial, started_at, started, failure)
                    return self._unfinished({**row, **self._spend(ledger)}, scope)
            duration_ms = (time.perf_counter() - started) * 1000
        generation = ledger.total() if self.target.instrumented else Accounting.uninstrumented()
        row = _completed_row(item, trial, started_at, duration_ms, result)
        row["queued_ms"] = queued_ms
        score_rows, judging, judge_scopes = await self._score(
            item, trial, result.output, trajectory=result.trajectory
        )
        operation_ids, requests = _captured([scope, *judge_scopes])
        row.update(Accounting.total([generation, *judging]).columns(), operation_ids=operation_ids)
        return Finished(row, score_rows, requests, (), gauge_values(row, result, generation))

    @staticmethod
    def _unfinished(row: dict[str, Any], scope: Scope | None) -> Finished:
        operation_ids, requests = _captured([scope])
        return Finished({**row, "operation_ids": operation_ids}, [], requests)

    def _spend(self, ledger: Ledger) -> dict[str, Any]:
        spend = ledger.total() if self.target.instrumented else Accounting.uninstrumented()
        return spend.columns()


@dataclass(slots=True)
class _Rows:
    """The rows of the items a batch holds."""

    items: list[dict[str, Any]] = field(default_factory=list)
    scores: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    gauges: list[Any] = field(default_factory=list)


class _Batch:
    """Rows waiting to be committed, flushed by size or age."""

    def __init__(self, plan: RunPlan, shard: int) -> None:
        self._plan = plan
        self._shard = shard
        self._rows = _Rows()
        self._since = time.monotonic()

    def add(self, finished: Finished) -> None:
        rows = self._rows
        item = finished.item
        # 0, or with `--retry-failed` the next after the failed row it replaces (kept as history).
        item.update(self._plan.retry_columns(item["item_id"], item["trial"]))
        for turn in finished.turns:
            turn["retry"] = item["retry"]
        rows.items.append(item)
        rows.gauges.append(finished.gauges)
        rows.scores.extend(finished.scores)
        rows.requests.extend(finished.requests)
        rows.turns.extend(finished.turns)
        if len(rows.items) >= _BATCH_ROWS or time.monotonic() - self._since >= _BATCH_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Commit the batch, if this process still holds the run (`Lease.check`, and
        `Lease.after_commit` once the parts are written)."""
        # Taken out of the batch first: whatever interrupts the commit, a later flush (the shard's
        # last, in its `finally`) never commits these rows a second time.
        rows, self._rows = self._rows, _Rows()
        self._since = time.monotonic()
        if not rows.items:
            return
        plan = self._plan
        plan.lease.check()
        # The lease generation in the name fences a paused writer (assay/lease.py); the random
        # suffix puts a resumed shard's parts beside, never over, its earlier ones.
        part = plan.lease.part_name(self._shard)
        plan.store.commit_batch(
            plan.run_id,
            part,
            _table(rows.items, _schema.ITEMS),
            pa.concat_tables([_table(rows.scores, _schema.SCORES), _gauges_table(rows.items, rows.gauges)]),
            _requests_table(rows.requests) if rows.requests else None,
            _table(rows.turns, _schema.TURNS) if rows.turns else None,
        )
        plan.lease.after_commit(f"{part}.parquet")
        plan.capture.committed(sum(r["bytes"] for r in rows.requests))
        # A retried shard (Prefect retries a failed task) must not run these again.
        plan.done.update((row["item_id"], row["trial"]) for row in rows.items)


def _table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Rows as a table of `schema`, a missing key a null. Column by column: about 40 % faster than
    `Table.from_pylist` for these wide rows, and this runs for every batch of a run."""
    return pa.Table.from_pydict(
        {name: [row.get(name) for row in rows] for name in schema.names}, schema=schema
    )


def _requests_table(records: list[dict[str, Any]]) -> pa.Table:
    rows = [{**r, "request": _json(r.get("request")), "response": _json(r.get("response"))} for r in records]
    return _table(rows, _schema.REQUESTS)


def _is_async(scorer: Scorer, search_path: str) -> bool:
    try:
        return scorer.is_async(search_path)
    except Exception:  # noqa: BLE001 - an unimportable user scorer fails on every item, where it is recorded
        return False


# One encoder for every row: `json.dumps` with options builds a new one on each call (~1.4 us,
# several times an item).
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


def _json(value: Any) -> str | None:
    return None if value is None else _ENCODER.encode(value)


def _item_columns(item: Item, trial: int, started_at: datetime | None) -> dict[str, Any]:
    return {
        "item_id": item.item_id,
        "item_index": item.item_index,
        "trial": trial,
        "input": _json(item.input),
        "expected": _json(item.expected),
        "annotations": _json(item.annotations),
        "started_at": started_at,
    }


def _completed_row(
    item: Item, trial: int, started_at: datetime, duration_ms: float, result: TargetResult
) -> dict[str, Any]:
    usage = result.usage
    output = result.output
    return {
        **_item_columns(item, trial, started_at),
        "output": _json(output),
        "output_text": output if isinstance(output, str) else _json(output),
        "outcome": ItemOutcome.COMPLETED.value,
        "model": result.model,
        "duration_ms": duration_ms,
        "wire_ms": result.wire_ms,
        "retry_ms": result.retry_ms,
        "retries": result.retries,
        **token_columns(usage),
        "caller_cost_usd": result.caller_cost,
        "caller_metadata": _json(result.caller_metadata),
        "caller_reserved": _json(result.caller_reserved),
        "artifacts": result.artifacts,
        "sandbox": _json(result.sandbox),
    }


def _failed_row(
    item: Item, trial: int, started_at: datetime, started: float, failure: TargetFailure
) -> dict[str, Any]:
    return {
        **_item_columns(item, trial, started_at),
        "outcome": ItemOutcome.FAILED.value,
        "error": failure.message,
        "failure_kind": str(failure.kind),
        "failure_provider": failure.provider,
        "failure_http_status": failure.http_status,
        "failure_retryable": failure.retryable,
        "failure_request_id": failure.request_id,
        "duration_ms": (time.perf_counter() - started) * 1000,
        # What a failed attempt kept (a sandbox's transcript) is evidence too.
        "artifacts": failure.artifacts,
        "sandbox": _json(failure.sandbox),
    }


def _unscored(scorer: Scorer, outcome: ScorerOutcome, why: str) -> ScoreRecord:
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


def _stopped_row(
    item: Item, trial: int, started_at: datetime, outcome: ItemOutcome, why: str
) -> dict[str, Any]:
    return {
        **_item_columns(item, trial, started_at),
        "outcome": outcome.value,
        "error": why,
        **Accounting().columns(),
    }


_BUDGET_REACHED = "budget reached"


def _skipped_row(item: Item, trial: int) -> dict[str, Any]:
    """An item the closed budget kept from starting: no start time, no timing, no spend."""
    return {
        **_item_columns(item, trial, None),
        "outcome": ItemOutcome.BUDGET_SKIPPED.value,
        "error": _BUDGET_REACHED,
        **Accounting().columns(),
    }


def _spend_columns(spend: Accounting) -> dict[str, Any]:
    return {
        **{token_column(kind): n for kind, n in spend.tokens.items()},
        "cost_usd": spend.known_cost,
        "cost_completeness": spend.completeness.value,
        "cost_reasons": json.dumps(spend.reasons, sort_keys=True) if spend.reasons else None,
        "operations": spend.operations,
    }


_NO_SPEND_COLUMNS = _spend_columns(_NO_SPEND)


def _score_row(
    item: Item, trial: int, record: ScoreRecord, spend: Accounting, scope: Scope | None
) -> dict[str, Any]:
    gauge = record.outcome is ScorerOutcome.MEASURED
    return {
        "operation_ids": scope.operation_ids if scope is not None else None,
        "model": record.metadata.get("model") if record.metadata else None,
        **(_NO_SPEND_COLUMNS if spend is _NO_SPEND else _spend_columns(spend)),
        "item_id": item.item_id,
        "item_index": item.item_index,
        "trial": trial,
        # A remote evaluator's gauge is a measurement: a gauge row, never read as a score.
        "kind": (RowKind.GAUGE if gauge else RowKind.SCORE).value,
        "scorer": record.scorer,
        "scorer_kind": RowKind.GAUGE.value if gauge else record.scorer_kind,
        "scorer_version": record.scorer_version,
        "score": None if gauge else record.score,
        "value": record.score,
        "outcome": str(record.outcome),
        "error": record.error,
        "duration_ms": record.duration_ms,
        "explanation": record.explanation,
        "label": record.label,
        "metadata": _json(record.metadata),
    }


# Bump when what a gauge measures changes, so a compare across versions can tell.
GAUGE_VERSION = "1"


def gauge_values(
    item_row: dict[str, Any], result: TargetResult, generation: Accounting
) -> list[tuple[str, float]]:
    """The gauges of a completed item, as (name, value): one per gauge whose value is known
    (unknown is no row, never 0). Tokens and cost are measured figures only: an uninstrumented
    target (python, http_agent) reports none, and a cost counts only when its accounting is
    complete (an unpriced model's $0 is not a cost)."""
    values = (
        (Gauge.DURATION_MS, item_row["duration_ms"]),
        (Gauge.STEPS, result.steps),
        (Gauge.TOOL_CALLS, result.tool_calls),
        (Gauge.TOKENS_INPUT, item_row["tokens_input"]),
        (Gauge.TOKENS_OUTPUT, item_row["tokens_output"]),
        (Gauge.COST_USD, generation.known_cost if generation.completeness is Completeness.COMPLETE else None),
    )
    return [(gauge.value, float(value)) for gauge, value in values if value is not None]


def _gauges_table(items: list[dict[str, Any]], gauges: list[list[tuple[str, float]]]) -> pa.Table:
    """`kind = gauge` rows of the scores dataset, built column by column: every column but the
    item, the gauge and its value is the same on every row (a measurement costs nothing)."""
    columns: dict[str, list[Any]] = {"item_id": [], "item_index": [], "trial": [], "scorer": [], "value": []}
    for row, pairs in zip(items, gauges, strict=True):
        for name, value in pairs:
            columns["item_id"].append(row["item_id"])
            columns["item_index"].append(row["item_index"])
            columns["trial"].append(row["trial"])
            columns["scorer"].append(name)
            columns["value"].append(value)
    n = len(columns["value"])
    arrays = []
    for column in _schema.SCORES:
        if column.name in columns:
            arrays.append(pa.array(columns[column.name], type=column.type))
        elif _GAUGE_CONSTANTS.get(column.name) is not None:
            arrays.append(pa.repeat(pa.scalar(_GAUGE_CONSTANTS[column.name], type=column.type), n))
        else:
            arrays.append(pa.nulls(n, type=column.type))
    return pa.Table.from_arrays(arrays, schema=_schema.SCORES)


_GAUGE_CONSTANTS: dict[str, Any] = {
    # Measuring costs nothing: the same spend columns as a deterministic scorer's row.
    **_NO_SPEND_COLUMNS,
    "kind": RowKind.GAUGE.value,
    "scorer_kind": RowKind.GAUGE.value,
    "scorer_version": GAUGE_VERSION,
    "outcome": ScorerOutcome.MEASURED.value,
}
