"""Leases with real processes: a run driven by one process is refused to another; a dead or
expired holder's lease is taken over; a holder that lost its lease (paused past its time to live,
or taken by force) stops and commits nothing more, so the store ends with each item once."""

from __future__ import annotations

import json
import multiprocessing
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest

from assay._files import put_if_absent
from assay.errors import RunHeldError
from assay.store import Store
from assay.store.lease import Lease
from tests.conftest import (
    only_run_id,
    openai_spec,
    paced_spec,
    run_assay,
    start_assay,
    start_run,
    start_run_until_committed,
    wait_for,
)
from tests.helpers.cli import assay_process_json

pytestmark = [pytest.mark.slow]  # subprocesses, signals, leases: seconds each

SHORT_TTL = {"ASSAY_LEASE_TTL_S": "2"}


def _records(store: Path, run_id: str) -> list[tuple[int, dict[str, Any]]]:
    folder = store / "leases" / f"run_id={run_id}"
    return sorted(
        (int(path.stem), json.loads(path.read_text()))
        for path in folder.glob("*.json")
        if path.stem.isdigit()
    )


def _newest(store: Path, run_id: str) -> dict[str, Any]:
    return _records(store, run_id)[-1][1]


def _take_by_force(store: Path, run_id: str, renewed: float, ttl: float = 30) -> None:
    """What another host's process holding the run looks like: the next lease record, its own
    (the number after the newest; the next one if the holder's renewal took that one first)."""
    number = _records(store, run_id)[-1][0] + 1
    folder = store / "leases" / f"run_id={run_id}"
    while not put_if_absent(
        folder / f"{number:012d}.json", json.dumps(_foreign(number, renewed, ttl)).encode()
    ):
        number += 1


def _foreign(number: int, renewed: float, ttl: float) -> dict[str, Any]:
    return {
        "host": "elsewhere",
        "pid": 1,
        "flow_run_id": None,
        "token": "theirs",
        "since": "2026-11-29T00:00:00",
        "generation": number,
        "renewed": renewed,
        "ttl": ttl,
        "released": False,
    }


def _wait_expired(store: Path, run_id: str) -> None:
    """Until the newest lease record is past its time to live (the holder is paused)."""
    held = _newest(store, run_id)
    time.sleep(max(0.0, held["renewed"] + held["ttl"] - time.time()) + 0.1)


def _stopped(process: subprocess.Popen[str]) -> bool:
    return psutil.Process(process.pid).status() == psutil.STATUS_STOPPED


def _assert_each_item_once(store: Path, run_id: str, n_items: int, n_scorers: int) -> None:
    items = Store(store).run_items(run_id)
    scores = Store(store).run_scores(run_id)
    assert items.height == n_items and items.select("item_id", "trial").n_unique() == n_items
    assert scores.height == n_items * n_scorers
    assert scores.select("item_id", "trial", "scorer").n_unique() == n_items * n_scorers


def test_a_second_process_is_refused_then_takes_over_once_the_holder_dies(tmp_path, mock):
    mock.configure(latency_ms=40)
    spec = openai_spec(tmp_path, mock.base_url, n=200, concurrency=4)
    store = tmp_path / "store"
    # Paused, the holder can neither finish nor die while the other process is refused; and its
    # lease outlives any slow start of that process: only its death lets the run be taken over.
    holder = start_run_until_committed(spec, store, env={"ASSAY_LEASE_TTL_S": "600"})
    holder.send_signal(signal.SIGSTOP)
    run_id = only_run_id(store)
    try:
        refused = run_assay("resume", run_id, "--store", str(store))
        assert refused.returncode == 2
        assert f"run {run_id} is held by" in refused.stderr and f":{holder.pid} since" in refused.stderr
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The holder died on this host: its lease is taken over at once, no time to live to wait out.
    resumed = assay_process_json("resume", run_id, "--store", str(store))
    assert resumed["items"]["completed"] == 200
    _assert_each_item_once(store, run_id, 200, 2)
    assert _newest(store, run_id)["released"], "released when the run finished"


def test_a_lease_from_another_host_is_refused_until_it_expires(tmp_path, mock):
    spec = openai_spec(tmp_path, mock.base_url, n=3)
    store = tmp_path / "store"
    run_id = assay_process_json("run", str(spec), "--store", str(store))["run_id"]
    _take_by_force(store, run_id, renewed=time.time())
    refused = run_assay("resume", run_id, "--store", str(store))
    assert refused.returncode == 2 and "held by elsewhere:1" in refused.stderr
    _take_by_force(store, run_id, renewed=time.time() - 31)
    assay_process_json("resume", run_id, "--store", str(store))
    assert Store(store).read_run(run_id)["status"] == "completed"


def test_a_paused_holder_whose_run_was_taken_over_stops_and_commits_nothing_more(tmp_path, mock):
    """The operator's case: A runs 300 items and is paused past its lease's time to live; B
    resumes and finishes the run; A wakes. A must add nothing and leave B's record alone."""
    mock.configure(latency_ms=40)
    spec = openai_spec(tmp_path, mock.base_url, n=300, concurrency=4)
    store = tmp_path / "store"
    paused = start_run_until_committed(spec, store, env=SHORT_TTL)
    paused.send_signal(signal.SIGSTOP)
    run_id = only_run_id(store)
    try:
        _wait_expired(store, run_id)
        assay_process_json("resume", run_id, "--store", str(store), env=SHORT_TTL)
        finished = Store(store).read_run(run_id)
    finally:
        paused.send_signal(signal.SIGCONT)
    _, stderr = paused.communicate(timeout=120)

    assert paused.returncode == 3, stderr
    assert f"lost the lease on run {run_id}" in stderr and "committed nothing more" in stderr
    assert "Traceback" not in stderr
    _assert_each_item_once(store, run_id, 300, 2)
    assert Store(store).read_run(run_id) == finished, "the new holder's record stands"
    assert finished["status"] == "completed" and finished["n_completed"] == 300


