"""Ctrl-C: what finished stays committed, the rest is recorded as cancelled, resume finishes it."""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from assay.outcomes import ItemOutcome
from assay.store import Store
from tests.conftest import (
    only_run_id,
    openai_spec,
    paced_spec,
    start_run,
    start_run_until_committed,
    wait_for,
)
from tests.helpers.cli import assay_process_json

pytestmark = [pytest.mark.slow]  # subprocesses, signals, leases: seconds each

N = 200


def test_ctrl_c_records_cancelled_and_resume_finishes(tmp_path, mock):
    mock.configure(latency_ms=40)
    spec = openai_spec(tmp_path, mock.base_url, n=N, concurrency=4)
    store = tmp_path / "store"
    process = start_run_until_committed(spec, store)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    run_id = only_run_id(store)
    assert stderr.splitlines()[-1] == (
        f"interrupted: finished items are stored; `assay resume {run_id}` continues it"
    ), stderr

    record = Store(store).read_run(run_id)
    items = Store(store).run_items(run_id)
    assert record["status"] == "cancelled"
    assert 0 < items.height < N and items["item_id"].n_unique() == items.height
    assert record["n_cancelled"] == N - items.height and record["n_completed"] == items.height
    mock.reset()

    summary = assay_process_json("resume", run_id, "--store", str(store))
    assert summary["status"] == "completed" and summary["items"]["completed"] == N
    assert summary["items"]["cancelled"] == 0
    assert mock.stats()["requests"] == N - items.height
    assert Store(store).run_items(run_id)["item_id"].n_unique() == N


def test_sigterm_is_a_cancellation_too(tmp_path, mock):
    mock.configure(latency_ms=40)
    spec = openai_spec(tmp_path, mock.base_url, n=N, concurrency=4)
    store = tmp_path / "store"
    process = start_run_until_committed(spec, store)
    process.terminate()
    process.communicate(timeout=60)
    record = Store(store).read_run(only_run_id(store))
    assert record["status"] == "cancelled" and record["n_cancelled"] > 0


def _assert_counts_add_up(store: Path, run_id: str) -> dict[str, Any]:
    """The record's outcome counts are the store's rows, each item x trial once, and they add up
    to what was planned."""
    record = Store(store).read_run(run_id)
    items = Store(store).run_items(run_id)
    counts = {outcome: record[f"n_{outcome.value}"] for outcome in ItemOutcome}
    assert all(n >= 0 for n in counts.values()), counts
    assert sum(counts.values()) == record["n_planned"], counts
    assert items.select("item_id", "trial").n_unique() == items.height
    assert counts[ItemOutcome.COMPLETED] + counts[ItemOutcome.FAILED] == items.height
    return record


def test_sigterm_right_after_a_commit_counts_each_item_once(tmp_path):
    """The signal lands between a batch's commit and its bookkeeping (the process signals itself
    there: tests/helpers/commit_signals.py). The batch is committed once, and the run is cancelled
    with counts that add up (it once recorded the batch twice and a negative `n_cancelled`)."""
    n = 400
    spec = paced_spec(tmp_path, n)
    store = tmp_path / "store"
    env = {"ASSAY_TEST_AT": "sigterm-after-commit", "ASSAY_TEST_DELAY_S": "0.04"}
    process = start_run(spec, store, env=env)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    record = _assert_counts_add_up(store, only_run_id(store))
    assert record["status"] == "cancelled"
    assert 0 < record["n_completed"] < n and record["n_cancelled"] == n - record["n_completed"]


DELAYS_S = (0.0, 0.5, 1.0, 2.0, 2.5, 4.0)


def test_sigterm_at_any_moment_leaves_counts_that_add_up(tmp_path, mock):
    """A run SIGTERMed at many moments after its record exists — starting, mid-batch, at a
    commit, finishing — always ends with a record whose counts add up to what was planned."""
    mock.configure(latency_ms=40)
    n = 300  # up to 100 items a second: a batch committed at 2 s, and one at the end

    def signalled(delay: float) -> tuple[float, str, int]:
        folder = tmp_path / f"at-{delay}"
        folder.mkdir()
        spec = openai_spec(folder, mock.base_url, n=n, concurrency=4)
        store = folder / "store"
        process = start_run(spec, store)
        wait_for(
            lambda: list((store / "runs").glob("run_id=*/run-*.parquet")), "the run was recorded", process
        )
        time.sleep(delay)  # the moment under test, not a wait for something
        process.terminate()
        _, stderr = process.communicate(timeout=120)
        record = _assert_counts_add_up(store, only_run_id(store))
        assert record["status"] in ("cancelled", "completed"), record["status"]
        # Killed by the signal itself only once the run was over (its handler is gone by then).
        assert process.returncode in (0, 130) or (
            process.returncode == -signal.SIGTERM and record["status"] == "completed"
        ), (process.returncode, stderr)
        return delay, record["status"], record["n_completed"]

    with ThreadPoolExecutor(max_workers=2) as pool:
        ends = list(pool.map(signalled, DELAYS_S))
    cut_short = [end for end in ends if end[1] == "cancelled" and 0 < end[2] < n]
    assert len(cut_short) >= 3, f"too few runs were stopped part-way to show anything: {ends}"
