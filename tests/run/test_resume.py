"""Resume for real: a subprocess killed with SIGKILL mid-run, then `assay resume`."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import polars as pl
import pytest

from assay.store import Store
from tests.conftest import only_run_id, openai_spec, run_assay, start_run_until_committed

pytestmark = [pytest.mark.slow]  # subprocesses, signals, leases: seconds each

N_ITEMS = 300


def _kill_mid_run(spec: Path, store: Path) -> str:
    """Start `assay run`, SIGKILL it once some items are committed, return the run id."""
    process = start_run_until_committed(spec, store)
    time.sleep(0.3)
    process.send_signal(signal.SIGKILL)
    process.wait()
    return only_run_id(store)


def test_sigkill_then_resume_runs_each_unfinished_item_exactly_once(tmp_path, mock):
    mock.configure(latency_ms=40)
    spec = openai_spec(tmp_path, mock.base_url, n=N_ITEMS, concurrency=4)
    store_path = tmp_path / "store"
    run_id = _kill_mid_run(spec, store_path)
    store = Store(store_path)

    assert store.read_run(run_id)["status"] == "running"
    done_before = len(store.done_keys(run_id))
    assert 0 < done_before < N_ITEMS, done_before
    mock.reset()

    result = run_assay("resume", run_id, "--store", str(store_path), "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["run_id"] == run_id and summary["status"] == "completed"

    # Only the unfinished items reached the target again...
    assert mock.stats()["requests"] == N_ITEMS - done_before
    # ...and every item is in the store exactly once, each of its two scores exactly once.
    items = store.run_items(run_id)
    scores = store.run_scores(run_id)
    assert items.height == N_ITEMS and items["item_id"].n_unique() == N_ITEMS
    assert scores.height == 2 * N_ITEMS
    assert scores.group_by("item_id", "scorer").len()["len"].max() == 1
    lazy_rows = store.scores().filter(pl.col("run_id") == run_id).collect()
    assert lazy_rows.height == store.run_scores(run_id, kind=None).height, "no orphaned part for analysts"
    assert lazy_rows.filter(pl.col("kind") == "score").height == 2 * N_ITEMS
    # Gauges too are written once per item: duration and measured tokens (the mock model is unpriced).
    gauges = lazy_rows.filter(pl.col("kind") == "gauge").group_by("item_id", "scorer").len()
    assert gauges.height == 3 * N_ITEMS and gauges["len"].max() == 1
    assert summary["items"]["completed"] == N_ITEMS


def test_resume_refuses_a_changed_identity(tmp_path, mock):
    spec = openai_spec(tmp_path, mock.base_url, n=3)
    store = tmp_path / "store"
    first = run_assay("run", str(spec), "--store", str(store), "--json")
    run_id = json.loads(first.stdout)["run_id"]

    spec.write_text(
        spec.read_text().replace("name: exact", "name: exact2").replace("concurrency: 4", "trials: 2")
    )
    (tmp_path / "data.jsonl").write_text(
        (tmp_path / "data.jsonl").read_text().replace("What is 2", "What is 9")
    )
    refused = run_assay("resume", run_id, "--store", str(store))
    assert refused.returncode == 2
    for change in ("the dataset's content", "the scorers", "trials (1 -> 2)"):
        assert change in refused.stderr, refused.stderr
    assert "the target" not in refused.stderr


def test_resume_of_a_finished_run_executes_nothing(tmp_path, mock):
    spec = openai_spec(tmp_path, mock.base_url, n=5)
    store = tmp_path / "store"
    run_id = json.loads(run_assay("run", str(spec), "--store", str(store), "--json").stdout)["run_id"]
    mock.reset()
    again = run_assay("resume", run_id, "--store", str(store), "--json")
    assert again.returncode == 0 and mock.stats()["requests"] == 0
    assert Store(store).run_items(run_id).height == 5
