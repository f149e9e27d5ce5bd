"""The rows an executed item becomes, built from typed inputs, and the tables they are committed as.

    Finished        one item's rows: its item row, score rows, request records, turns, gauges
    completed_row / failed_row / stopped_row / skipped_row     an `items` row, by how the item ended
    score_row       a `scores` row of kind `score`;  gauge_values: what become `kind = gauge` rows
    Dataset.table   rows as a table of their dataset's schema; a key that is no column raises

The row types (`ItemRow`, `ScoreRow`, `TurnRow`) are defined with their columns in `assay._schema`
(`TurnRow`s are built where turns are, in `assay.run.attempts`). At run time a row is a plain
dict — this is the hot path — and a column a row leaves out is a null.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

import pyarrow as pa

from assay import _schema
from assay._schema import ItemRow, ScoreRow, TurnRow
from assay.calls.accounting import Accounting, Usage, token_columns
from assay.calls.capture import Scope
from assay.calls.messages import ToolCall
from assay.errors import StoreError, TargetFailure
from assay.evaluators import ScoreRecord
from assay.outcomes import Completeness, Gauge, ItemOutcome, RowKind, ScorerOutcome, token_column
from assay.spec.dataset import Item
from assay.targets import TargetResult


class Finished(NamedTuple):
    """One item's rows: its item row, its score rows, its captured request records, for a
    managed session (`assay.run.sessions`) its turns, and its gauges as (name, value) pairs (made
    into `kind = gauge` rows at commit, column by column: there is one per item per gauge)."""

    item: ItemRow
    scores: list[ScoreRow]
    requests: list[dict[str, Any]]
    turns: list[TurnRow] | tuple[()] = ()
    gauges: list[tuple[str, float]] | tuple[()] = ()


# -- tables ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Dataset:
    """One dataset of the store: its name and its schema (`assay/_schema.py`).

    Args:
        name: the dataset's name (`items`, `scores`, …), as an error names it.
        schema: its Parquet schema.
    """

    name: str
    schema: pa.Schema
    _columns: frozenset[str] = field(init=False)
    _struct: pa.StructType = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_columns", frozenset(self.schema.names))
        object.__setattr__(self, "_struct", pa.struct(list(self.schema)))

    def table(self, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
        """The rows as a table of the schema, a key a row leaves out a null.

        Raises:
            StoreError: a row has a key that is no column (a misspelt name would otherwise be
                a silent null).
        """
        keys = set().union(*rows)
        if not keys <= self._columns:
            raise StoreError(f"no column of {self.name} is named {', '.join(sorted(keys - self._columns))}")
        # The rows converted by Arrow as structs, in one call: ~30 % less time than a list per
        # column or `Table.from_pylist` (1.8 against 2.6 ms for 500 item rows), on the commit
        # thread, which holds the GIL the loop running items needs.
        return pa.Table.from_struct_array(pa.array(rows, type=self._struct))


ITEMS = Dataset("items", _schema.ITEMS)
SCORES = Dataset("scores", _schema.SCORES)
TURNS = Dataset("turns", _schema.TURNS)
REQUESTS = Dataset("requests", _schema.REQUESTS)


def requests_table(records: list[dict[str, Any]]) -> pa.Table:
    """Captured request records as a table of `requests`, their bodies as JSON text."""
    rows = [
        {**r, "request": to_json(r.get("request")), "response": to_json(r.get("response"))} for r in records
    ]
    return REQUESTS.table(rows)


# One encoder for every row: `json.dumps` with options builds a new one on each call (~1.4 us,
# several times an item).
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


# An empty dict or list (an item without annotations) is common and costs the encoder most.
_EMPTY_JSON = {dict: "{}", list: "[]"}


def to_json(value: Any) -> str | None:
    """A value as a row's JSON text column holds it (None stays null)."""
    if value is None:
        return None
    if not value and type(value) in _EMPTY_JSON:
        return _EMPTY_JSON[type(value)]
    return _ENCODER.encode(value)


def captured(scopes: list[Scope | None]) -> tuple[list[str] | None, list[dict[str, Any]]]:
    """The operation ids and request records of capture scopes (None when none had any scope)."""
    present = [scope for scope in scopes if scope is not None]
    if not present:
        return None, []
    return [i for scope in present for i in scope.operation_ids], [
        r for scope in present for r in scope.records
    ]


