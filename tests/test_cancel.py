"""Ctrl-C: what finished stays committed, the rest is recorded as cancelled, resume finishes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from assay.store import Store
from tests.conftest import REPO, openai_spec, run_assay

N = 200


def test_ctrl_c_records_cancelled_and_resume_finishes(tmp_path, mock):
    mock.configure(latency_ms=40)
    spec = openai_spec(tmp_path, mock.base_url, n=N, concurrency=4)
    store = tmp_path / "store"
    process = subprocess.Popen(
        [sys.executable, "-m", "assay.cli", "run", str(spec), "--store", str(store), "--quiet"],
        cwd=REPO,
        env=os.environ.copy(),
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not list((store / "items").glob("run_id=*/part-*.parquet")):
        assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "assay resume" in stderr

    (partition,) = (store / "runs").glob("run_id=*")
    run_id = partition.name.removeprefix("run_id=")
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
    process = subprocess.Popen(
        [sys.executable, "-m", "assay.cli", "run", str(spec), "--store", str(store), "--quiet"],
        cwd=REPO,
        env=os.environ.copy(),
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not list((store / "items").glob("run_id=*/part-*.parquet")):
        assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
        time.sleep(0.05)
    process.terminate()
    process.communicate(timeout=60)
    (partition,) = (store / "runs").glob("run_id=*")
    record = Store(store).read_run(partition.name.removeprefix("run_id="))
    assert record["status"] == "cancelled" and record["n_cancelled"] > 0
