"""The rows an item becomes: typed as the store's columns, and a key that is no column refused."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from assay import _schema
from assay.calls.accounting import Accounting, Usage
from assay.errors import StoreError, TargetFailure
from assay.evaluators import ScoreRecord
from assay.outcomes import FailureKind, ItemOutcome, ScorerOutcome
from assay.run.rows import (
    ITEMS,
    NO_SPEND,
    SCORES,
    TURNS,
    completed_row,
    failed_row,
    score_row,
    skipped_row,
    stopped_row,
)
from assay.spec.dataset import Item
from assay.targets import TargetResult

ITEM = Item(item_id="i1", item_index=0, input="What is 2 + 2?", expected="4", annotations={"topic": "sums"})
NOW = datetime.now(UTC)


def test_every_item_row_builder_makes_a_table_of_items() -> None:
    result = TargetResult(
        output="4", model="mock-1", usage=Usage(input_tokens=7, output_tokens=1), wire_ms=3.0
    )
    failure = TargetFailure("HTTP 500", kind=FailureKind.HTTP, provider="openai:127.0.0.1", http_status=500)
    rows = [
        {**completed_row(ITEM, 0, NOW, 12.5, result), **Accounting().columns(), "queued_ms": 0.1},
        failed_row(ITEM, 1, NOW, time.perf_counter(), failure),
        stopped_row(ITEM, 2, NOW, ItemOutcome.BUDGET_INTERRUPTED, "budget reached"),
        skipped_row(ITEM, 3),
    ]
    table = ITEMS.table(rows)
    assert table.schema.equals(_schema.ITEMS, check_metadata=True)  # the columns' descriptions too
    assert table.column("outcome").to_pylist() == [
        "completed",
        "failed",
        "budget_interrupted",
        "budget_skipped",
    ]
    assert table.column("tokens_input").to_pylist() == [7, None, None, None]
    assert table.column("failure_http_status").to_pylist() == [None, 500, None, None]


def test_a_misspelt_key_is_refused_naming_it_and_the_dataset() -> None:
    row = completed_row(ITEM, 0, NOW, 12.5, TargetResult(output="4"))
    misspelt = {**row, "outcme": "completed"}
    with pytest.raises(StoreError, match="no column of items is named outcme"):
        ITEMS.table([row, misspelt])

    record = ScoreRecord("exact", "exact_match", "1", 1.0, ScorerOutcome.SCORED, None, 0.2)
    score = score_row(ITEM, 0, record, NO_SPEND, None)
    assert SCORES.table([score]).column("score").to_pylist() == [1.0]
    with pytest.raises(StoreError, match="no column of scores is named scorer_name"):
        SCORES.table([{**score, "scorer_name": "exact"}])
    with pytest.raises(StoreError, match="no column of turns is named prompts"):
        TURNS.table([{"item_id": "i1", "prompts": "[]"}])
