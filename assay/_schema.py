"""The Parquet schemas of the store, one field list per dataset, each column with its meaning.

These are the only definitions: the writer casts to them, `docs/schema.md` documents them and a
test checks that the two agree. JSON text columns hold `json.dumps` of the value.

Over 500 lines by design: the file is one list, every column of the seven datasets with its type
and meaning and nothing else, read top to bottom like the schema page it generates. Split per
dataset, the blocks they share (tokens, accounting) would be imported across the pieces and the
one place to look for a column would be gone.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import TypedDict

import pyarrow as pa

from assay.outcomes import (
    Adjustment,
    BatchState,
    BudgetClosedBy,
    BudgetStatus,
    CaptureStatus,
    Completeness,
    FailureKind,
    FinishReason,
    IntervalMethod,
    ItemOutcome,
    RequestOutcome,
    RequestPhase,
    RowKind,
    RunKind,
    RunStatus,
    ScorerOutcome,
    SpendKind,
    TokenKind,
    TurnMethod,
    Verdict,
    spend_column,
    token_column,
)

_TS = pa.timestamp("us", tz="UTC")


def _schema(*fields: tuple[str, pa.DataType, str]) -> pa.Schema:
    return pa.schema([pa.field(name, kind, metadata={"description": text}) for name, kind, text in fields])


def _words(enum: type[StrEnum], *leave_out: StrEnum) -> str:
    """An enum's values as a column's description lists them: `a | b | c`."""
    return " | ".join(member.value for member in enum if member not in leave_out)


# What each token kind counts; a kind added to `TokenKind` without a meaning here fails at import.
_TOKEN_MEANINGS = {
    TokenKind.INPUT: "input (prompt) tokens, as the provider reported them: all input, cache reads and writes included",
    TokenKind.OUTPUT: "output (completion) tokens",
    TokenKind.REASONING: "reasoning tokens, where the provider reports them",
    TokenKind.CACHED: "input tokens read from the provider's prompt cache (part of input), where reported",
    TokenKind.CACHE_WRITE: "input tokens written to the provider's prompt cache (part of input), where reported",
}
_TOKENS = tuple((token_column(kind), pa.int64(), _TOKEN_MEANINGS[kind]) for kind in TokenKind)

_NOT_ANSWERS = f"{FailureKind.REFUSAL}, {FailureKind.LENGTH}, {FailureKind.UNASKED_TOOL_CALL}"
_FINISH_REASON = (
    "finish_reason",
    pa.string(),
    (
        f"why the model stopped, one word over providers: {_words(FinishReason)}; null when no "
        "model replied or it said nothing (a python target, a failed call). A refusal, a cut and an "
        f"unasked tool call are not answers: the item failed ({_NOT_ANSWERS})"
    ),
)
_FINISH_REASON_RAW = (
    "finish_reason_raw",
    pa.string(),
    "the provider's own word for it (OpenAI `finish_reason`, Anthropic `stop_reason`)",
)

# What each spend kind's cost covers; a kind added to `SpendKind` without one fails at import.
_SPEND_MEANINGS = {
    SpendKind.GENERATION: "measured spend on generation (target) calls",
    SpendKind.JUDGING: "measured spend on judging (model-graded scorer) calls",
    SpendKind.EXTERNAL: "measured spend on other calls",
}
_ACCOUNTING = (
    *((spend_column(kind), pa.float64(), _SPEND_MEANINGS[kind]) for kind in SpendKind),
    ("cost_completeness", pa.string(), f"{_words(Completeness)}: how far cost_usd can be trusted"),
    ("cost_reasons", pa.string(), 'why incomplete, with counts (JSON text, e.g. {"unpriced": 3})'),
    (
        "operations",
        pa.int64(),
        "model calls attempted (each HTTP attempt, denied and refused calls included)",
    ),
    ("operations_settled", pa.int64(), "calls that got an answer (success or error status)"),
    ("operations_unknown", pa.int64(), "calls whose fate is unknown (timeouts, dropped connections)"),
    ("operations_denied", pa.int64(), "calls the budget refused before they were sent"),
    ("operations_cached", pa.int64(), "calls answered by the response cache (free)"),
    ("operations_batched", pa.int64(), "calls made through a provider's batch API (batch prices)"),
    (
        "operations_by_kind",
        pa.string(),
        'calls by spend kind (JSON text, e.g. {"generation": 1, "judging": 2})',
    ),
)

ITEMS = _schema(
    (
        "item_id",
        pa.string(),
        "stable id: the dataset's id field, else a hash of the row; pairs items across runs",
    ),
    ("item_index", pa.int64(), "the row's position in the dataset, from 0"),
    ("trial", pa.int32(), "which repetition of the item, from 0"),
    ("input", pa.string(), "the item's input (JSON text)"),
    ("expected", pa.string(), "the item's expected answer (JSON text), null if none"),
    ("annotations", pa.string(), "the item's annotations (JSON text of an object)"),
    (
        "output",
        pa.string(),
        (
            "what the target answered (JSON text), null unless completed; on a reply that was no "
            f"answer (failure_kind {_NOT_ANSWERS}) what the model sent instead — the text cut "
            "off, the refusal, the tool calls — kept as evidence, never scored"
        ),
    ),
    ("output_text", pa.string(), "the output as plain text: the string itself, else its JSON"),
    (
        "outcome",
        pa.string(),
        f"item outcome: {_words(ItemOutcome)}",
    ),
    (
        "error",
        pa.string(),
        (
            "why the item did not complete, for people: the failure's message, or what stopped it"
            " (budget reached, the budget's refusal of a call); null when completed"
        ),
    ),
    ("failure_kind", pa.string(), f"{_words(FailureKind)}; null unless failed"),
    ("failure_provider", pa.string(), "who failed: `openai:<host>` or `python`"),
    ("failure_http_status", pa.int32(), "the last HTTP status of a failed call"),
    ("failure_retryable", pa.bool_(), "whether the failure was of a retryable kind (retries ran out)"),
    ("failure_request_id", pa.string(), "the provider's request id of the failed call"),
    _FINISH_REASON,
    _FINISH_REASON_RAW,
    ("model", pa.string(), "the model that answered, as the provider named it"),
    ("started_at", _TS, "when the item started (UTC); null if it never did (budget_skipped)"),
    ("queued_ms", pa.float64(), "time the item waited for a slot under the run's concurrency"),
    ("duration_ms", pa.float64(), "wall time of the item's target call, retries included"),
    ("wire_ms", pa.float64(), "wall time of the attempt that succeeded"),
    (
        "first_token_ms",
        pa.float64(),
        "streamed model calls: from sending the attempt that succeeded to its first answer token; null otherwise",
    ),
    ("retry_ms", pa.float64(), "time spent in failed attempts and backoff before it"),
    (
        "retries",
        pa.int32(),
        (
            "how many attempts failed before the last (failed items too; an http_agent's summed over "
            "its requests to the harness; a python target's 0: never retried); null if not counted"
        ),
    ),
    *_TOKENS,
    ("cost_usd", pa.float64(), "measured cost in USD of the item: generation plus its scorers' judging"),
    *_ACCOUNTING,
    (
        "caller_cost_usd",
        pa.float64(),
        "cost reported by the target's own code, kept apart from measured cost",
    ),
    ("caller_metadata", pa.string(), "metadata reported by the target's own code (JSON text)"),
    (
        "caller_reserved",
        pa.string(),
        "what that code reported under reserved keys (model, tokens, usage, cost…): not measured",
    ),
    ("operation_ids", pa.list_(pa.string()), "captured model calls of the item, generation and judging"),
    (
        "artifacts",
        pa.list_(pa.string()),
        "files kept for the attempt (transcript, diff, workspace, agent files), relative to `<store>/artifacts/`",
    ),
    (
        "sandbox",
        pa.string(),
        "a container attempt's facts (JSON text): image id, user, exit code, stage timings, "
        + "`verifier` (a fresh container, and why) and `redacted_names` when they apply",
    ),
    ("teardown_error", pa.string(), "why tearing down the attempt's sandbox failed (never masks the result)"),
    (
        "attempt",
        pa.int32(),
        "with a policy or attempts: the attempt kept (the best), from 1; null for a plain run",
    ),
    (
        "attempts_made",
        pa.int32(),
        "with a policy or attempts: how many attempts ran (every one is in `turns`); null for a plain run",
    ),
    (
        "retry",
        pa.int32(),
        (
            "which execution of the item x trial the row is, from 0: `assay resume RUN --retry-failed` "
            "adds a row with the next number for each failed one it runs again, the earlier row kept "
            "as history. The current row of an item x trial is its highest `retry`"
        ),
    ),
    ("retry_of", pa.int32(), "for a retry: the `retry` of the failed row it replaced; null otherwise"),
    (
        "tokens_known",
        pa.bool_(),
        (
            "with a policy or attempts: whether `tokens_*` are the whole count; false when some "
            "prompt's were not known (it broke off, timed out or was cancelled: `turns.tokens_known`), "
            "and `tokens_*` then sum the counts that were; null for a plain run"
        ),
    ),
)

SCORES = _schema(
    ("item_id", pa.string(), "the scored item's id"),
    ("item_index", pa.int64(), "the scored item's position in the dataset"),
    ("trial", pa.int32(), "the scored item's trial"),
    (
        "kind",
        pa.string(),
        (
            f"{RowKind.SCORE} (a scorer's judgement) | {RowKind.GAUGE} (a measurement of the target's work on a completed "
            "item: duration, steps, tokens…); filter on it before aggregating"
        ),
    ),
    (
        "scorer",
        pa.string(),
        "the scorer's name, unique within a run; on gauge rows the gauge's name (`gauge.duration_ms`, …)",
    ),
    (
        "scorer_kind",
        pa.string(),
        "the scorer's kind (exact_match, regex, user_code, ...); `gauge` on gauge rows",
    ),
    ("scorer_version", pa.string(), "the scorer implementation's version"),
    (
        "score",
        pa.float64(),
        "a finite number in [0, 1]; null unless outcome is scored (so always on gauge rows)",
    ),
    (
        "value",
        pa.float64(),
        (
            "the row's number: on score rows the score again (null unless scored); on gauge rows the "
            "measurement, in the unit its name ends with (ms, steps, calls, tokens, usd)"
        ),
    ),
    (
        "outcome",
        pa.string(),
        (
            f"scorer outcome: {_words(ScorerOutcome, ScorerOutcome.MEASURED)}; "
            f"{ScorerOutcome.MEASURED} on gauge rows"
        ),
    ),
    (
        "error",
        pa.string(),
        (
            "why the scorer did not score: its failure's message, or what stopped it (the budget);"
            " null when scored, skipped or measured"
        ),
    ),
    ("duration_ms", pa.float64(), "wall time of the scorer"),
    ("model", pa.string(), "the judge's model, for model-graded scorers"),
    *_TOKENS,
    (
        "cost_usd",
        pa.float64(),
        "measured judging cost of this scorer on this item, USD (0 for deterministic)",
    ),
    ("cost_completeness", pa.string(), _words(Completeness)),
    ("cost_reasons", pa.string(), "why incomplete, with counts (JSON text)"),
    ("operations", pa.int64(), "model calls this scorer made on this item"),
    ("explanation", pa.string(), "the scorer's explanation, if it gave one"),
    ("label", pa.string(), "a remote evaluator's label for the score; `error` when that evaluator failed"),
    ("metadata", pa.string(), "the scorer's metadata (JSON text), if it gave any"),
    ("operation_ids", pa.list_(pa.string()), "captured model calls of this scorer on this item"),
)

RUNS = _schema(
    (
        "revision",
        pa.int64(),
        (
            "which write of the run's record this row is, from 1: every change (start, finish,"
            " resume, tags) adds a row in a file of its own; the run's current record is its highest"
            " revision"
        ),
    ),
    ("kind", pa.string(), _words(RunKind)),
    ("name", pa.string(), "the spec's name"),
    ("status", pa.string(), _words(RunStatus)),
    ("unavailable_reason", pa.string(), "why a scorer's gold check made the eval unavailable"),
    ("error", pa.string(), "why the run failed (status `failed`): the exception that stopped it"),
    ("created_at", _TS, "when the run was first started (UTC)"),
    ("finished_at", _TS, "when it last finished (UTC); null while running"),
    ("spec_path", pa.string(), "the spec file the run was started from"),
    ("spec_json", pa.string(), "the validated spec (JSON text); holds env-var names, never secrets"),
    ("spec_hash", pa.string(), "hash of the whole validated spec"),
    ("identity", pa.string(), "hash of what decides results: dataset, target, scorers, trials, seed"),
    ("dataset_hash", pa.string(), "hash of the mapped dataset items"),
    ("target_hash", pa.string(), "hash of the target's result-deciding config"),
    ("scorers_hash", pa.string(), "hash of the scorers' names, versions and params"),
    ("source_run_id", pa.string(), "for a rescore: the run it rescored"),
    (
        "source_generation_usd",
        pa.float64(),
        (
            "for a rescore: the source's measured generation spend (its source's, for a rescore of a "
            "rescore), beside this run's own judging in `cost_*`; never added to them"
        ),
    ),
    (
        "source_generation_completeness",
        pa.string(),
        f"for a rescore: {_words(Completeness)}, how far `source_generation_usd` holds",
    ),
    (
        "kept_scorers",
        pa.list_(pa.string()),
        (
            "for a rescore with `--keep-scores`: the source's scorers whose rows it carries forward "
            "unchanged (every one no new scorer replaces by name), so it compares with its source "
            "scorer by scorer; null otherwise"
        ),
    ),
    (
        "matrix_id",
        pa.string(),
        "for a cell of a matrix spec (`targets:`): the matrix's id, shared by its cells",
    ),
    ("cell", pa.string(), "for a cell of a matrix spec: the cell's name"),
    (
        "target_kind",
        pa.string(),
        "openai | anthropic | python | http_agent | container: the spec's `target.kind`",
    ),
    (
        "target_snapshot",
        pa.string(),
        "an http_agent's capabilities as snapshotted when the run started (JSON text)",
    ),
    ("model", pa.string(), "the target's model, for model targets"),
    ("trials", pa.int32(), "repetitions per item"),
    ("seed", pa.int64(), "the run's seed"),
    ("policy", pa.string(), "the session policy (`module:function`) driving each attempt; null without one"),
    ("attempts", pa.int32(), "most attempts per item x trial (fresh sessions; the best is kept)"),
    (
        "fixtures_hash",
        pa.string(),
        "hash of the fixture files' content the target hands its agent (part of the identity); null if none",
    ),
    ("execution_order", pa.string(), "dataset order, or a seeded shuffle of item x trial (trials > 1)"),
    ("tags", pa.list_(pa.string()), "the spec's tags"),
    ("n_items", pa.int64(), "items in the dataset"),
    ("n_planned", pa.int64(), "items x trials planned"),
    ("n_completed", pa.int64(), "item outcomes: completed"),
    ("n_failed", pa.int64(), "item outcomes: failed"),
    (
        "n_cancelled",
        pa.int64(),
        (
            "items x trials planned that have no row: the run was cancelled, failed or stopped early "
            "before them (`assay resume` runs those of a cancelled or failed run); "
            "completed + failed + cancelled + budget_* = planned"
        ),
    ),
    ("n_budget_skipped", pa.int64(), "item outcomes: budget_skipped"),
    ("n_budget_interrupted", pa.int64(), "item outcomes: budget_interrupted"),
    ("item_error_rate", pa.float64(), "failed / (completed + failed); null if nothing was attempted"),
    ("fail_on_item_error_rate", pa.float64(), "the gate's limit (1 disables it)"),
    *_TOKENS,
    ("cost_usd", pa.float64(), "measured cost in USD: the sum of its items'"),
    *_ACCOUNTING,
    ("budget_limit_usd", pa.float64(), "the spec's budget; null without one"),
    ("budget_spent_usd", pa.float64(), "measured spend the budget saw"),
    ("budget_status", pa.string(), f"{_words(BudgetStatus)}; null without a budget"),
    ("budget_closed_by", pa.string(), f"what first met the closed budget: {_words(BudgetClosedBy)}"),
    (
        "capture_status",
        pa.string(),
        f"{_words(CaptureStatus)}: the request sidecar's manifest",
    ),
    ("capture_reason", pa.string(), "why truncated or unavailable"),
    ("capture_records", pa.int64(), "records captured by the last execution"),
    ("capture_bytes", pa.int64(), "bytes of records the run holds"),
    ("capture_dropped", pa.int64(), "records dropped by the limits in the last execution"),
    ("wall_ms", pa.float64(), "wall time of the last execution of the run"),
    (
        "rate_control",
        pa.string(),
        (
            "the target endpoint's adaptive rate controller at the end of the last execution (JSON: "
            "endpoint, share (local, dask or prefect), members, ceiling, rpm, tpm, learned_rpm, announced_rpm, "
            "limit, peak, responses, "
            "rate_limited, paused_s, history {columns [t, limit, in_flight, rate_limited], rows}); "
            "null for targets without one"
        ),
    ),
    ("assay_version", pa.string(), "Assay's version"),
    ("prefect_flow_run_id", pa.string(), "the Prefect flow run that last executed it; null without Prefect"),
    (
        "compare_baseline",
        pa.string(),
        "the run a sequential compare (`compare_to`) compared with; null without one",
    ),
    ("compare_scorer", pa.string(), "the scorer it compared"),
    ("compare_threshold", pa.float64(), "its threshold (score units)"),
    ("compare_alpha", pa.float64(), "its alpha: the chance of a wrong verdict, whenever the run stopped"),
    ("compare_stop", pa.string(), "decided (stop at the verdict) or never (monitor only)"),
    ("compare_verdict", pa.string(), f"{_words(Verdict)}: the confidence sequence's verdict"),
    ("compare_items", pa.int64(), "paired items the verdict used (in the run's seeded order)"),
    ("compare_delta", pa.float64(), "their mean paired difference, candidate - baseline"),
    ("compare_low", pa.float64(), "the confidence sequence's interval on the difference, low end"),
    ("compare_high", pa.float64(), "the confidence sequence's interval, high end"),
)


class RunRecord(TypedDict, total=False):
    """A run's record as `Store.write_run` takes it and `Store.read_run` returns it: the columns
    of `RUNS` (a key left out is stored as null) and, when read, the run's id. A test keeps the
    keys and types in step with `RUNS`; `write_run` refuses a key that is not a column."""

    run_id: str
    revision: int
    kind: str
    name: str
    status: str
    unavailable_reason: str | None
    error: str | None
    created_at: datetime
    finished_at: datetime | None
    spec_path: str | None
    spec_json: str
    spec_hash: str
    identity: str
    dataset_hash: str
    target_hash: str
    scorers_hash: str
    source_run_id: str | None
    source_generation_usd: float | None
    source_generation_completeness: str | None
    kept_scorers: list[str] | None
    matrix_id: str | None
    cell: str | None
    target_kind: str
    target_snapshot: str | None
    model: str | None
    trials: int
    seed: int
    policy: str | None
    attempts: int | None
    fixtures_hash: str | None
    execution_order: str
    tags: list[str]
    n_items: int
    n_planned: int
    n_completed: int | None
    n_failed: int | None
    n_cancelled: int | None
    n_budget_skipped: int | None
    n_budget_interrupted: int | None
    item_error_rate: float | None
    fail_on_item_error_rate: float
    tokens_input: int | None
    tokens_output: int | None
    tokens_reasoning: int | None
    tokens_cached: int | None
    tokens_cache_write: int | None
    cost_usd: float | None
    cost_generation_usd: float | None
    cost_judging_usd: float | None
    cost_external_usd: float | None
    cost_completeness: str | None
    cost_reasons: str | None
    operations: int | None
    operations_settled: int | None
    operations_unknown: int | None
    operations_denied: int | None
    operations_cached: int | None
    operations_batched: int | None
    operations_by_kind: str | None
    budget_limit_usd: float | None
    budget_spent_usd: float | None
    budget_status: str | None
    budget_closed_by: str | None
    capture_status: str | None
    capture_reason: str | None
    capture_records: int | None
    capture_bytes: int | None
    capture_dropped: int | None
    wall_ms: float | None
    rate_control: str | None
    assay_version: str
    prefect_flow_run_id: str | None
    compare_baseline: str | None
    compare_scorer: str | None
    compare_threshold: float | None
    compare_alpha: float | None
    compare_stop: str | None
    compare_verdict: str | None
    compare_items: int | None
    compare_delta: float | None
    compare_low: float | None
    compare_high: float | None


TURNS = _schema(
    ("item_id", pa.string(), "the item the session ran for"),
    ("item_index", pa.int64(), "the item's position in the dataset"),
    ("trial", pa.int32(), "the item's trial"),
    ("attempt", pa.int32(), "which attempt (a fresh session), from 1"),
    (
        "index",
        pa.int32(),
        "the prompt's position in its session, from 0; null on the one row of an attempt that sent none",
    ),
    ("method", pa.string(), f"{_words(TurnMethod)}; null on the row of an attempt that sent no prompt"),
    ("session_id", pa.string(), "the session's id (sent to an http_agent harness as `session_id`)"),
    ("prompt", pa.string(), "what was sent (JSON text)"),
    ("output", pa.string(), "what the target answered (JSON text); null unless completed"),
    (
        "outcome",
        pa.string(),
        f"the prompt's outcome: {_words(ItemOutcome, ItemOutcome.BUDGET_SKIPPED)}",
    ),
    (
        "error",
        pa.string(),
        "why the prompt (or, on a row without one, the attempt) failed, or the budget's refusal",
    ),
    ("failure_kind", pa.string(), f"{_words(FailureKind)}; null unless failed"),
    _FINISH_REASON,
    ("model", pa.string(), "the model that answered, as the provider named it"),
    *_TOKENS,
    (
        "tokens_known",
        pa.bool_(),
        (
            "whether the prompt's token counts are known: false when a call's fate is unknown (a "
            "broken or timed-out answer, a cancelled prompt) or the target is not instrumented"
        ),
    ),
    ("cost_usd", pa.float64(), "measured cost of the prompt's calls, USD"),
    ("cost_completeness", pa.string(), _words(Completeness)),
    ("started_at", _TS, "when the prompt was sent (UTC)"),
    ("duration_ms", pa.float64(), "wall time of the prompt, retries included"),
    (
        "attempt_outcome",
        pa.string(),
        f"the attempt's item outcome: {ItemOutcome.COMPLETED} | {ItemOutcome.FAILED} | ...",
    ),
    ("attempt_passed", pa.bool_(), "whether the attempt passed (every scorer that scored gave 1)"),
    ("attempt_scores", pa.string(), "the attempt's scores by scorer (JSON text); null unless it completed"),
    ("best", pa.bool_(), "whether this attempt is the one kept in `items` and `scores`"),
    ("retry", pa.int32(), "the item row's `retry` these turns belong to (0 unless it was retried)"),
)

COMPARISONS = _schema(
    ("created_at", _TS, "when the comparison was made (UTC)"),
    ("baseline_run_ids", pa.list_(pa.string()), "the baseline side's runs (averaged per item when several)"),
    ("candidate_run_ids", pa.list_(pa.string()), "the candidate side's runs"),
    ("scorer", pa.string(), "the scorer compared"),
    ("scorer_kind", pa.string(), "its kind"),
    ("n_pairs", pa.int64(), "(item_id, trial) pairs scored on both sides"),
    ("baseline_mean", pa.float64(), "baseline mean over the pairs"),
    ("candidate_mean", pa.float64(), "candidate mean over the pairs"),
    ("delta", pa.float64(), "candidate_mean - baseline_mean"),
    ("ci_low", pa.float64(), "the CI the verdict read, low end (ci_method says which)"),
    ("ci_high", pa.float64(), "the CI the verdict read, high end"),
    ("se", pa.float64(), "analytic paired standard error of the delta"),
    ("se_ci_low", pa.float64(), "delta - t * se"),
    ("se_ci_high", pa.float64(), "delta + t * se"),
    (
        "p_value",
        pa.float64(),
        "two-sided p-value: paired t-test, or exact McNemar where ci_method is newcombe",
    ),
    ("clustered_se", pa.float64(), "cluster-robust SE when items carry a cluster annotation, else null"),
    ("clustered_ci_low", pa.float64(), "delta - z * clustered_se"),
    ("clustered_ci_high", pa.float64(), "delta + z * clustered_se"),
    ("n_clusters", pa.int64(), "clusters among the pairs, else null"),
    ("threshold", pa.float64(), "the practical-significance threshold the verdict used"),
    ("verdict", pa.string(), _words(Verdict)),
    ("unpaired_baseline", pa.int64(), "items scored on the baseline side only"),
    ("unpaired_candidate", pa.int64(), "items scored on the candidate side only"),
    ("unscored_baseline", pa.int64(), "baseline items without a score from this scorer (failed, skipped)"),
    ("unscored_candidate", pa.int64(), "candidate items without a score from this scorer"),
    ("confidence", pa.float64(), "the CIs' confidence level"),
    ("resamples", pa.int64(), "bootstrap resamples"),
    ("seed", pa.int64(), "bootstrap seed"),
    ("ci_method", pa.string(), f"{_words(IntervalMethod)}: the method of ci_low / ci_high"),
    (
        "adjustment",
        pa.string(),
        f"{_words(Adjustment)}: how the verdict was adjusted for the scorers compared at once",
    ),
    (
        "p_adjusted",
        pa.float64(),
        "p_value adjusted for the family (Holm or Benjamini-Hochberg); null with none",
    ),
    (
        "sequential_pairs",
        pa.int64(),
        (
            "a candidate run's sequential compare against this baseline: the pairs its confidence "
            "sequence used (ci_method betting_cs); null otherwise"
        ),
    ),
)

LEADERBOARDS = _schema(
    (
        "revision",
        pa.int64(),
        (
            "which computation of the matrix's leaderboard the row belongs to, from 1 (a rebuild"
            " adds rows, in a file of their own); the current leaderboard is the highest revision"
        ),
    ),
    ("created_at", _TS, "when the leaderboard was computed (UTC)"),
    ("cell", pa.string(), "the matrix cell"),
    ("run_id", pa.string(), "the cell's run"),
    ("scorer", pa.string(), "the scorer"),
    ("rank", pa.int32(), "the cell's rank on this scorer by mean, 1 = best (ties share a rank)"),
    ("n_scored", pa.int64(), "scored item x trials"),
    ("mean", pa.float64(), "mean score"),
    ("ci_low", pa.float64(), "CI of the mean, low end (ci_method says which)"),
    ("ci_high", pa.float64(), "CI of the mean, high end"),
    ("ci_method", pa.string(), "wilson (binary scorer, under 300 scores) or t"),
    ("item_error_rate", pa.float64(), "the cell's failed / attempted"),
    (
        "cost_per_item_usd",
        pa.float64(),
        "measured cost per completed item; null unless every item's accounting is complete",
    ),
    ("latency_p50_ms", pa.float64(), "median duration of completed items"),
    ("latency_p95_ms", pa.float64(), "95th percentile duration of completed items"),
    ("baseline_cell", pa.string(), "the cell the paired comparison is against"),
    ("delta_vs_baseline", pa.float64(), "paired delta against the baseline cell (null for the baseline)"),
    ("delta_ci_low", pa.float64(), "paired CI of that delta, low end (delta_ci_method says which)"),
    ("delta_ci_high", pa.float64(), "paired CI of that delta, high end"),
    ("delta_ci_method", pa.string(), "bootstrap, or newcombe for a binary scorer under 300 pairs"),
    (
        "verdict_vs_baseline",
        pa.string(),
        f"{_words(Verdict)} against the baseline",
    ),
    (
        "adjustment",
        pa.string(),
        f"{_words(Adjustment)}: how verdicts were adjusted for the cells compared at once",
    ),
    ("p_adjusted", pa.float64(), "the delta's p-value adjusted over the scorer's cells; null with none"),
)

REQUESTS = _schema(
    ("v", pa.int32(), "record format version (1)"),
    ("operation_id", pa.string(), "the model call the record belongs to"),
    (
        "phase",
        pa.string(),
        (
            f"{RequestPhase.START} (the request) | {RequestPhase.ATTEMPT} (one HTTP attempt) | "
            f"{RequestPhase.END} (the outcome)"
        ),
    ),
    ("item_id", pa.string(), "the item the call was made for"),
    ("trial", pa.int32(), "the item's trial"),
    ("scorer", pa.string(), "the scorer, for judging calls; null for generation"),
    ("kind", pa.string(), _words(SpendKind)),
    ("attempt", pa.int32(), "attempt number, from 1 (attempt records)"),
    ("model", pa.string(), "the model asked (start) or that answered (end)"),
    ("http_status", pa.int32(), "the attempt's HTTP status; null when no reply came"),
    ("started_at", _TS, "when the record was made (UTC)"),
    ("wire_ms", pa.float64(), "the attempt's time on the wire"),
    ("retry_ms", pa.float64(), "time in failed attempts and backoff (end records)"),
    ("total_ms", pa.float64(), "the call's whole time, retries included (end records)"),
    (
        "first_token_ms",
        pa.float64(),
        "streamed calls: from sending the attempt that succeeded to its first answer token (end records)",
    ),
    ("tokens_input", pa.int64(), "input tokens (end records)"),
    ("tokens_output", pa.int64(), "output tokens (end records)"),
    ("cost_usd", pa.float64(), "measured cost (end records); null when unpriced"),
    ("outcome", pa.string(), f"{_words(RequestOutcome)} ({RequestPhase.END} records)"),
    (
        "finish_reason",
        pa.string(),
        f"why the model stopped: {_words(FinishReason)} ({RequestPhase.END} records of answered calls)",
    ),
    ("finish_reason_raw", pa.string(), "the provider's own word for it (end records)"),
    ("error", pa.string(), "the attempt's or the call's error, redacted"),
    ("request", pa.string(), "the request body (JSON text, redacted; start records)"),
    ("response", pa.string(), "the response body (JSON text, redacted; attempt records)"),
    ("truncated", pa.bool_(), "bodies were cut to fit max_record_bytes"),
    ("bytes", pa.int64(), "the record's size as JSON, counted against the limits"),
)

BATCHES = _schema(
    ("batch_id", pa.string(), "the provider's id of a batch (batch mode)"),
    ("provider", pa.string(), "who holds it: `anthropic:<host>`, `openai:<host>`"),
    (
        "purpose",
        pa.string(),
        (
            f"whose calls it holds: {SpendKind.GENERATION} (the target's) | {SpendKind.JUDGING} (an "
            f"llm_judge's); null in rows written before judges batched: {SpendKind.GENERATION}"
        ),
    ),
    ("scorer", pa.string(), "the judging scorer's name; null for the target's batches"),
    (
        "custom_ids",
        pa.list_(pa.string()),
        "its requests' custom ids (a hash of item id and trial; a judge's also of its scorer and request)",
    ),
    ("requests", pa.int64(), "how many requests it holds"),
    ("state", pa.string(), f"{_words(BatchState)}: one row when the provider accepted it, one when it ended"),
    ("submitted_at", _TS, "when the provider accepted it (UTC)"),
    ("ended_at", _TS, "when it was seen to have ended (UTC); null while in progress"),
    (
        "request_counts",
        pa.string(),
        "the provider's counts once ended (JSON text: succeeded, errored, expired, …)",
    ),
)
