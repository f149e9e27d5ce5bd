"""`runs`: one row per run and revision of its record."""

from datetime import datetime
from typing import Annotated, TypedDict

import pyarrow as pa

from assay._schema._columns import (
    TIMESTAMP,
    Column,
    CostCompleteness,
    CostExternalUsd,
    CostGenerationUsd,
    CostJudgingUsd,
    CostReasons,
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
from assay.outcomes import (
    BudgetClosedBy,
    BudgetStatus,
    CaptureStatus,
    Completeness,
    RunKind,
    RunStatus,
    Verdict,
)


class RunRecord(TypedDict, total=False):
    """A run's record as `Store.write_run` takes it and `Store.read_run` returns it: the columns
    of `RUNS` (a key left out is stored as null) and, when read, the run's id (the partition key,
    no column). `write_run` refuses a key that is not a column."""

    run_id: str
    revision: Annotated[
        int,
        Column(
            pa.int64(),
            "which write of the run's record this row is, from 1: every change (start, finish,"
            " resume, tags) adds a row in a file of its own; the run's current record is its highest"
            " revision",
        ),
    ]
    kind: Annotated[str, Column(pa.string(), words(RunKind))]
    name: Annotated[str, Column(pa.string(), "the spec's name")]
    status: Annotated[str, Column(pa.string(), words(RunStatus))]
    unavailable_reason: Annotated[
        str | None, Column(pa.string(), "why a scorer's gold check made the eval unavailable")
    ]
    error: Annotated[
        str | None, Column(pa.string(), "why the run failed (status `failed`): the exception that stopped it")
    ]
    created_at: Annotated[datetime, Column(TIMESTAMP, "when the run was first started (UTC)")]
    finished_at: Annotated[
        datetime | None, Column(TIMESTAMP, "when it last finished (UTC); null while running")
    ]
    spec_path: Annotated[str | None, Column(pa.string(), "the spec file the run was started from")]
    spec_json: Annotated[
        str, Column(pa.string(), "the validated spec (JSON text); holds env-var names, never secrets")
    ]
    spec_hash: Annotated[str, Column(pa.string(), "hash of the whole validated spec")]
    identity: Annotated[
        str, Column(pa.string(), "hash of what decides results: dataset, target, scorers, trials, seed")
    ]
    dataset_hash: Annotated[str, Column(pa.string(), "hash of the mapped dataset items")]
    dataset_revision: Annotated[
        str | None,
        Column(
            pa.string(),
            "a Hugging Face dataset's commit (its `revision` resolved; part of `identity`); null for a file",
        ),
    ]
    target_hash: Annotated[str, Column(pa.string(), "hash of the target's result-deciding config")]
    scorers_hash: Annotated[str, Column(pa.string(), "hash of the scorers' names, versions and params")]
    source_run_id: Annotated[str | None, Column(pa.string(), "for a rescore: the run it rescored")]
    source_generation_usd: Annotated[
        float | None,
        Column(
            pa.float64(),
            "for a rescore: the source's measured generation spend (its source's, for a rescore of a "
            "rescore), beside this run's own judging in `cost_*`; never added to them",
        ),
    ]
    source_generation_completeness: Annotated[
        str | None,
        Column(pa.string(), f"for a rescore: {words(Completeness)}, how far `source_generation_usd` holds"),
    ]
    kept_scorers: Annotated[
        list[str] | None,
        Column(
            pa.list_(pa.string()),
            "for a rescore with `--keep-scores`: the source's scorers whose rows it carries forward "
            "unchanged (every one no new scorer replaces by name), so it compares with its source "
            "scorer by scorer; null otherwise",
        ),
    ]
    matrix_id: Annotated[
        str | None,
        Column(pa.string(), "for a cell of a matrix spec (`targets:`): the matrix's id, shared by its cells"),
    ]
    cell: Annotated[str | None, Column(pa.string(), "for a cell of a matrix spec: the cell's name")]
    target_kind: Annotated[
        str,
        Column(pa.string(), "openai | anthropic | python | http_agent | container: the spec's `target.kind`"),
    ]
    target_snapshot: Annotated[
        str | None,
        Column(pa.string(), "an http_agent's capabilities as snapshotted when the run started (JSON text)"),
    ]
    model: Annotated[str | None, Column(pa.string(), "the target's model, for model targets")]
    trials: Annotated[int, Column(pa.int32(), "repetitions per item")]
    seed: Annotated[int, Column(pa.int64(), "the run's seed")]
    policy: Annotated[
        str | None,
        Column(pa.string(), "the session policy (`module:function`) driving each attempt; null without one"),
    ]
    attempts: Annotated[
        int | None, Column(pa.int32(), "most attempts per item x trial (fresh sessions; the best is kept)")
    ]
    fixtures_hash: Annotated[
        str | None,
        Column(
            pa.string(),
            "hash of the fixture files' content the target hands its agent (part of the identity); null if none",
        ),
    ]
    execution_order: Annotated[
        str, Column(pa.string(), "dataset order, or a seeded shuffle of item x trial (trials > 1)")
    ]
    tags: Annotated[list[str], Column(pa.list_(pa.string()), "the spec's tags")]
    n_items: Annotated[int, Column(pa.int64(), "items in the dataset")]
    n_planned: Annotated[int, Column(pa.int64(), "items x trials planned")]
    n_completed: Annotated[int | None, Column(pa.int64(), "item outcomes: completed")]
    n_failed: Annotated[int | None, Column(pa.int64(), "item outcomes: failed")]
    n_cancelled: Annotated[
        int | None,
        Column(
            pa.int64(),
            "items x trials planned that have no row: the run was cancelled, failed or stopped early "
            "before them (`assay resume` runs those of a cancelled or failed run); "
            "completed + failed + cancelled + budget_* = planned",
        ),
    ]
    n_budget_skipped: Annotated[int | None, Column(pa.int64(), "item outcomes: budget_skipped")]
    n_budget_interrupted: Annotated[int | None, Column(pa.int64(), "item outcomes: budget_interrupted")]
    item_error_rate: Annotated[
        float | None, Column(pa.float64(), "failed / (completed + failed); null if nothing was attempted")
    ]
    fail_on_item_error_rate: Annotated[float, Column(pa.float64(), "the gate's limit (1 disables it)")]
    fail_on_scorer_error_rate: Annotated[
        float | None,
        Column(
            pa.float64(),
            "the scorer error-rate gate's limit, per scorer (1 disables it); null: a run from before it",
        ),
    ]
    tokens_input: TokensInput
    tokens_output: TokensOutput
    tokens_reasoning: TokensReasoning
    tokens_cached: TokensCached
    tokens_cache_write: TokensCacheWrite
    cost_usd: Annotated[float | None, Column(pa.float64(), "measured cost in USD: the sum of its items'")]
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
    budget_limit_usd: Annotated[float | None, Column(pa.float64(), "the spec's budget; null without one")]
    budget_spent_usd: Annotated[float | None, Column(pa.float64(), "measured spend the budget saw")]
    budget_status: Annotated[str | None, Column(pa.string(), f"{words(BudgetStatus)}; null without a budget")]
    budget_closed_by: Annotated[
        str | None, Column(pa.string(), f"what first met the closed budget: {words(BudgetClosedBy)}")
    ]
    capture_status: Annotated[
        str | None, Column(pa.string(), f"{words(CaptureStatus)}: the request sidecar's manifest")
    ]
    capture_reason: Annotated[str | None, Column(pa.string(), "why truncated or unavailable")]
    capture_records: Annotated[int | None, Column(pa.int64(), "records captured by the last execution")]
    capture_bytes: Annotated[int | None, Column(pa.int64(), "bytes of records the run holds")]
    capture_dropped: Annotated[
        int | None, Column(pa.int64(), "records dropped by the limits in the last execution")
    ]
    wall_ms: Annotated[float | None, Column(pa.float64(), "wall time of the last execution of the run")]
    rate_control: Annotated[
        str | None,
        Column(
            pa.string(),
            "the target endpoint's adaptive rate controller at the end of the last execution (JSON: "
            "endpoint, share (local, dask or prefect), members, ceiling, rpm, tpm, learned_rpm, announced_rpm, "
            "limit, peak, responses, "
            "rate_limited, paused_s, history {columns [t, limit, in_flight, rate_limited], rows}); "
            "null for targets without one",
        ),
    ]
    summary_json: Annotated[
        str | None,
        Column(
            pa.string(),
            "the figures its summary computes from its parts (outcome counts, scorer and gauge"
            " statistics, durations, failures, timing, batches, spend), computed as it closed (JSON,"
            " `assay.analysis.run_figures.part_figures` with their `version`), so `assay show` and"
            " `assay view` read a finished run's summary without its parts; null while it runs,"
            " and from any later change but a tag",
        ),
    ]
    assay_version: Annotated[str, Column(pa.string(), "Assay's version")]
    prefect_flow_run_id: Annotated[
        str | None,
        Column(pa.string(), "the Prefect flow run that last executed it; null without Prefect"),
    ]
    compare_baseline: Annotated[
        str | None,
        Column(pa.string(), "the run a sequential compare (`compare_to`) compared with; null without one"),
    ]
    compare_scorer: Annotated[str | None, Column(pa.string(), "the scorer it compared")]
    compare_threshold: Annotated[float | None, Column(pa.float64(), "its threshold (score units)")]
    compare_alpha: Annotated[
        float | None,
        Column(pa.float64(), "its alpha: the chance of a wrong verdict, whenever the run stopped"),
    ]
    compare_stop: Annotated[
        str | None, Column(pa.string(), "decided (stop at the verdict) or never (monitor only)")
    ]
    compare_verdict: Annotated[
        str | None, Column(pa.string(), f"{words(Verdict)}: the confidence sequence's verdict")
    ]
    compare_items: Annotated[
        int | None, Column(pa.int64(), "paired items the verdict used (in the run's seeded order)")
    ]
    compare_delta: Annotated[
        float | None, Column(pa.float64(), "their mean paired difference, candidate - baseline")
    ]
    compare_low: Annotated[
        float | None, Column(pa.float64(), "the confidence sequence's interval on the difference, low end")
    ]
    compare_high: Annotated[
        float | None, Column(pa.float64(), "the confidence sequence's interval, high end")
    ]


RUNS = schema_of(RunRecord, besides=("run_id",))
