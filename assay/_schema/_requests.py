"""`requests`: the captured model calls (the request sidecar), one row per record.

The columns are the fields of a pydantic model, as a JSONL line of the sidecar holds them
(`assay.calls.request_codec.RequestRecord` adds how a line is checked): `started_at` is ISO-8601
text there and a timestamp in Parquet, `request` / `response` JSON values there and JSON text
in Parquet (`assay.run.rows.requests_table`).
"""

from typing import Annotated, Final, Literal

import pyarrow as pa
from pydantic import BaseModel, Field, JsonValue

from assay._schema._columns import TIMESTAMP, Column, schema_of, words
from assay.outcomes import FinishReason, RequestOutcome, RequestPhase, SpendKind

VERSION: Final = 1

_Millis = Annotated[float | None, Field(ge=0, allow_inf_nan=False)]
_Count = Annotated[int | None, Field(ge=0)]


class RequestColumns(BaseModel):
    """One captured moment of one model call: the columns of `requests`, each with the values a
    record may hold. Words of `assay.outcomes` are not strict: a file holds their values (strict
    takes only members)."""

    v: Annotated[Literal[1], Column(pa.int32(), "record format version (1)")] = VERSION
    operation_id: Annotated[str, Column(pa.string(), "the model call the record belongs to")] = Field(
        min_length=1
    )
    phase: Annotated[
        RequestPhase,
        Column(
            pa.string(),
            f"{RequestPhase.START} (the request) | {RequestPhase.ATTEMPT} (one HTTP attempt) | "
            f"{RequestPhase.END} (the outcome)",
        ),
    ] = Field(strict=False)
    item_id: Annotated[str | None, Column(pa.string(), "the item the call was made for")] = None
    trial: Annotated[_Count, Column(pa.int32(), "the item's trial")] = None
    scorer: Annotated[
        str | None, Column(pa.string(), "the scorer, for judging calls; null for generation")
    ] = None
    kind: Annotated[SpendKind | None, Column(pa.string(), words(SpendKind))] = Field(
        default=None, strict=False
    )
    attempt: Annotated[
        int | None, Field(ge=1), Column(pa.int32(), "attempt number, from 1 (attempt records)")
    ] = None
    model: Annotated[str | None, Column(pa.string(), "the model asked (start) or that answered (end)")] = None
    http_status: Annotated[
        int | None,
        Field(ge=100, le=599),
        Column(pa.int32(), "the attempt's HTTP status; null when no reply came"),
    ] = None
    started_at: Annotated[str | None, Column(TIMESTAMP, "when the record was made (UTC)")] = None
    wire_ms: Annotated[_Millis, Column(pa.float64(), "the attempt's time on the wire")] = None
    retry_ms: Annotated[
        _Millis, Column(pa.float64(), "time in failed attempts and backoff (end records)")
    ] = None
    total_ms: Annotated[
        _Millis, Column(pa.float64(), "the call's whole time, retries included (end records)")
    ] = None
    first_token_ms: Annotated[
        _Millis,
        Column(
            pa.float64(),
            "streamed calls: from sending the attempt that succeeded to its first answer token (end records)",
        ),
    ] = None
    tokens_input: Annotated[_Count, Column(pa.int64(), "input tokens (end records)")] = None
    tokens_output: Annotated[_Count, Column(pa.int64(), "output tokens (end records)")] = None
    cost_usd: Annotated[
        float | None,
        Field(ge=0, allow_inf_nan=False),
        Column(pa.float64(), "measured cost (end records); null when unpriced"),
    ] = None
    outcome: Annotated[
        RequestOutcome | None,
        Column(pa.string(), f"{words(RequestOutcome)} ({RequestPhase.END} records)"),
    ] = Field(default=None, strict=False)
    finish_reason: Annotated[
        FinishReason | None,
        Column(
            pa.string(),
            f"why the model stopped: {words(FinishReason)} ({RequestPhase.END} records of answered calls)",
        ),
    ] = Field(default=None, strict=False)
    finish_reason_raw: Annotated[
        str | None, Column(pa.string(), "the provider's own word for it (end records)")
    ] = None
    error: Annotated[str | None, Column(pa.string(), "the attempt's or the call's error, redacted")] = None
    request: Annotated[
        JsonValue, Column(pa.string(), "the request body (JSON text, redacted; start records)")
    ] = None
    response: Annotated[
        JsonValue, Column(pa.string(), "the response body (JSON text, redacted; attempt records)")
    ] = None
    truncated: Annotated[bool, Column(pa.bool_(), "bodies were cut to fit max_record_bytes")] = False
    bytes: Annotated[_Count, Column(pa.int64(), "the record's size as JSON, counted against the limits")] = (
        None
    )


REQUESTS = schema_of(RequestColumns)
