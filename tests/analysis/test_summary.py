"""A run's summary reads only the columns its statistics use (issue 13: the driver closing 100,000
items read every item, score and gauge row whole; docs/performance.md): `RunRows.scan` then
`RunRows.narrow`, each statistic aggregating over the scan. It must give the same summary, digit for digit, as the same statistics over the
run's rows read whole — on a local folder and on s3:// (moto), for a run with failures, a retried
failure's history, trials, several scorers (one failing), gauges and captured requests with a
rate-limit retry."""

from __future__ import annotations

import json

import pytest

from assay.analysis.summary import RunRows, summarise
from assay.store import Store
from tests.conftest import mock_target, openai_spec
from tests.helpers.cli import assay_json

PICKY = """
def picky(output):
    if "5" in output:
        raise ValueError("cannot judge " + output)
    return 1.0


def broken(output):
    raise ValueError("never judges")
"""

FAULTS = [
    # retried at once (Retry-After 0, no backoff): a rate-limit retry
    {"status": 429, "times": 1, "retry_after": 0, "match": "What is 1 + 1?"},
    {"status": 400, "times": -1, "match": "What is 3 + 3?"},  # refused every time: failed
    {"status": 400, "times": 2, "match": "What is 4 + 4?"},  # fails both trials, then answers
]


@pytest.fixture(params=["local", "s3"])
def store_url(request, tmp_path) -> str:
    if request.param == "local":
        return str(tmp_path / "store")
    s3 = request.getfixturevalue("s3")  # the session's server (conftest), asked for only here
    return s3.url(request.node.name.replace("[", "-").rstrip("]"))


def _same_either_way(store: Store, run_id: str) -> dict:
    """The run's summary read lazily, checked equal to the one of its rows read whole."""
    lazy = summarise(store, run_id)
    whole = summarise(
        store,
        run_id,
        RunRows(
            history=store.run_items(run_id, history=True),
            scores=store.run_scores(run_id, kind=None),
            requests=store.run_requests(run_id),
        ),
    )
    assert lazy == whole
    # ... and to the one of its summary columns read once into frames (the summary before it
    # aggregated each statistic over the scan; issue 28).
    scanned = RunRows.scan(store, run_id).narrow()
    read_once = RunRows(
        *(rows.lazy().collect() for rows in (scanned.history, scanned.scores, scanned.requests))
    )
    assert summarise(store, run_id, read_once) == lazy
    assert json.dumps(lazy, sort_keys=True, default=str) == json.dumps(whole, sort_keys=True, default=str)
    return lazy


def test_the_summary_read_lazily_equals_the_summary_of_the_rows_read_whole(store_url, tmp_path, mock, capsys):
    (tmp_path / "summary_scorers.py").write_text(PICKY)
    mock.configure(faults=FAULTS, answers={"What is 0 + 0?": "0", "What is 2 + 2?": "4"})
    spec = openai_spec(
        tmp_path,
        mock.base_url,
        n=8,
        target=mock_target(mock.base_url, max_retries=1),
        scorers=[
            {"kind": "exact_match", "name": "exact"},
            {"kind": "regex", "name": "digits", "pattern": "\\d+"},
            {"kind": "user_code", "name": "picky", "function": "summary_scorers:picky"},
            {"kind": "user_code", "name": "broken", "function": "summary_scorers:broken"},
        ],
        trials=2,
        capture_requests=True,
        fail_on_item_error_rate=1,
        fail_on_scorer_error_rate=1,
    )
    run_id = assay_json(capsys, "run", str(spec), "--store", store_url)["run_id"]
    store = Store(store_url)
    _same_either_way(store, run_id)  # no retries yet: every row is current
    # q3 fails again, q4 answers now: their failed rows stay as history.
    closed = assay_json(capsys, "resume", run_id, "--store", store_url, "--retry-failed")
    lazy = _same_either_way(store, run_id)

    # What it covers, so that the equality is not of empty statistics.
    assert lazy["items"]["completed"] == 14 and lazy["items"]["failed"] == 2
    assert lazy["failures"] and lazy["failures"][0]["n"] == 2
    assert store.run_items(run_id, history=True).height == 20, "the 4 rows retried are history"
    scorers = {row["scorer"]: row for row in lazy["scorers"]}
    assert set(scorers) == {"exact", "digits", "picky", "broken"}
    # A scorer that never scored: no statistics of scores, its failures counted, its first error.
    assert [scorers["broken"][key] for key in ("mean", "min", "p50", "p95", "max", "scored")] == [
        None
    ] * 5 + [0]
    assert scorers["broken"]["failed"] == 14 and scorers["broken"]["first_error"].startswith("ValueError")
    assert scorers["picky"]["failed"] == 2 and scorers["picky"]["first_error"].startswith("ValueError")
    assert scorers["exact"]["pass_at_k"] and scorers["exact"]["mean"] == pytest.approx(4 / 14)
    assert {gauge["gauge"] for gauge in lazy["gauges"]} >= {"gauge.duration_ms", "gauge.tokens_output"}
    (timing,) = lazy["timing_by_model"]
    assert timing["rate_limit_retries"] == 1 and timing["calls"] == 14
    assert lazy["tokens"]["output"] > 0 and lazy["cost"]["unpriced_models"] == ["mock-1"]
    # `close_run` summarised the same way as it closed the run.
    assert {k: closed[k] for k in ("items", "scorers", "gauges", "tokens", "duration_ms")} == {
        k: lazy[k] for k in ("items", "scorers", "gauges", "tokens", "duration_ms")
    }


def test_failure_message_says_why_a_run_or_a_matrix_cell_failed() -> None:
    """The line a failed flow run carries as its state's message (flows/run.py)."""
    from assay.analysis.summary import failure_message

    gated = {"status": "failed_gate", "item_error_rate": 0.5, "fail_on_item_error_rate": 0.1, "cell": "a"}
    assert (
        failure_message(gated) == "item error rate 50.0% is above the gate's 10.0% (fail_on_item_error_rate)"
    )
    broken = {"status": "failed", "error": "30 items in a row failed to connect", "run_id": "r1"}
    assert (
        failure_message(broken)
        == "failed: 30 items in a row failed to connect; `assay resume r1` continues it"
    )
    assert failure_message({"status": "unavailable", "reasons": ["judge failed its gold check"]}) == (
        "unavailable, nothing ran: judge failed its gold check"
    )
    assert failure_message({"status": "completed"}) is None
    matrix = {"status": "failed_gate", "cells": [gated, {"status": "completed", "cell": "b"}]}
    assert failure_message(matrix) == f"cell a: {failure_message(gated)}"
