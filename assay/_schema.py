"""The Parquet schemas of the store, one field list per dataset, each column with its meaning.

These are the only definitions: the writer casts to them, `docs/schema.md` documents them and a
test checks that the two agree. JSON text columns hold `json.dumps` of the value.
"""

from __future__ import annotations

import pyarrow as pa

_TS = pa.timestamp("us", tz="UTC")


def _schema(*fields: tuple[str, pa.DataType, str]) -> pa.Schema:
    return pa.schema([pa.field(name, kind, metadata={"description": text}) for name, kind, text in fields])


_TOKENS = (
    ("tokens_input", pa.int64(), "input (prompt) tokens, as the provider reported them"),
    ("tokens_output", pa.int64(), "output (completion) tokens"),
    ("tokens_reasoning", pa.int64(), "reasoning tokens, where the provider reports them"),
    ("tokens_cached", pa.int64(), "cached input tokens, where the provider reports them"),
    ("tokens_cache_write", pa.int64(), "tokens written to the provider's prompt cache, where reported"),
)

_ACCOUNTING = (
    ("cost_generation_usd", pa.float64(), "measured spend on generation (target) calls"),
    ("cost_judging_usd", pa.float64(), "measured spend on judging (model-graded scorer) calls"),
    ("cost_external_usd", pa.float64(), "measured spend on other calls"),
    ("cost_completeness", pa.string(), "complete | incomplete | unverified: how far cost_usd can be trusted"),
    ("cost_reasons", pa.string(), 'why incomplete, with counts (JSON text, e.g. {"unpriced": 3})'),
    ("operations", pa.int64(), "model calls attempted (each HTTP attempt, denied calls included)"),
    ("operations_settled", pa.int64(), "calls that got an answer (success or error status)"),
    ("operations_unknown", pa.int64(), "calls whose fate is unknown (timeouts, dropped connections)"),
    ("operations_denied", pa.int64(), "calls the budget refused before they were sent"),
    ("operations_cached", pa.int64(), "calls answered by the response cache (free)"),
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
    ("output", pa.string(), "what the target answered (JSON text), null unless completed"),
    ("output_text", pa.string(), "the output as plain text: the string itself, else its JSON"),
    (
        "outcome",
        pa.string(),
        "item outcome: completed | failed | cancelled | budget_skipped | budget_interrupted",
    ),
    (
        "error",
        pa.string(),
        (
            "why the item did not complete, for people: the failure's message, or what stopped it"
            " (budget reached, the budget's refusal of a call); null when completed"
        ),
    ),
    ("failure_kind", pa.string(), "http | timeout | connection | protocol | exception; null unless failed"),
    ("failure_provider", pa.string(), "who failed: `openai:<host>` or `python`"),
    ("failure_http_status", pa.int32(), "the last HTTP status of a failed call"),
    ("failure_retryable", pa.bool_(), "whether the failure was of a retryable kind (retries ran out)"),
    ("failure_request_id", pa.string(), "the provider's request id of the failed call"),
    ("model", pa.string(), "the model that answered, as the provider named it"),
    ("started_at", _TS, "when the item started (UTC); null if it never did (budget_skipped)"),
    ("queued_ms", pa.float64(), "time the item waited for a slot under the run's concurrency"),
    ("duration_ms", pa.float64(), "wall time of the item's target call, retries included"),
    ("wire_ms", pa.float64(), "wall time of the attempt that succeeded"),
    ("retry_ms", pa.float64(), "time spent in failed attempts and backoff before it"),
    ("retries", pa.int32(), "how many attempts failed before the last"),
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
)

