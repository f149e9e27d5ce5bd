"""Finished work reaches the store within 2 s of finishing, whatever else the run is doing:
`assay run` processes SIGKILLed a few seconds after an item finished — a slow python target, a
provider's batches (batch mode), a Dask worker — hold that item, and a resume never asks for it
again."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from assay.store import Store
from tests.calls.test_batch import answers, spec_of
from tests.conftest import (
    REPO,
    only_run_id,
    run_assay,
    start_assay,
    start_run,
    wait_for,
    write_jsonl,
    write_spec,
)

pytestmark = [pytest.mark.slow]  # subprocesses, SIGKILL, seconds each

# A target whose item "fast" answers at once and whose item "slow" waits while the file `hold`
# exists; each call is logged to `calls.log`, and `fast.done` marks the moment "fast" returned.
_TARGET = """
import asyncio, pathlib

HERE = pathlib.Path(__file__).parent


async def answer(question: str) -> str:
    with (HERE / "calls.log").open("a") as log:
        log.write(question + "\\n")
    while question == "slow" and (HERE / "hold").exists():
        await asyncio.sleep(0.05)
    if question == "fast":
        (HERE / "fast.done").touch()
    return question
"""


def _slow_spec(folder: Path) -> Path:
    (folder / "slow_target.py").write_text(_TARGET)
    (folder / "hold").touch()
    write_jsonl(folder / "data.jsonl", [{"id": q, "input": q, "expected": q} for q in ("slow", "fast")])
    return write_spec(
        folder,
        name="slow",
        dataset={"path": "data.jsonl", "id": "id"},
        target={"kind": "python", "function": "slow_target:answer"},
        scorers=[{"kind": "exact_match"}],
        concurrency=2,
    )


def _calls(folder: Path) -> list[str]:
    return (folder / "calls.log").read_text().split()


def _committed(store: Path | str, run_id: str) -> list[str]:
    return sorted(Store(store).run_items(run_id)["item_id"].to_list())


def _resume_calls_only_the_slow_item(folder: Path, store: Path, run_id: str, *extra: str) -> None:
    (folder / "hold").unlink()
    resumed = run_assay("resume", run_id, "--store", str(store), "--json", *extra)
    assert resumed.returncode == 0, resumed.stderr
    assert _calls(folder) == ["slow", "fast", "slow"] or _calls(folder) == ["fast", "slow", "slow"]
    assert _committed(store, run_id) == ["fast", "slow"]


def test_an_item_finished_while_another_runs_on_is_in_the_store_before_the_kill(tmp_path):
    store = tmp_path / "s"
    process = start_run(_slow_spec(tmp_path), store)
    wait_for(lambda: (tmp_path / "fast.done").exists(), '"fast" finished', process)
    time.sleep(4)  # "slow" still runs: nothing else finishes that would look at the batch's age
    process.send_signal(signal.SIGKILL)
    process.wait()
    run_id = only_run_id(store)
    assert _committed(store, run_id) == ["fast"], "the finished item was committed on its batch's timer"
    _resume_calls_only_the_slow_item(tmp_path, store, run_id)


def test_a_downloaded_batchs_results_are_in_the_store_before_the_next_batch_ends(tmp_path, claude):
    # Batch 1 (5 requests, full at once) ends in 300 ms; batch 2 (the sixth request, sent 3 s
    # later when no more join it) is created once the provider has become slow: it never ends here.
    claude.configure(batch_delay_ms=300, answers=answers(6))
    store = tmp_path / "s"
    spec = spec_of(tmp_path, claude.base_url, 6, batch={"max_requests": 5, "max_wait_s": 3.0, "poll_s": 0.05})
    process = start_run(spec, store)
    batches = store / "batches"
    wait_for(lambda: list(batches.glob("run_id=*/*.parquet")), "the first batch was recorded", process)
    claude.configure(batch_delay_ms=600_000)
    wait_for(lambda: list(batches.glob("run_id=*/*-ended.parquet")), "the first batch ended", process)
    time.sleep(4)
    assert claude.stats()["batch_submissions"] == 2, "the second batch is in flight"
    process.send_signal(signal.SIGKILL)
    process.wait()
    run_id = only_run_id(store)
    items = Store(store).run_items(run_id)
    assert items.height == 5 and items["outcome"].to_list() == ["completed"] * 5, (
        "the first batch's results were committed while the second was in flight"
    )
    downloads = claude.stats()["batch_downloads"]
    assert sum(downloads.values()) == 1

    # The resume re-attaches to the second batch only: the first one's results are not read again.
    polls = claude.stats()["batch_polls"]
    resumed = start_assay("resume", run_id, "--store", str(store), "--quiet")
    wait_for(lambda: claude.stats()["batch_polls"] > polls, "the resume polled the second batch", resumed)
    time.sleep(1)
    resumed.send_signal(signal.SIGKILL)
    resumed.wait()
    assert claude.stats()["batch_downloads"] == downloads, "no batch's results downloaded again"
    assert claude.stats()["batch_submissions"] == 2


def test_a_dask_workers_finished_item_is_in_the_store_before_the_worker_is_killed(tmp_path):
    from assay.testing.dask_cluster import DaskCluster

    store = tmp_path / "s"
    spec = _slow_spec(tmp_path)
    env: dict[str, Any] = {"PYTHONPATH": str(REPO), "DO_NOT_TRACK": "1"}
    with DaskCluster(workers=1, env=env) as cluster:
        driver = start_assay("run", str(spec), "--store", str(store), "--quiet", "--dask", cluster.address)
        wait_for(lambda: (tmp_path / "fast.done").exists(), '"fast" finished', driver)
        time.sleep(4)
        cluster.workers[0].send_signal(signal.SIGKILL)
        cluster.workers[0].wait()
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    run_id = only_run_id(store)
    assert _committed(store, run_id) == ["fast"], "the worker committed the finished item on its timer"
    _resume_calls_only_the_slow_item(tmp_path, store, run_id)
    assert json.loads(Store(store).run_items(run_id).filter(item_id="fast")["output"][0]) == "fast"