def test_a_run_whose_lease_is_taken_by_force_stops(tmp_path, mock):
    mock.configure(latency_ms=40)
    spec = openai_spec(tmp_path, mock.base_url, n=1000, concurrency=4)
    store = tmp_path / "store"
    holder = start_run_until_committed(spec, store, env=SHORT_TTL)
    run_id = only_run_id(store)
    _take_by_force(store, run_id, renewed=time.time(), ttl=600)
    _, stderr = holder.communicate(timeout=60)

    assert holder.returncode == 3, stderr
    assert "elsewhere:1 took the run over" in stderr
    items = Store(store).run_items(run_id)
    assert 0 < items.height < 1000 and items["item_id"].n_unique() == items.height
    assert Store(store).read_run(run_id)["status"] == "running", "the record is the new holder's to write"
    assert _newest(store, run_id)["token"] == "theirs"


# 50 ms an item, 4 at a time: the first batch is committed after 2 s (by age), with ~160 items.
PACED = {**SHORT_TTL, "ASSAY_TEST_DELAY_S": "0.05"}


@pytest.mark.parametrize("paused_at", ["stop-before-commit", "stop-mid-commit"])
def test_a_holder_paused_between_its_check_and_its_commit_leaves_no_duplicate(tmp_path, paused_at):
    """Paused after its last lease check, with a batch about to be committed (before any of its
    files is written, or with its scores part in place): the new holder redoes those items, and
    the stale commit — landing after the takeover, or failing for the files the new holder
    cleared — adds nothing and records nothing."""
    spec = paced_spec(tmp_path, 300)
    store = tmp_path / "store"
    paused = start_run(spec, store, env={**PACED, "ASSAY_TEST_AT": paused_at})
    wait_for(lambda: _stopped(paused), "paused at its first commit", paused)
    run_id = only_run_id(store)
    try:
        _wait_expired(store, run_id)
        assay_process_json("resume", run_id, "--store", str(store), env=PACED)
        finished = Store(store).read_run(run_id)
        assert finished["status"] == "completed" and finished["n_completed"] == 300
    finally:
        paused.send_signal(signal.SIGCONT)
    _, stderr = paused.communicate(timeout=120)

    assert paused.returncode == 3, stderr
    _assert_each_item_once(store, run_id, 300, 1)
    assert Store(store).read_run(run_id) == finished, "the new holder's record stands"


def test_a_stale_commit_that_its_writer_cannot_withdraw_is_removed_by_the_new_holder(tmp_path):
    """The stale commit lands while the new holder runs, and its writer is killed before it can
    check its lease: the new holder removes the part before it closes the run."""
    spec = paced_spec(tmp_path, 300)
    store = tmp_path / "store"
    stale = start_run(spec, store, env={**PACED, "ASSAY_TEST_AT": "stop-before-commit,stop-after-commit"})
    wait_for(lambda: _stopped(stale), "paused before its first commit", stale)
    run_id = only_run_id(store)
    _wait_expired(store, run_id)
    resumer = start_assay("resume", run_id, "--store", str(store), "--json", env=PACED)
    try:
        # Once the new holder has listed the committed parts (its fence), the stale commit lands.
        fences = store / "leases" / f"run_id={run_id}"
        wait_for(lambda: len(list(fences.glob("fence-*.json"))) == 2, "taken over", resumer)
        stale.send_signal(signal.SIGCONT)
        wait_for(lambda: _stopped(stale), "paused after its stale commit", stale)
        assert resumer.poll() is None, "the new holder is still running"
    finally:
        stale.send_signal(signal.SIGKILL)
        stale.wait()
    stdout, stderr = resumer.communicate(timeout=120)
    assert resumer.returncode == 0, stderr
    assert json.loads(stdout)["items"]["completed"] == 300
    _assert_each_item_once(store, run_id, 300, 1)


# -- racing for a lease ---------------------------------------------------------------------------


def _race(root: str, run_id: str, start: Any, results: Any) -> None:
    """One racer: wait for the start, try to take the run, report whether it did."""
    lease = Lease(Store(root), run_id)
    start.wait()
    try:
        lease.acquire()
    except RunHeldError:
        results.put(None)
    else:
        results.put(lease.holder["token"])


@pytest.mark.parametrize("expired", [False, True], ids=["no lease yet", "expired lease"])
def test_of_processes_racing_for_a_lease_exactly_one_wins(tmp_path, expired):
    context = multiprocessing.get_context("fork")
    racers, rounds = 4, 40
    for _ in range(rounds):
        run_id = uuid.uuid4().hex[:8]
        if expired:
            put_if_absent(
                tmp_path / "leases" / f"run_id={run_id}" / f"{1:012d}.json",
                json.dumps({"host": "elsewhere", "pid": 1, "token": "old", "renewed": 0, "ttl": 1}).encode(),
            )
        start, results = context.Barrier(racers), context.Queue()
        processes = [
            context.Process(target=_race, args=(str(tmp_path), run_id, start, results)) for _ in range(racers)
        ]
        for process in processes:
            process.start()
        tokens = [results.get(timeout=60) for _ in processes]
        for process in processes:
            process.join(timeout=60)
        winners = [token for token in tokens if token is not None]
        assert len(winners) == 1, f"{len(winners)} of {racers} processes took run {run_id}"
        assert _newest(tmp_path, run_id)["token"] == winners[0]
