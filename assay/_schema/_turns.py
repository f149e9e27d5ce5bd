"""`turns`: one row per prompt of a managed session (a policy or attempts), as `assay.run.attempts`
builds it."""

from datetime import datetime
from typing import Annotated, TypedDict

import pyarrow as pa

from assay._schema._columns import (
    TIMESTAMP,
    Column,
    FailureKindColumn,
    FinishReasonColumn,
    TokensCached,
    TokensCacheWrite,
    TokensInput,
    TokensOutput,
    TokensReasoning,
    schema_of,
    words,
)
from assay.outcomes import Completeness, ItemOutcome, TurnMethod


class TurnRow(TypedDict, total=False):
    """A row of `turns`: one prompt of a managed session (or an attempt that sent none)."""

    item_id: Annotated[str, Column(pa.string(), "the item the session ran for")]
    item_index: Annotated[int, Column(pa.int64(), "the item's position in the dataset")]
    trial: Annotated[int, Column(pa.int32(), "the item's trial")]
    attempt: Annotated[int, Column(pa.int32(), "which attempt (a fresh session), from 1")]
    index: Annotated[
        int | None,
        Column(
            pa.int32(),
            "the prompt's position in its session, from 0; null on the one row of an attempt that sent none",
        ),
    ]
    method: Annotated[
        str | None,
        Column(pa.string(), f"{words(TurnMethod)}; null on the row of an attempt that sent no prompt"),
    ]
    session_id: Annotated[
        str | None,
        Column(pa.string(), "the session's id (sent to an http_agent harness as `session_id`)"),
    ]
    prompt: Annotated[str | None, Column(pa.string(), "what was sent (JSON text)")]
    output: Annotated[
        str | None, Column(pa.string(), "what the target answered (JSON text); null unless completed")
    ]
    outcome: Annotated[
        str,
        Column(pa.string(), f"the prompt's outcome: {words(ItemOutcome, ItemOutcome.BUDGET_SKIPPED)}"),
    ]
    error: Annotated[
        str | None,
        Column(
            pa.string(),
            "why the prompt (or, on a row without one, the attempt) failed, or the budget's refusal",
        ),
    ]
    failure_kind: FailureKindColumn
    finish_reason: FinishReasonColumn
    model: Annotated[str | None, Column(pa.string(), "the model that answered, as the provider named it")]
    tokens_input: TokensInput
    tokens_output: TokensOutput
    tokens_reasoning: TokensReasoning
    tokens_cached: TokensCached
    tokens_cache_write: TokensCacheWrite
    tokens_known: Annotated[
        bool | None,
        Column(
            pa.bool_(),
            "whether the prompt's token counts are known: false when a call's fate is unknown (a "
            "broken or timed-out answer, a cancelled prompt) or the target is not instrumented",
        ),
    ]
    cost_usd: Annotated[float | None, Column(pa.float64(), "measured cost of the prompt's calls, USD")]
    cost_completeness: Annotated[str | None, Column(pa.string(), words(Completeness))]
    started_at: Annotated[datetime | None, Column(TIMESTAMP, "when the prompt was sent (UTC)")]
    duration_ms: Annotated[float | None, Column(pa.float64(), "wall time of the prompt, retries included")]
    attempt_outcome: Annotated[
        str,
        Column(
            pa.string(),
            f"the attempt's item outcome: {ItemOutcome.COMPLETED} | {ItemOutcome.FAILED} | ...",
        ),
    ]
    attempt_passed: Annotated[
        bool, Column(pa.bool_(), "whether the attempt passed (every scorer that scored gave 1)")
    ]
    attempt_scores: Annotated[
        str | None,
        Column(pa.string(), "the attempt's scores by scorer (JSON text); null unless it completed"),
    ]
    best: Annotated[bool, Column(pa.bool_(), "whether this attempt is the one kept in `items` and `scores`")]
    retry: Annotated[
        int, Column(pa.int32(), "the item row's `retry` these turns belong to (0 unless it was retried)")
    ]


TURNS = schema_of(TurnRow)
