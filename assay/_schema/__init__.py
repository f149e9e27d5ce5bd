"""The Parquet schemas of the store: one row type per dataset, each column with its meaning.

A dataset's row type is its one definition: each key is annotated with its Python type (what
type checkers and IDEs read) and a `Column` (its Arrow type and meaning), and the dataset's
`pa.Schema` is made from it (`schema_of`). The writer casts to the schemas, `docs/schema.md`
documents them (`docs/update_schema.py`) and a test checks that the two agree. JSON text columns
hold `json.dumps` of the value.

    RUNS          RunRecord          one row per run and revision              _runs.py
    ITEMS         ItemRow            one row per item x trial (and retry)      _items.py
    SCORES        ScoreRow           one row per item x trial x scorer, gauge  _scores.py
    REQUESTS      RequestColumns     one row per captured call record          _requests.py
    TURNS         TurnRow            one row per prompt of a managed session   _turns.py
    BATCHES       BatchRow           batch mode's ledger                       _batches.py
    COMPARISONS   ComparisonRow      one row per scorer compared               _comparisons.py
    LEADERBOARDS  LeaderboardRow     one row per cell x scorer                 _leaderboards.py
    LABELS        LabelRow           one row per human label and revision      _labels.py

The columns several datasets share (tokens, accounting, why the model stopped) are defined once
in `_columns.py` and imported by the datasets that store them. `RequestColumns` is a pydantic
model, as the captured records' JSONL codec validates them, and is loaded on first use (PEP 562):
reading the store needs no pydantic. The others are TypedDicts, as rows are
plain dicts on the hot path.
"""

import importlib
from typing import TYPE_CHECKING, Any

from assay._schema._batches import BATCHES, BatchRow
from assay._schema._columns import Column, schema_of
from assay._schema._comparisons import COMPARISONS, ComparisonRow, ScorerComparison
from assay._schema._items import ITEMS, ItemRow
from assay._schema._labels import LABELS, LabelRow
from assay._schema._leaderboards import LEADERBOARDS, LeaderboardRow
from assay._schema._runs import RUNS, RunRecord
from assay._schema._scores import SCORES, ScoreRow
from assay._schema._turns import TURNS, TurnRow

if TYPE_CHECKING:
    from assay._schema._requests import REQUESTS, RequestColumns

_LAZY = ("REQUESTS", "RequestColumns")


def __getattr__(name: str) -> Any:
    # Not assay._lazy: this room sits beside it, in the same layer (tests/house/test_architecture.py).
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}._requests"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BATCHES",
    "COMPARISONS",
    "ITEMS",
    "LABELS",
    "LEADERBOARDS",
    "REQUESTS",
    "RUNS",
    "SCORES",
    "TURNS",
    "BatchRow",
    "Column",
    "ComparisonRow",
    "ItemRow",
    "LabelRow",
    "LeaderboardRow",
    "RequestColumns",
    "RunRecord",
    "ScoreRow",
    "ScorerComparison",
    "TurnRow",
    "schema_of",
]
