"""Batch mode on the anthropic target, against the Message Batches API mock over real sockets:
requests gathered into batches, results mapped back by custom id, batch prices, the durable
`batches/` ledger, and a SIGKILL while batches are in flight resumed without a request
submitted twice."""

from __future__ import annotations

import json
import signal
import urllib.request
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from assay.calls.accounting import PriceTable
from assay.calls.batch import custom_id
from assay.cli import main
from assay.store import Store
from tests.conftest import (
    arithmetic_rows,
    mock_target,
    only_run_id,
    run_assay,
    start_run,
    wait_for,
    write_jsonl,
    write_spec,
)
from tests.helpers.cli import assay_run
from tests.targets.test_anthropic import MODEL, target_spec

BATCH = {"max_requests": 5, "max_wait_s": 0.2, "poll_s": 0.05}


def spec_of(folder: Path, base_url: str, n: int, **target: Any) -> Path:
    write_jsonl(folder / "data.jsonl", arithmetic_rows(n))
    return write_spec(
        folder,
        name="batched",
        dataset={"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        target=target_spec(base_url, **target),
        scorers=[{"kind": "exact_match", "name": "exact"}],
        concurrency=2,
        fail_on_item_error_rate=1,
    )


def answers(n: int) -> dict[str, str]:
    return {f"What is {i} + {i}?": str(2 * i) for i in range(n)}


def test_items_go_through_batches_at_batch_prices(tmp_path, claude, capsys):
    claude.configure(batch_delay_ms=200, answers=answers(12))
    summary, store = assay_run(capsys, spec_of(tmp_path, claude.base_url, 12, batch=BATCH), tmp_path / "s")
    stats = claude.stats()
    assert stats["requests"] == 0, "no online call"
    # 12 requests, 5 at most a batch; `concurrency: 2` does not cap what a batch gathers.
    assert stats["batch_submissions"] == 3 and sorted(stats["batch_requests"].values()) == [1] * 12

    items = store.run_items(summary["run_id"])
    assert items["outcome"].to_list() == ["completed"] * 12
    assert (items["output_text"] == items["expected"].str.strip_chars('"')).all()
    assert items["operations_batched"].to_list() == [1] * 12
    price = PriceTable.shipped().prices[MODEL]
    online = sum(PriceTable.shipped().cost(MODEL, _usage(row)) for row in items.iter_rows(named=True))
    assert items["cost_usd"].sum() == pytest.approx(online / 2) and price.batch is not None
    assert store.read_run(summary["run_id"])["operations_batched"] == 12

    batches = store.run_batches(summary["run_id"])
    assert batches.height == 3 and batches["state"].to_list() == ["ended"] * 3
    assert sorted(batches["requests"].to_list()) == [2, 5, 5]
    assert all(
        json.loads(c)["succeeded"] == n for c, n in zip(batches["request_counts"], batches["requests"])
    )
    assert summary["batches"]["ended"] == 3 and summary["batches"]["request_counts"]["succeeded"] == 12


def _usage(row: dict[str, Any]) -> Any:
    from assay.calls.accounting import Usage

    return Usage(input_tokens=row["tokens_input"], output_tokens=row["tokens_output"])


def test_a_model_without_a_batch_price_is_unpriced_in_batch_mode(tmp_path, claude, capsys):
    spec = spec_of(tmp_path, claude.base_url, 2, batch=BATCH)
    text = spec.read_text() + f"prices:\n  {MODEL}: {{input: 3, output: 15}}\n"
    spec.write_text(text)
    summary, store = assay_run(capsys, spec, tmp_path / "s")
    items = store.run_items(summary["run_id"])
    assert items["cost_completeness"].to_list() == ["incomplete"] * 2
    assert [json.loads(r) for r in items["cost_reasons"]] == [{"unpriced": 1}] * 2, (
        "never full price silently"
    )


def test_errored_and_expired_requests_fail_their_items(tmp_path, claude, capsys):
    claude.configure(expire="1 + 1", faults=[{"status": 529, "match": "2 + 2", "message": "Overloaded"}])
    summary, store = assay_run(capsys, spec_of(tmp_path, claude.base_url, 4, batch=BATCH), tmp_path / "s")
    items = store.run_items(summary["run_id"]).sort("item_index")
    assert items["outcome"].to_list() == ["completed", "failed", "failed", "completed"]
    assert items["error"][1] == "batch request expired"
    assert items["error"][2] == "batch request errored: overloaded_error: Overloaded"
    assert items["failure_provider"][2].startswith("anthropic:")
    counts = json.loads(store.run_batches(summary["run_id"])["request_counts"][0])
    assert counts == {"canceled": 0, "errored": 1, "expired": 1, "succeeded": 2}


@pytest.mark.slow
def test_sigkill_with_batches_in_flight_then_resume_submits_nothing_twice(tmp_path, claude):
    n = 15
    claude.configure(batch_delay_ms=3000, answers=answers(n))
    store = tmp_path / "s"
    spec = spec_of(tmp_path, claude.base_url, n, batch={**BATCH, "poll_s": 0.1})
    process = start_run(spec, store)
    wait_for(
        lambda: len(list((store / "batches").glob("run_id=*/*-in_progress.parquet"))) == 3,
        "3 batches were recorded in flight",
        process,
    )
    process.send_signal(signal.SIGKILL)
    process.wait()
    run_id = only_run_id(store)
    assert claude.stats()["batch_submissions"] == 3
    assert Store(store).run_items(run_id).height == 0, "killed before any batch ended"
    shown = run_assay("show", run_id, "--store", str(store))
    assert "batches: 3 (3 in progress, 0 ended) holding 15 requests" in shown.stdout, shown.stdout

    resumed = run_assay("resume", run_id, "--store", str(store), "--json")
    assert resumed.returncode == 0, resumed.stderr
    stats = claude.stats()
    assert stats["batch_submissions"] == 3, "re-attached to the 3 batches, none submitted again"
    assert sorted(stats["batch_requests"].values()) == [1] * n, "0 requests submitted twice"
    items = Store(store).run_items(run_id)
    assert items.height == n and items["outcome"].to_list() == ["completed"] * n
    batches = Store(store).run_batches(run_id)
    assert batches["state"].to_list() == ["ended"] * 3 and batches.filter(pl.col("requests") > 0).height == 3
    shown = run_assay("show", run_id, "--store", str(store))
    assert "batches: 3 (0 in progress, 3 ended) holding 15 requests: 15 succeeded" in shown.stdout, (
        shown.stdout
    )


@pytest.mark.slow
def test_a_request_that_expired_while_the_run_was_down_is_submitted_again_once(tmp_path, claude):
    claude.configure(batch_delay_ms=1500, answers=answers(6), expire="3 + 3")
    store = tmp_path / "s"
    process = start_run(spec_of(tmp_path, claude.base_url, 6, batch=BATCH), store)
    wait_for(
        lambda: len(list((store / "batches").glob("run_id=*/*-in_progress.parquet"))) == 2,
        "2 batches were recorded in flight",
        process,
    )
    process.send_signal(signal.SIGKILL)
    process.wait()
    run_id = only_run_id(store)
    # While the run is down its batches end, q3's request expired; then the provider recovers.
    for batch_id in Store(store).run_batches(run_id)["batch_id"]:
        wait_for(lambda b=batch_id: _ended(claude.base_url, b), f"batch {batch_id} ended")
    claude.configure(expire=None)

    resumed = run_assay("resume", run_id, "--store", str(store), "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert "ended without an answer to request" in resumed.stderr and "(expired)" in resumed.stderr
    submitted = claude.stats()["batch_requests"]
    assert submitted.pop(custom_id("q3", 0)) == 2, "the expired request, submitted once more"
    assert sorted(submitted.values()) == [1] * 5, "every other request exactly once"
    assert Store(store).run_items(run_id)["outcome"].to_list() == ["completed"] * 6


def _ended(base_url: str, batch_id: str) -> bool:
    with urllib.request.urlopen(f"{base_url}/messages/batches/{batch_id}") as reply:
        return json.load(reply)["processing_status"] == "ended"


def test_budget_counts_a_submitted_request_at_its_maximum_cost_until_its_result(tmp_path, claude, capsys):
    # Each request's maximum at Sonnet 4.5's batch prices: ~150 bytes in at $1.50/M and 64
    # tokens out at $7.50/M, ~$0.0007; its real cost is ~$0.00005. A $0.002 budget admits
    # requests while their maxima fit; counted at their real cost it would admit all 8.
    claude.configure(batch_delay_ms=300)
    spec = spec_of(tmp_path, claude.base_url, 8, batch=BATCH)
    spec.write_text(spec.read_text() + "budget: '$0.002'\n")
    summary, store = assay_run(capsys, spec, tmp_path / "s")
    submitted = sum(claude.stats()["batch_requests"].values())
    held, admitted = 0.0, 0
    for i in range(8):  # items start in order; each is admitted while what is held fits
        if held >= 0.002:
            break
        body = {
            "model": MODEL,
            "max_tokens": 64,
            "messages": [{"role": "user", "content": f"What is {i} + {i}?"}],
        }
        held += (len(json.dumps(body).encode()) * 1.5 + 64 * 7.5) / 1e6
        admitted += 1
    assert submitted == admitted < 8, (submitted, admitted)
    outcomes = store.run_items(summary["run_id"])["outcome"].value_counts().sort("outcome").rows()
    assert dict(outcomes)["completed"] == submitted
    assert set(dict(outcomes)) <= {"completed", "budget_skipped", "budget_interrupted"}
    record = store.read_run(summary["run_id"])
    assert record["budget_spent_usd"] < 0.002 and record["budget_status"] == "open"


def test_the_estimate_shows_batch_and_online_cost(tmp_path, claude, capsys):
    spec = spec_of(tmp_path, claude.base_url, 10, batch=BATCH)
    assert main(["estimate", str(spec), "--store", str(tmp_path / "s"), "--json"]) == 0
    (line,) = json.loads(capsys.readouterr().out)["lines"]
    assert line["cost_usd_expected"] == pytest.approx(line["cost_usd_expected_online"] / 2)
    assert "batch prices (online $" in line["note"]
    assert claude.stats()["batch_submissions"] == 0, "estimating spends nothing"


# -- OpenAI's Batch API -------------------------------------------------------------------------

GPT = "gpt-4o-mini-2024-07-18"


def openai_spec(folder: Path, base_url: str, n: int, **target: Any) -> Path:
    write_jsonl(folder / "data.jsonl", arithmetic_rows(n))
    return write_spec(
        folder,
        name="batched-openai",
        dataset={"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        target=mock_target(base_url, model=GPT, max_tokens=16, **target),
        scorers=[{"kind": "exact_match", "name": "exact"}],
        concurrency=2,
        fail_on_item_error_rate=1,
    )


def test_openai_items_go_through_the_batch_api_at_batch_prices(tmp_path, mock, capsys):
    mock.configure(batch_delay_ms=200, answers=answers(12))
    summary, store = assay_run(capsys, openai_spec(tmp_path, mock.base_url, 12, batch=BATCH), tmp_path / "s")
    stats = mock.batch_stats()
    assert stats["batch_submissions"] == 3 and sorted(stats["batch_requests"].values()) == [1] * 12
    items = store.run_items(summary["run_id"])
    assert items["outcome"].to_list() == ["completed"] * 12 and items["operations_batched"].sum() == 12
    assert (items["output_text"] == items["expected"].str.strip_chars('"')).all()
    online = sum(PriceTable.shipped().cost(GPT, _usage(row)) for row in items.iter_rows(named=True))
    assert items["cost_usd"].sum() == pytest.approx(online / 2)
    batches = store.run_batches(summary["run_id"])
    assert (
        batches["provider"].str.starts_with("openai:").all() and batches["state"].to_list() == ["ended"] * 3
    )


def test_openai_errored_and_expired_requests_fail_their_items(tmp_path, mock, capsys):
    mock.configure(expire="1 + 1", faults=[{"status": 500, "match": "2 + 2"}])
    summary, store = assay_run(capsys, openai_spec(tmp_path, mock.base_url, 4, batch=BATCH), tmp_path / "s")
    items = store.run_items(summary["run_id"]).sort("item_index")
    assert items["outcome"].to_list() == ["completed", "failed", "failed", "completed"]
    assert items["error"][1] == "batch request expired"
    assert items["error"][2] == "batch request errored: server_error: mock fault: HTTP 500"
    assert json.loads(store.run_batches(summary["run_id"])["request_counts"][0]) == {
        "completed": 2,
        "failed": 2,
    }


def test_openai_batch_needs_max_tokens(tmp_path, mock, capsys):
    spec = openai_spec(tmp_path, mock.base_url, 2, batch=True)
    spec.write_text(spec.read_text().replace("max_tokens: 16", "max_tokens: null"))
    code = main(["run", str(spec), "--store", str(tmp_path / "s")])
    assert code == 2 and "batch needs max_tokens" in capsys.readouterr().err


@pytest.mark.slow
def test_openai_sigkill_with_batches_in_flight_then_resume_submits_nothing_twice(tmp_path, mock):
    n = 15
    mock.configure(batch_delay_ms=3000, answers=answers(n))
    store = tmp_path / "s"
    process = start_run(openai_spec(tmp_path, mock.base_url, n, batch={**BATCH, "poll_s": 0.1}), store)
    wait_for(
        lambda: len(list((store / "batches").glob("run_id=*/*-in_progress.parquet"))) == 3,
        "3 batches were recorded in flight",
        process,
    )
    process.send_signal(signal.SIGKILL)
    process.wait()
    run_id = only_run_id(store)
    resumed = run_assay("resume", run_id, "--store", str(store), "--json")
    assert resumed.returncode == 0, resumed.stderr
    stats = mock.batch_stats()
    assert stats["batch_submissions"] == 3 and sorted(stats["batch_requests"].values()) == [1] * n
    assert Store(store).run_items(run_id)["outcome"].to_list() == ["completed"] * n