# -- item rows ---------------------------------------------------------------------------------


def _item_columns(item: Item, trial: int, started_at: datetime | None) -> ItemRow:
    return {
        "item_id": item.item_id,
        "item_index": item.item_index,
        "trial": trial,
        "input": to_json(item.input),
        "expected": to_json(item.expected),
        "annotations": to_json(item.annotations),
        "started_at": started_at,
    }


_COMPLETED = ItemOutcome.COMPLETED.value


def completed_row(
    item: Item, trial: int, started_at: datetime, duration_ms: float, result: TargetResult
) -> ItemRow:
    """The row of an item the target answered (spend and queueing are added by the caller).

    Args:
        item: the item.
        trial: its trial.
        started_at: when it started.
        duration_ms: the target call's wall time.
        result: what the target returned.
    """
    output = result.output
    return {
        **_item_columns(item, trial, started_at),
        "output": to_json(output),
        "output_text": output if isinstance(output, str) else to_json(output),
        "tool_calls": None if result.calls is None else tool_call_columns(result.calls),
        "tool_call_text": result.tool_call_text,
        "reasoning": result.reasoning,
        "outcome": _COMPLETED,
        "finish_reason": result.finish_reason,
        "finish_reason_raw": result.finish_reason_raw,
        "model": result.model,
        "duration_ms": duration_ms,
        "wire_ms": result.wire_ms,
        "first_token_ms": result.first_token_ms,
        "retry_ms": result.retry_ms,
        "retries": result.retries,
        **token_columns(result.usage),
        "caller_cost_usd": result.caller_cost,
        "caller_metadata": to_json(result.caller_metadata),
        "caller_reserved": to_json(result.caller_reserved),
        "artifacts": result.artifacts,
        "sandbox": to_json(result.sandbox),
    }


def tool_call_columns(calls: list[ToolCall]) -> list[dict[str, str | None]]:
    """Tool calls as `items.tool_calls` holds them: their arguments as JSON text."""
    return [{"id": call.id, "name": call.name, "arguments": to_json(call.arguments)} for call in calls]


def stored_tool_calls(column: list[dict[str, Any]] | None) -> list[ToolCall] | None:
    """`items.tool_calls` read back as the calls a scorer sees (`Sample.tool_calls`)."""
    if column is None:
        return None
    return [
        ToolCall(
            id=call["id"],
            name=call["name"],
            arguments=None if call["arguments"] is None else json.loads(call["arguments"]),
        )
        for call in column
    ]


def failed_row(
    item: Item, trial: int, started_at: datetime, started: float, failure: TargetFailure
) -> ItemRow:
    """The row of an item whose target call failed for good. A reply that was no answer (a
    refusal, a cut, an unasked tool call) keeps how it ended and what the model sent instead
    (`output`), as evidence: a failed row is never scored.

    Args:
        item: the item.
        trial: its trial.
        started_at: when it started.
        started: when it started, on `time.perf_counter` (its duration runs until now).
        failure: the failure's description.
    """
    return {
        **_item_columns(item, trial, started_at),
        "outcome": ItemOutcome.FAILED.value,
        "error": failure.message,
        "failure_kind": str(failure.kind),
        "failure_provider": failure.provider,
        "failure_http_status": failure.http_status,
        "failure_retryable": failure.retryable,
        "failure_request_id": failure.request_id,
        "finish_reason": failure.finish_reason,
        "finish_reason_raw": failure.finish_reason_raw,
        "output": to_json(failure.sent),
        "output_text": failure.sent if isinstance(failure.sent, str) else to_json(failure.sent),
        "tool_calls": tool_call_columns(failure.calls) if failure.calls else None,
        # A reply that was no answer was still a reply: its tokens are known (and billed).
        **(token_columns(failure.usage) if isinstance(failure.usage, Usage) else {}),
        "retries": failure.retries,
        "duration_ms": (time.perf_counter() - started) * 1000,
        # What a failed attempt kept (a sandbox's transcript) is evidence too.
        "artifacts": failure.artifacts,
        "sandbox": to_json(failure.sandbox),
    }


def stopped_row(item: Item, trial: int, started_at: datetime, outcome: ItemOutcome, why: str) -> ItemRow:
    """The row of an item stopped once started (`budget_interrupted`), with no spend."""
    return {
        **_item_columns(item, trial, started_at),
        "outcome": outcome.value,
        "error": why,
        **Accounting().columns(),
    }


