"""Ctrl-C: what finished stays committed, the rest is recorded as cancelled, resume finishes it."""

from __future__ import annotations

import json
import signal

from assay.store import Store
from tests.conftest import only_run_id, openai_spec, run_assay, start_run_until_committed

N = 200


def test_ctrl_c_records_cancelled_and_resume_finishes(tmp_path, mock):
    mock.configure(latency_ms=40)
    spec = openai_spec(tmp_path, mock.base_url, n=N, concurrency=4)
    store = tmp_path / "store"
    process = start_run_until_committed(spec, store)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "assay resume" in stderr

    run_id = only_run_id(store)
    record = Store(store).read_run(run_id)
    items = Store(store).run_items(run_id)
    assert record["status"] == "cancelled"
    assert 0 < items.height < N and items["item_id"].n_unique() == items.height
    assert record["n_cancelled"] == N - items.height and record["n_completed"] == items.height
    mock.reset()

    resumed = run_assay("resume", run_id, "--store", str(store), "--json")
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
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
