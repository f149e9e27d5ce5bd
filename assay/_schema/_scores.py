"""`scores`: one row per item x trial x scorer (`kind = score`), and per gauge (`kind = gauge`)."""

from typing import Annotated, TypedDict

import pyarrow as pa

from assay._schema._columns import (
    Column,
    TokensCached,
    TokensCacheWrite,
    TokensInput,
    TokensOutput,
    TokensReasoning,
    schema_of,
    words,
)
from assay.outcomes import Completeness, RowKind, ScorerOutcome


class ScoreRow(TypedDict, total=False):
    """A row of `scores` of kind `score` (gauge rows are built column by column: `assay.run.rows.gauges_table`)."""

    item_id: Annotated[str, Column(pa.string(), "the scored item's id")]
    item_index: Annotated[int, Column(pa.int64(), "the scored item's position in the dataset")]
    trial: Annotated[int, Column(pa.int32(), "the scored item's trial")]
    kind: Annotated[
        str,
        Column(
            pa.string(),
            f"{RowKind.SCORE} (a scorer's judgement) | {RowKind.GAUGE} (a measurement of the target's work "
            "on a completed item: duration, steps, tokens…); filter on it before aggregating",
        ),
    ]
    scorer: Annotated[
        str,
        Column(
            pa.string(),
            "the scorer's name, unique within a run; on gauge rows the gauge's name (`gauge.duration_ms`, …)",
        ),
    ]
    scorer_kind: Annotated[
        str,
        Column(pa.string(), "the scorer's kind (exact_match, regex, user_code, ...); `gauge` on gauge rows"),
    ]
    scorer_version: Annotated[str, Column(pa.string(), "the scorer implementation's version")]
    score: Annotated[
        float | None,
        Column(
            pa.float64(), "a finite number in [0, 1]; null unless outcome is scored (so always on gauge rows)"
        ),
    ]
    value: Annotated[
        float | None,
        Column(
            pa.float64(),
            "the row's number: on score rows the score again (null unless scored); on gauge rows the "
            "measurement, in the unit its name ends with (ms, steps, calls, tokens, usd)",
        ),
    ]
    outcome: Annotated[
        str,
        Column(
            pa.string(),
            f"scorer outcome: {words(ScorerOutcome, ScorerOutcome.MEASURED)}; "
            f"{ScorerOutcome.MEASURED} on gauge rows",
        ),
    ]
    error: Annotated[
        str | None,
        Column(
            pa.string(),
            "why the scorer did not score: its failure's message, or what stopped it (the budget);"
            " null when scored, skipped or measured",
        ),
    ]
    duration_ms: Annotated[float | None, Column(pa.float64(), "wall time of the scorer")]
    model: Annotated[str | None, Column(pa.string(), "the judge's model, for model-graded scorers")]
    tokens_input: TokensInput
    tokens_output: TokensOutput
    tokens_reasoning: TokensReasoning
    tokens_cached: TokensCached
    tokens_cache_write: TokensCacheWrite
    cost_usd: Annotated[
        float | None,
        Column(pa.float64(), "measured judging cost of this scorer on this item, USD (0 for deterministic)"),
    ]
    cost_completeness: Annotated[str | None, Column(pa.string(), words(Completeness))]
    cost_reasons: Annotated[str | None, Column(pa.string(), "why incomplete, with counts (JSON text)")]
    operations: Annotated[int | None, Column(pa.int64(), "model calls this scorer made on this item")]
    explanation: Annotated[str | None, Column(pa.string(), "the scorer's explanation, if it gave one")]
    label: Annotated[
        str | None,
        Column(pa.string(), "a remote evaluator's label for the score; `error` when that evaluator failed"),
    ]
    judge_variance: Annotated[
        float | None,
        Column(
            pa.float64(),
            "a judge asked K times per item (`judge_samples`): the sample variance of its K scores"
            " (the score is their mean); null otherwise",
        ),
    ]
    judge_samples: Annotated[
        int | None, Column(pa.int32(), "how many times the judge was asked (`judge_samples`); null when once")
    ]
    metadata: Annotated[str | None, Column(pa.string(), "the scorer's metadata (JSON text), if it gave any")]
    operation_ids: Annotated[
        list[str] | None, Column(pa.list_(pa.string()), "captured model calls of this scorer on this item")
    ]


SCORES = schema_of(ScoreRow)
