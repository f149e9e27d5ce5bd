"""A column, a dataset's schema made from its row type, and the columns several datasets share.

A row type's key is annotated `Annotated[<Python type>, Column(<Arrow type>, "<meaning>")]`:
type checkers and IDEs read the Python type, `schema_of` the rest. The shared columns below are
type aliases of that form, imported by the datasets that store them.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, NotRequired, Required, TypeAlias, get_args, get_origin, get_type_hints

import pyarrow as pa

from assay.outcomes import Completeness, FailureKind, FinishReason

TIMESTAMP = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True, slots=True)
class Column:
    """How a key of a row type is stored.

    Args:
        type: its Arrow type in the Parquet files.
        description: what it holds, as docs/schema.md says it (`docs/update_schema.py`).
    """

    type: pa.DataType
    description: str


def column_of(annotation: Any) -> Column | None:
    """The `Column` an annotation carries (through `Required` / `NotRequired`), if any."""
    while get_origin(annotation) in (Required, NotRequired):
        (annotation,) = get_args(annotation)
    return _column_in(getattr(annotation, "__metadata__", ()))


def _column_in(metadata: Iterable[object]) -> Column | None:
    return next((meta for meta in metadata if isinstance(meta, Column)), None)


def schema_of(row: type, *, besides: tuple[str, ...] = ()) -> pa.Schema:
    """The Parquet schema of a row type: one field per key, in its order, of its `Column`.

    Args:
        row: a TypedDict, or a pydantic model (its fields' metadata hold the `Column`).
        besides: keys that are no stored column (the partition key a read adds).

    Raises:
        TypeError: a key without a `Column` that `besides` does not name.
    """
    fields = getattr(row, "model_fields", None)
    if fields is not None:  # pydantic keeps an Annotated's metadata on the field
        found = {name: _column_in(info.metadata) for name, info in fields.items()}
    else:
        found = {name: column_of(hint) for name, hint in get_type_hints(row, include_extras=True).items()}
    columns = []
    for name, column in found.items():
        if column is None:
            if name not in besides:
                raise TypeError(f"{row.__name__}.{name} has no Column: how is it stored?")
            continue
        columns.append(pa.field(name, column.type, metadata={"description": column.description}))
    return pa.schema(columns)


def words(enum: type[StrEnum], *leave_out: StrEnum) -> str:
    """An enum's values as a column's description lists them: `a | b | c`."""
    return " | ".join(member.value for member in enum if member not in leave_out)


# -- tokens: one column per `TokenKind` (tests/house/test_vocabulary.py checks that every kind has one) --

TokensInput: TypeAlias = Annotated[
    int | None,
    Column(
        pa.int64(),
        "input (prompt) tokens, as the provider reported them: all input, cache reads and writes included",
    ),
]
TokensOutput: TypeAlias = Annotated[int | None, Column(pa.int64(), "output (completion) tokens")]
TokensReasoning: TypeAlias = Annotated[
    int | None, Column(pa.int64(), "reasoning tokens, where the provider reports them")
]
TokensCached: TypeAlias = Annotated[
    int | None,
    Column(pa.int64(), "input tokens read from the provider's prompt cache (part of input), where reported"),
]
TokensCacheWrite: TypeAlias = Annotated[
    int | None,
    Column(pa.int64(), "input tokens written to the provider's prompt cache (part of input), where reported"),
]

# -- why the model stopped (items, turns) -----------------------------------------------------------

NOT_ANSWERS = f"{FailureKind.REFUSAL}, {FailureKind.LENGTH}, {FailureKind.UNASKED_TOOL_CALL}"
FinishReasonColumn: TypeAlias = Annotated[
    str | None,
    Column(
        pa.string(),
        f"why the model stopped, one word over providers: {words(FinishReason)}; null when no "
        "model replied or it said nothing (a python target, a failed call). A refusal, a cut and an "
        f"unasked tool call are not answers: the item failed ({NOT_ANSWERS})",
    ),
]
FinishReasonRaw: TypeAlias = Annotated[
    str | None,
    Column(pa.string(), "the provider's own word for it (OpenAI `finish_reason`, Anthropic `stop_reason`)"),
]
FailureKindColumn: TypeAlias = Annotated[
    str | None, Column(pa.string(), f"{words(FailureKind)}; null unless failed")
]

# -- accounting (items, runs): spend by `SpendKind`, completeness, operations ------------------------

CostGenerationUsd: TypeAlias = Annotated[
    float | None, Column(pa.float64(), "measured spend on generation (target) calls")
]
CostJudgingUsd: TypeAlias = Annotated[
    float | None, Column(pa.float64(), "measured spend on judging (model-graded scorer) calls")
]
CostExternalUsd: TypeAlias = Annotated[float | None, Column(pa.float64(), "measured spend on other calls")]
CostCompleteness: TypeAlias = Annotated[
    str | None, Column(pa.string(), f"{words(Completeness)}: how far cost_usd can be trusted")
]
CostReasons: TypeAlias = Annotated[
    str | None, Column(pa.string(), 'why incomplete, with counts (JSON text, e.g. {"unpriced": 3})')
]
Operations: TypeAlias = Annotated[
    int | None,
    Column(pa.int64(), "model calls attempted (each HTTP attempt, denied and refused calls included)"),
]
OperationsSettled: TypeAlias = Annotated[
    int | None, Column(pa.int64(), "calls that got an answer (success or error status)")
]
OperationsUnknown: TypeAlias = Annotated[
    int | None, Column(pa.int64(), "calls whose fate is unknown (timeouts, dropped connections)")
]
OperationsDenied: TypeAlias = Annotated[
    int | None, Column(pa.int64(), "calls the budget refused before they were sent")
]
OperationsCached: TypeAlias = Annotated[
    int | None, Column(pa.int64(), "calls answered by the response cache (free)")
]
OperationsBatched: TypeAlias = Annotated[
    int | None, Column(pa.int64(), "calls made through a provider's batch API (batch prices)")
]
OperationsByKind: TypeAlias = Annotated[
    str | None,
    Column(pa.string(), 'calls by spend kind (JSON text, e.g. {"generation": 1, "judging": 2})'),
]
