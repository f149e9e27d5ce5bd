"""`assay resume RUN --retry-failed [KINDS]` (issue 14, point 8; quickstudy's `retryUnfinished`).

Failed items of the chosen kinds run again; each failed row stays in `items` as history (`retry`,
`retry_of`), and readers — Assay's own and an analyst's one-liner with the documented filter —
see exactly one current row per item x trial.
"""

from __future__ import annotations

import polars as pl
import pytest

from assay.cli import main
from assay.store import Store
from tests.conftest import mock_target, openai_spec
from tests.helpers.cli import assay_json

PRICES = {"mock-1": {"input": 10.0, "output": 30.0}}
# q1: refused for good, its account's quota used up (a 429 no wait cures: not waited out as a
# rate limit); q2: times out; q3: refused (HTTP 400). The rest answer.
FAULTS = [
    {"status": 429, "times": -1, "code": "insufficient_quota", "match": "What is 1 + 1?"},
    {"delay_ms": 3000, "times": -1, "match": "What is 2 + 2?"},
    {"status": 400, "times": -1, "match": "What is 3 + 3?"},
]


@pytest.fixture
def failed_run(tmp_path, mock, capsys):
    mock.configure(faults=FAULTS)
    spec = openai_spec(
        tmp_path,
        mock.base_url,
        n=6,
        prices=PRICES,
        target=mock_target(mock.base_url, timeout=0.5, max_retries=0),
        fail_on_item_error_rate=1,
    )
    store = str(tmp_path / "store")
    summary = assay_json(capsys, "run", str(spec), "--store", store)
    assert summary["items"]["failed"] == 3
    kinds = Store(store).run_items(summary["run_id"]).sort("item_id")["failure_kind"].to_list()
    assert kinds == [None, "http", "timeout", "http", None, None]
    mock.configure(faults=[])
    mock.reset()
    return store, summary["run_id"]


def test_retry_failed_of_some_kinds_keeps_history_and_one_current_row(failed_run, mock, capsys):
    store_path, run_id = failed_run
    store = Store(store_path)
    summary = assay_json(
        capsys, "resume", run_id, "--store", store_path, "--retry-failed", "timeout,rate_limit"
    )
    assert mock.stats()["requests"] == 2, "only q1 (429) and q2 (timeout) ran again"
    assert summary["items"]["completed"] == 5 and summary["items"]["failed"] == 1

    current = store.run_items(run_id).sort("item_id")
    assert current.height == 6 and current.select("item_id", "trial").is_unique().all()
    assert current["outcome"].to_list() == ["completed"] * 3 + ["failed"] + ["completed"] * 2
    assert current["retry"].to_list() == [0, 1, 1, 0, 0, 0]
    assert current["retry_of"].to_list() == [None, 0, 0, None, None, None]

    history = store.run_items(run_id, history=True)
    assert history.height == 8
    earlier = history.filter(pl.col("retry") == 0, pl.col("item_id").is_in(["q1", "q2"])).sort("item_id")
    assert earlier["outcome"].to_list() == ["failed", "failed"]
    assert earlier["failure_kind"].to_list() == ["http", "timeout"]

    # Scores: one row per item x trial x scorer, the retried items' included.
    scores = store.run_scores(run_id)
    assert scores.group_by("item_id", "trial", "scorer").len()["len"].max() == 1
    assert set(scores["item_id"]) == {"q0", "q1", "q2", "q4", "q5"}

    # The run's spend counts every row, the failed attempts' included.
    record = store.read_run(run_id)
    assert record["cost_usd"] == pytest.approx(history["cost_usd"].fill_null(0).sum())
    assert record["n_completed"] == 5 and record["n_failed"] == 1 and record["n_cancelled"] == 0

    # An analyst's one-liner with the filter docs/analysts.md gives: the current rows, no more.
    scanned = (
        pl.scan_parquet(f"{store_path}/items/**/*.parquet", hive_partitioning=True)
        .filter(pl.col("retry") == pl.col("retry").max().over("run_id", "item_id", "trial"))
        .collect()
    )
    assert scanned.height == 6 and sorted(scanned["outcome"].to_list()) == sorted(current["outcome"])

    # Every kind: q3 too, after its failure.
    summary = assay_json(capsys, "resume", run_id, "--store", store_path, "--retry-failed")
    assert summary["items"]["completed"] == 6 and mock.stats()["requests"] == 3
    q3 = store.run_items(run_id, history=True).filter(pl.col("item_id") == "q3").sort("retry")
    assert q3["outcome"].to_list() == ["failed", "completed"] and q3["retry_of"].to_list() == [None, 0]


def test_a_plain_resume_does_not_retry_and_bad_kinds_are_refused(failed_run, mock, capsys):
    store_path, run_id = failed_run
    store = Store(store_path)
    revisions = store.runs().filter(pl.col("run_id") == run_id).collect().height
    code = main(["resume", run_id, "--store", store_path, "--retry-failed", "timeout,flaky"])
    err = capsys.readouterr().err
    assert code == 2 and "--retry-failed: unknown failure kind 'flaky'" in err and "rate_limit" in err
    assert store.runs().filter(pl.col("run_id") == run_id).collect().height == revisions, "nothing written"

    summary = assay_json(capsys, "resume", run_id, "--store", store_path)
    assert summary["items"]["failed"] == 3 and mock.stats()["requests"] == 0
    assert store.run_items(run_id, history=True).height == 6