BUDGET_REACHED = "budget reached"


def skipped_row(item: Item, trial: int) -> ItemRow:
    """An item the closed budget kept from starting: no start time, no timing, no spend."""
    return {
        **_item_columns(item, trial, None),
        "outcome": ItemOutcome.BUDGET_SKIPPED.value,
        "error": BUDGET_REACHED,
        **Accounting().columns(),
    }


# -- score rows --------------------------------------------------------------------------------

NO_SPEND = Accounting()


def _spend_columns(spend: Accounting) -> dict[str, Any]:
    return {
        **{token_column(kind): n for kind, n in spend.tokens.items()},
        "cost_usd": spend.known_cost,
        "cost_completeness": spend.completeness.value,
        "cost_reasons": json.dumps(spend.reasons, sort_keys=True) if spend.reasons else None,
        "operations": spend.operations,
    }


_NO_SPEND_COLUMNS = _spend_columns(NO_SPEND)


_GAUGE, _SCORE = RowKind.GAUGE.value, RowKind.SCORE.value
_OUTCOMES = {outcome: outcome.value for outcome in ScorerOutcome}


def score_row(
    item: Item, trial: int, record: ScoreRecord, spend: Accounting, scope: Scope | None
) -> ScoreRow:
    """A scorer's row for one item.

    Args:
        item: the scored item.
        trial: its trial.
        record: what the scorer recorded.
        spend: its judging spend (`NO_SPEND` for none).
        scope: the capture scope of its model calls, if it may have made some.
    """
    gauge = record.outcome is ScorerOutcome.MEASURED
    return {
        "operation_ids": scope.operation_ids if scope is not None else None,
        "model": record.metadata.get("model") if record.metadata else None,
        **(_NO_SPEND_COLUMNS if spend is NO_SPEND else _spend_columns(spend)),
        "item_id": item.item_id,
        "item_index": item.item_index,
        "trial": trial,
        # A remote evaluator's gauge is a measurement: a gauge row, never read as a score.
        "kind": _GAUGE if gauge else _SCORE,
        "scorer": record.scorer,
        "scorer_kind": _GAUGE if gauge else record.scorer_kind,
        "scorer_version": record.scorer_version,
        "score": None if gauge else record.score,
        "value": record.score,
        "outcome": _OUTCOMES.get(record.outcome) or str(record.outcome),
        "error": record.error,
        "duration_ms": record.duration_ms,
        "explanation": record.explanation,
        "label": record.label,
        "judge_variance": record.judge_variance,
        "judge_samples": record.judge_samples,
        "metadata": to_json(record.metadata),
    }


# -- gauges ------------------------------------------------------------------------------------

# Bump when what a gauge measures changes, so a compare across versions can tell.
GAUGE_VERSION = "1"


# The gauges' names as plain strings (an enum's `.value` is a property: this runs every item).
_DURATION_MS, _STEPS, _TOOL_CALLS, _TOKENS_INPUT, _TOKENS_OUTPUT, _COST_USD = (
    gauge.value
    for gauge in (
        Gauge.DURATION_MS,
        Gauge.STEPS,
        Gauge.TOOL_CALLS,
        Gauge.TOKENS_INPUT,
        Gauge.TOKENS_OUTPUT,
        Gauge.COST_USD,
    )
)


def gauge_values(item_row: ItemRow, result: TargetResult, generation: Accounting) -> list[tuple[str, float]]:
    """The gauges of a completed item, as (name, value): one per gauge whose value is known
    (unknown is no row, never 0). Tokens and cost are measured figures only: an uninstrumented
    target (python, http_agent) reports none, and a cost counts only when its accounting is
    complete (an unpriced model's $0 is not a cost)."""
    values = (
        (_DURATION_MS, item_row["duration_ms"]),
        (_STEPS, result.steps),
        (_TOOL_CALLS, result.tool_calls),
        (_TOKENS_INPUT, item_row["tokens_input"]),
        (_TOKENS_OUTPUT, item_row["tokens_output"]),
        (_COST_USD, generation.known_cost if generation.completeness is Completeness.COMPLETE else None),
    )
    return [(gauge, float(value)) for gauge, value in values if value is not None]


def gauges_table(items: list[ItemRow], gauges: list[list[tuple[str, float]] | tuple[()]]) -> pa.Table:
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
