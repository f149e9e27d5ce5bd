"""`batches`: batch mode's ledger, a row when a provider accepted a batch and one when it ended."""

from datetime import datetime
from typing import Annotated, TypedDict

import pyarrow as pa

from assay._schema._columns import TIMESTAMP, Column, schema_of, words
from assay.outcomes import BatchState, SpendKind


class BatchRow(TypedDict, total=False):
    """A row of `batches`, as `Store.record_batch` takes it."""

    batch_id: Annotated[str, Column(pa.string(), "the provider's id of a batch (batch mode)")]
    provider: Annotated[str, Column(pa.string(), "who holds it: `anthropic:<host>`, `openai:<host>`")]
    purpose: Annotated[
        str | None,
        Column(
            pa.string(),
            f"whose calls it holds: {SpendKind.GENERATION} (the target's) | {SpendKind.JUDGING} (an "
            f"llm_judge's); null in rows written before judges batched: {SpendKind.GENERATION}",
        ),
    ]
    scorer: Annotated[
        str | None, Column(pa.string(), "the judging scorer's name; null for the target's batches")
    ]
    custom_ids: Annotated[
        list[str],
        Column(
            pa.list_(pa.string()),
            "its requests' custom ids (a hash of item id and trial; a judge's also of its scorer and request)",
        ),
    ]
    requests: Annotated[int, Column(pa.int64(), "how many requests it holds")]
    state: Annotated[
        str,
        Column(pa.string(), f"{words(BatchState)}: one row when the provider accepted it, one when it ended"),
    ]
    submitted_at: Annotated[datetime, Column(TIMESTAMP, "when the provider accepted it (UTC)")]
    ended_at: Annotated[
        datetime | None, Column(TIMESTAMP, "when it was seen to have ended (UTC); null while in progress")
    ]
    request_counts: Annotated[
        str | None,
        Column(pa.string(), "the provider's counts once ended (JSON text: succeeded, errored, expired, …)"),
    ]


BATCHES = schema_of(BatchRow)
