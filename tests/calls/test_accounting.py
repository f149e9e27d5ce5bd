"""Accounting and budgets against the mock model server: exact figures, honest gaps, hard stops."""

from __future__ import annotations

import json

import polars as pl
import pytest

from assay.calls.accounting import Accounting, PriceTable, Usage, parse_budget
from assay.cli import main
from assay.errors import SpecError
from assay.outcomes import SpendKind
from assay.store import Store
from tests.conftest import mock_target, openai_spec
from tests.helpers.cli import assay_json

PRICES = {"mock-1": {"input": 10.0, "output": 30.0}}


def test_exact_cost_from_the_price_table(tmp_path, mock, capsys):
    spec = openai_spec(tmp_path, mock.base_url, n=5, prices=PRICES)
    summary = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    items = Store(tmp_path / "s").run_items(summary["run_id"])
    expected = [
        (i * 10.0 + o * 30.0) / 1e6
        for i, o in zip(items["tokens_input"], items["tokens_output"], strict=True)
    ]
    assert items["cost_usd"].to_list() == pytest.approx(expected, rel=1e-12)
    assert items["cost_generation_usd"].to_list() == pytest.approx(expected, rel=1e-12)
    assert set(items["cost_completeness"]) == {"complete"} and items["cost_reasons"].null_count() == 5
    assert items["operations"].to_list() == [1] * 5
    record = Store(tmp_path / "s").read_run(summary["run_id"])
    assert record["cost_usd"] == pytest.approx(sum(expected), rel=1e-12)
    assert record["cost_completeness"] == "complete"
    assert record["tokens_input"] == items["tokens_input"].sum()
    assert summary["cost"]["usd"] == pytest.approx(sum(expected), rel=1e-12)


def test_an_unpriced_model_is_incomplete_never_free(tmp_path, mock, capsys):
    spec = openai_spec(tmp_path, mock.base_url, n=3)  # mock-1 is not in the shipped table
    summary = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    record = Store(tmp_path / "s").read_run(summary["run_id"])
    assert record["cost_completeness"] == "incomplete"
    assert json.loads(record["cost_reasons"]) == {"unpriced": 3}
    assert summary["cost"]["completeness"] == "incomplete"


def test_a_lost_call_is_an_unknown_operation(tmp_path, mock, capsys):
    mock.configure(faults=[{"delay_ms": 2000, "times": 1, "match": "What is 0 + 0?"}])
    spec = openai_spec(
        tmp_path,
        mock.base_url,
        n=2,
        prices=PRICES,
        target=mock_target(mock.base_url, timeout=0.3, max_retries=0),
        fail_on_item_error_rate=1,
    )
    summary = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    lost = Store(tmp_path / "s").run_items(summary["run_id"]).filter(pl.col("item_id") == "q0").to_dicts()[0]
    assert lost["outcome"] == "failed" and lost["operations_unknown"] == 1
    assert lost["cost_completeness"] == "incomplete" and json.loads(lost["cost_reasons"]) == {
        "unknown_outcome": 1
    }


def test_budget_stops_admission_at_a_deterministic_point(tmp_path, mock, capsys):
    # Each call: 5 input and 5 output tokens -> (5*10 + 5*30) / 1e6 = $0.0002.
    spec = openai_spec(tmp_path, mock.base_url, n=10, prices=PRICES, budget="$0.0007", concurrency=1)
    summary = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    items = Store(tmp_path / "s").run_items(summary["run_id"]).sort("item_index")
    assert items["outcome"].to_list() == ["completed"] * 4 + ["budget_skipped"] * 6
    assert mock.stats()["requests"] == 4
    # A skipped item never started: no start time, no timing; its error says why (docs/schema.md).
    skipped = items.filter(pl.col("outcome") == "budget_skipped")
    assert skipped["started_at"].null_count() == 6 and skipped["duration_ms"].null_count() == 6
    assert set(skipped["error"]) == {"budget reached"} and skipped["failure_kind"].null_count() == 6
    assert items.filter(pl.col("outcome") == "completed")["started_at"].null_count() == 0
    record = Store(tmp_path / "s").read_run(summary["run_id"])
    assert record["budget_status"] == "closed" and record["budget_closed_by"] == "case"
    assert record["budget_limit_usd"] == 0.0007 and record["budget_spent_usd"] == pytest.approx(0.0008)
    assert record["n_budget_skipped"] == 6
    assert summary["item_error_rate"] == 0.0, "budget-stopped items are not attempted"
    assert Store(tmp_path / "s").run_scores(summary["run_id"]).filter(pl.col("item_id") == "q9").height == 0


def test_a_call_waiting_to_retry_is_interrupted_by_the_budget(tmp_path, mock, capsys):
    # q0's refusal waits for q1's answer (which closes the budget): q1 is sent before the refusal
    # pauses the endpoint, and is measured long before q0's retry asks to be admitted.
    refusal = {"status": 429, "retry_after": 1, "match": "What is 0 + 0?", "after": "What is 1 + 1?"}
    mock.configure(faults=[refusal])
    spec = openai_spec(tmp_path, mock.base_url, n=4, prices=PRICES, budget="$0.0001", concurrency=2)
    summary = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    items = Store(tmp_path / "s").run_items(summary["run_id"])
    outcomes = dict(items.select("item_id", "outcome").iter_rows())
    assert outcomes["q0"] == "budget_interrupted", outcomes
    assert outcomes["q1"] == "completed"
    assert {outcomes["q2"], outcomes["q3"]} == {"budget_skipped"}
    interrupted = items.filter(pl.col("item_id") == "q0").to_dicts()[0]
    assert interrupted["operations_denied"] == 1 and interrupted["cost_usd"] == 0


def test_bad_budget_is_exit_2_with_the_message(tmp_path, mock, capsys):
    spec = openai_spec(tmp_path, mock.base_url, n=2, budget="five dollars")
    assert main(["run", str(spec), "--store", str(tmp_path / "s")]) == 2
    assert 'Invalid budget "five dollars": expected a non-negative USD amount' in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("text, usd", [("$5", 5.0), ("0.50", 0.5), ("$0", 0.0), (3, 3.0)])
def test_parse_budget(text, usd):
    assert parse_budget(text) == usd


@pytest.mark.parametrize("text", ["-1", "$-1", "5$", "1e3", "", "abc", True])
def test_parse_budget_refuses(text):
    with pytest.raises(SpecError, match="expected a non-negative USD amount"):
        parse_budget(text)


def test_cached_tokens_are_priced_at_the_cached_rate():
    table = PriceTable.shipped()
    cost = table.cost(
        "gpt-4o-mini-2024-07-18", Usage(input_tokens=1_000_000, output_tokens=0, cached_tokens=400_000)
    )
    assert cost == pytest.approx(0.6 * 0.15 + 0.4 * 0.075)
    assert table.cost("no-such-model", Usage(input_tokens=1, output_tokens=1)) is None


def test_totals_take_the_worst_completeness():
    priced = Accounting.of_call(
        SpendKind.GENERATION, "gpt-4o-mini-2024-07-18", Usage(100, 10), PriceTable.shipped()
    )
    total = Accounting.total(
        [priced, Accounting.uninstrumented(), Accounting.of_lost_call(SpendKind.JUDGING)]
    )
    assert total.completeness == "incomplete"
    assert total.reasons == {"uninstrumented": 1, "unknown_outcome": 1}
    assert total.known_cost == priced.known_cost and total.operations == 2 and total.unknown == 1
    assert total.by_kind == {"generation": 1, "judging": 1}