SCORES = _schema(
    ("item_id", pa.string(), "the scored item's id"),
    ("item_index", pa.int64(), "the scored item's position in the dataset"),
    ("trial", pa.int32(), "the scored item's trial"),
    (
        "kind",
        pa.string(),
        (
            "score (a scorer's judgement) | gauge (a measurement of the target's work on a completed "
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
            "scorer outcome: scored | failed | skipped | cancelled | budget_skipped | budget_interrupted; "
            "measured on gauge rows"
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
    ("cost_completeness", pa.string(), "complete | incomplete | unverified"),
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
    ("kind", pa.string(), "run | rescore"),
    ("name", pa.string(), "the spec's name"),
    ("status", pa.string(), "running | completed | failed_gate | cancelled | failed | unavailable"),
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
        "matrix_id",
        pa.string(),
        "for a cell of a matrix spec (`targets:`): the matrix's id, shared by its cells",
    ),
    ("cell", pa.string(), "for a cell of a matrix spec: the cell's name"),
    ("target_kind", pa.string(), "openai | python | http_agent"),
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
            "items x trials planned that have no row: the run was cancelled or failed before them "
            "(`assay resume` runs them); completed + failed + cancelled + budget_* = planned"
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
    ("budget_status", pa.string(), "open | closed; null without a budget"),
    ("budget_closed_by", pa.string(), "what first met the closed budget: case | operation | scorer"),
    (
        "capture_status",
        pa.string(),
        "off | complete | truncated | unavailable: the request sidecar's manifest",
    ),
    ("capture_reason", pa.string(), "why truncated or unavailable"),
    ("capture_records", pa.int64(), "records captured by the last execution"),
    ("capture_bytes", pa.int64(), "bytes of records the run holds"),
    ("capture_dropped", pa.int64(), "records dropped by the limits in the last execution"),
    ("wall_ms", pa.float64(), "wall time of the last execution of the run"),
    ("assay_version", pa.string(), "Assay's version"),
    ("prefect_flow_run_id", pa.string(), "the Prefect flow run that last executed it; null without Prefect"),
)

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
    ("method", pa.string(), "start | resume; null on the row of an attempt that sent no prompt"),
    ("session_id", pa.string(), "the session's id (sent to an http_agent harness as `session_id`)"),
    ("prompt", pa.string(), "what was sent (JSON text)"),
    ("output", pa.string(), "what the target answered (JSON text); null unless completed"),
    ("outcome", pa.string(), "the prompt's outcome: completed | failed | cancelled | budget_interrupted"),
    (
        "error",
        pa.string(),
        "why the prompt (or, on a row without one, the attempt) failed, or the budget's refusal",
    ),
    ("failure_kind", pa.string(), "http | timeout | connection | protocol | exception; null unless failed"),
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
    ("cost_completeness", pa.string(), "complete | incomplete | unverified"),
    ("started_at", _TS, "when the prompt was sent (UTC)"),
    ("duration_ms", pa.float64(), "wall time of the prompt, retries included"),
    ("attempt_outcome", pa.string(), "the attempt's item outcome: completed | failed | ..."),
    ("attempt_passed", pa.bool_(), "whether the attempt passed (every scorer that scored gave 1)"),
    ("attempt_scores", pa.string(), "the attempt's scores by scorer (JSON text); null unless it completed"),
    ("best", pa.bool_(), "whether this attempt is the one kept in `items` and `scores`"),
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
    ("ci_low", pa.float64(), "paired bootstrap percentile CI, low end"),
    ("ci_high", pa.float64(), "paired bootstrap percentile CI, high end"),
    ("se", pa.float64(), "analytic paired standard error of the delta"),
    ("se_ci_low", pa.float64(), "delta - t * se"),
    ("se_ci_high", pa.float64(), "delta + t * se"),
    ("p_value", pa.float64(), "two-sided paired t-test p-value"),
    ("clustered_se", pa.float64(), "cluster-robust SE when items carry a cluster annotation, else null"),
    ("clustered_ci_low", pa.float64(), "delta - z * clustered_se"),
    ("clustered_ci_high", pa.float64(), "delta + z * clustered_se"),
    ("n_clusters", pa.int64(), "clusters among the pairs, else null"),
    ("threshold", pa.float64(), "the practical-significance threshold the verdict used"),
    ("verdict", pa.string(), "regressed | improved | unchanged | inconclusive"),
    ("unpaired_baseline", pa.int64(), "items scored on the baseline side only"),
    ("unpaired_candidate", pa.int64(), "items scored on the candidate side only"),
    ("unscored_baseline", pa.int64(), "baseline items without a score from this scorer (failed, skipped)"),
    ("unscored_candidate", pa.int64(), "candidate items without a score from this scorer"),
    ("confidence", pa.float64(), "the CIs' confidence level"),
    ("resamples", pa.int64(), "bootstrap resamples"),
    ("seed", pa.int64(), "bootstrap seed"),
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
    ("ci_low", pa.float64(), "Student-t CI of the mean, low end"),
    ("ci_high", pa.float64(), "Student-t CI of the mean, high end"),
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
    ("delta_ci_low", pa.float64(), "paired bootstrap CI of that delta, low end"),
    ("delta_ci_high", pa.float64(), "paired bootstrap CI of that delta, high end"),
    (
        "verdict_vs_baseline",
        pa.string(),
        "regressed | improved | unchanged | inconclusive against the baseline",
    ),
)

REQUESTS = _schema(
    ("v", pa.int32(), "record format version (1)"),
    ("operation_id", pa.string(), "the model call the record belongs to"),
    ("phase", pa.string(), "start (the request) | attempt (one HTTP attempt) | end (the outcome)"),
    ("item_id", pa.string(), "the item the call was made for"),
    ("trial", pa.int32(), "the item's trial"),
    ("scorer", pa.string(), "the scorer, for judging calls; null for generation"),
    ("kind", pa.string(), "generation | judging | external"),
    ("attempt", pa.int32(), "attempt number, from 1 (attempt records)"),
    ("model", pa.string(), "the model asked (start) or that answered (end)"),
    ("http_status", pa.int32(), "the attempt's HTTP status; null when no reply came"),
    ("started_at", _TS, "when the record was made (UTC)"),
    ("wire_ms", pa.float64(), "the attempt's time on the wire"),
    ("retry_ms", pa.float64(), "time in failed attempts and backoff (end records)"),
    ("total_ms", pa.float64(), "the call's whole time, retries included (end records)"),
    ("tokens_input", pa.int64(), "input tokens (end records)"),
    ("tokens_output", pa.int64(), "output tokens (end records)"),
    ("cost_usd", pa.float64(), "measured cost (end records); null when unpriced"),
    ("outcome", pa.string(), "ok | failed | budget_denied (end records)"),
    ("error", pa.string(), "the attempt's or the call's error, redacted"),
    ("request", pa.string(), "the request body (JSON text, redacted; start records)"),
    ("response", pa.string(), "the response body (JSON text, redacted; attempt records)"),
    ("truncated", pa.bool_(), "bodies were cut to fit max_record_bytes"),
    ("bytes", pa.int64(), "the record's size as JSON, counted against the limits"),
)
