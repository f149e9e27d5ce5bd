"""`items`: one row per item x trial (and per retry), as `assay.run.rows` builds it."""

from datetime import datetime
from typing import Annotated, TypedDict

import pyarrow as pa

from assay._schema._columns import (
    NOT_ANSWERS,
    TIMESTAMP,
    Column,
    CostCompleteness,
    CostExternalUsd,
    CostGenerationUsd,
    CostJudgingUsd,
    CostReasons,
    FailureKindColumn,
    FinishReasonColumn,
    FinishReasonRaw,
    Operations,
    OperationsBatched,
    OperationsByKind,
    OperationsCached,
    OperationsDenied,
    OperationsSettled,
    OperationsUnknown,
    TokensCached,
    TokensCacheWrite,
    TokensInput,
    TokensOutput,
    TokensReasoning,
    schema_of,
    words,
)
from assay.outcomes import ItemOutcome

TOOL_CALLS = pa.list_(pa.struct([("id", pa.string()), ("name", pa.string()), ("arguments", pa.string())]))


class ItemRow(TypedDict, total=False):
    """A row of `items` (docs/schema.md says what each column holds)."""

    item_id: Annotated[
        str,
        Column(
            pa.string(), "stable id: the dataset's id field, else a hash of the row; pairs items across runs"
        ),
    ]
    item_index: Annotated[int, Column(pa.int64(), "the row's position in the dataset, from 0")]
    trial: Annotated[int, Column(pa.int32(), "which repetition of the item, from 0")]
    input: Annotated[str | None, Column(pa.string(), "the item's input (JSON text)")]
    expected: Annotated[
        str | None, Column(pa.string(), "the item's expected answer (JSON text), null if none")
    ]
    annotations: Annotated[str | None, Column(pa.string(), "the item's annotations (JSON text of an object)")]
    output: Annotated[
        str | None,
        Column(
            pa.string(),
            "what the target answered (JSON text), null unless completed; on a reply that was no "
            f"answer (failure_kind {NOT_ANSWERS}) what the model sent instead — the text cut "
            "off, the refusal, the tool calls — kept as evidence, never scored",
        ),
    ]
    output_text: Annotated[
        str | None, Column(pa.string(), "the output as plain text: the string itself, else its JSON")
    ]
    outcome: Annotated[str, Column(pa.string(), f"item outcome: {words(ItemOutcome)}")]
    error: Annotated[
        str | None,
        Column(
            pa.string(),
            "why the item did not complete, for people: the failure's message, or what stopped it"
            " (budget reached, the budget's refusal of a call); null when completed",
        ),
    ]
    failure_kind: FailureKindColumn
    failure_provider: Annotated[str | None, Column(pa.string(), "who failed: `openai:<host>` or `python`")]
    failure_http_status: Annotated[int | None, Column(pa.int32(), "the last HTTP status of a failed call")]
    failure_retryable: Annotated[
        bool | None, Column(pa.bool_(), "whether the failure was of a retryable kind (retries ran out)")
    ]
    failure_request_id: Annotated[
        str | None, Column(pa.string(), "the provider's request id of the failed call")
    ]
    finish_reason: FinishReasonColumn
    finish_reason_raw: FinishReasonRaw
    model: Annotated[str | None, Column(pa.string(), "the model that answered, as the provider named it")]
    started_at: Annotated[
        datetime | None,
        Column(TIMESTAMP, "when the item started (UTC); null if it never did (budget_skipped)"),
    ]
    queued_ms: Annotated[
        float | None, Column(pa.float64(), "time the item waited for a slot under the run's concurrency")
    ]
    duration_ms: Annotated[
        float | None, Column(pa.float64(), "wall time of the item's target call, retries included")
    ]
    wire_ms: Annotated[float | None, Column(pa.float64(), "wall time of the attempt that succeeded")]
    first_token_ms: Annotated[
        float | None,
        Column(
            pa.float64(),
            "streamed model calls: from sending the attempt that succeeded to its first answer token; "
            "null otherwise",
        ),
    ]
    retry_ms: Annotated[
        float | None, Column(pa.float64(), "time spent in failed attempts and backoff before it")
    ]
    retries: Annotated[
        int | None,
        Column(
            pa.int32(),
            "how many attempts failed before the last (failed items too; an http_agent's summed over "
            "its requests to the harness; a python target's 0: never retried); null if not counted",
        ),
    ]
    tokens_input: TokensInput
    tokens_output: TokensOutput
    tokens_reasoning: TokensReasoning
    tokens_cached: TokensCached
    tokens_cache_write: TokensCacheWrite
    cost_usd: Annotated[
        float | None,
        Column(pa.float64(), "measured cost in USD of the item: generation plus its scorers' judging"),
    ]
    cost_generation_usd: CostGenerationUsd
    cost_judging_usd: CostJudgingUsd
    cost_external_usd: CostExternalUsd
    cost_completeness: CostCompleteness
    cost_reasons: CostReasons
    operations: Operations
    operations_settled: OperationsSettled
    operations_unknown: OperationsUnknown
    operations_denied: OperationsDenied
    operations_cached: OperationsCached
    operations_batched: OperationsBatched
    operations_by_kind: OperationsByKind
    caller_cost_usd: Annotated[
        float | None,
        Column(pa.float64(), "cost reported by the target's own code, kept apart from measured cost"),
    ]
    caller_metadata: Annotated[
        str | None, Column(pa.string(), "metadata reported by the target's own code (JSON text)")
    ]
    caller_reserved: Annotated[
        str | None,
        Column(
            pa.string(),
            "what that code reported under reserved keys (model, tokens, usage, cost…): not measured",
        ),
    ]
    operation_ids: Annotated[
        list[str] | None,
        Column(pa.list_(pa.string()), "captured model calls of the item, generation and judging"),
    ]
    artifacts: Annotated[
        list[str] | None,
        Column(
            pa.list_(pa.string()),
            "files kept for the attempt (transcript, diff, workspace, agent files), relative to "
            "`<store>/artifacts/`",
        ),
    ]
    sandbox: Annotated[
        str | None,
        Column(
            pa.string(),
            "a container attempt's facts (JSON text): image id, user, exit code, stage timings, "
            "`verifier` (a fresh container, and why) and `redacted_names` when they apply",
        ),
    ]
    teardown_error: Annotated[
        str | None,
        Column(pa.string(), "why tearing down the attempt's sandbox failed (never masks the result)"),
    ]
    attempt: Annotated[
        int | None,
        Column(
            pa.int32(), "with a policy or attempts: the attempt kept (the best), from 1; null for a plain run"
        ),
    ]
    attempts_made: Annotated[
        int | None,
        Column(
            pa.int32(),
            "with a policy or attempts: how many attempts ran (every one is in `turns`); null for a plain run",
        ),
    ]
    retry: Annotated[
        int | None,
        Column(
            pa.int32(),
            "which execution of the item x trial the row is, from 0: `assay resume RUN --retry-failed` "
            "adds a row with the next number for each failed one it runs again, the earlier row kept "
            "as history. The current row of an item x trial is its highest `retry`",
        ),
    ]
    retry_of: Annotated[
        int | None,
        Column(pa.int32(), "for a retry: the `retry` of the failed row it replaced; null otherwise"),
    ]
    tokens_known: Annotated[
        bool | None,
        Column(
            pa.bool_(),
            "with a policy or attempts: whether `tokens_*` are the whole count; false when some "
            "prompt's were not known (it broke off, timed out or was cancelled: `turns.tokens_known`), "
            "and `tokens_*` then sum the counts that were; null for a plain run",
        ),
    ]
    tool_calls: Annotated[
        list[dict[str, str | None]] | None,
        Column(
            TOOL_CALLS,
            "a chat model's tool calls when they are its answer (the target offered `tools`), in "
            "the order made: each its provider's `id`, the function's `name` and its `arguments` "
            "(JSON text, as the model wrote them); on a failed row, the calls the model had made "
            "(an unasked call, a tool loop's calls up to its failure), as evidence; null when it "
            "answered in words",
        ),
    ]
    tool_call_text: Annotated[
        str | None,
        Column(
            pa.string(),
            "the text a reply of tool calls held beside them when the calls are its answer "
            "(Anthropic's text block before its tool_use blocks, OpenAI's content beside tool_calls), "
            "never scored; null when it held none",
        ),
    ]
    reasoning: Annotated[
        str | None,
        Column(
            pa.string(),
            "a reasoning model's reasoning text or summary, where the provider sends it (Anthropic's "
            "thinking blocks; `reasoning_content` of vLLM and DeepSeek): kept apart from the output, "
            "which alone is scored; null when none was sent",
        ),
    ]


ITEMS = schema_of(ItemRow)
