"""Resume through Prefect: a deployed `assay-run` flow run killed with SIGKILL, then retried.

The whole path a user takes: a real `prefect server`, the `assay` process work pool, the
deployments of prefect.yaml, `prefect deployment run`, a `prefect worker`. The worker and the
flow-run process it spawned are killed together mid-run (as a crashed machine would leave them);
the same flow run is then retried as the UI's "Retry" does it, and a second worker runs it. The
retry must reuse the run's Assay run id and execute only the items the first attempt had not
committed.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import psutil
import pyarrow.parquet as pq
import pytest

from assay.run.plan import MAX_SHARDS
from assay.store import Store
from tests.conftest import REPO, openai_spec
from tests.helpers.prefect_server import prefect_env, prefect_http, prefect_server

pytestmark = [pytest.mark.prefect]

N_ITEMS = 300
PREFECT = str(Path(sys.executable).with_name("prefect"))
# A CLI command against a running server takes ~3-5 s; the margin is for a loaded machine.
CLI_TIMEOUT_S = 120
# From `prefect worker start` to a shard part-way through: worker boot, flow-run process boot,
# the pull step, loading the flow and ~2 s of work (~15 s unloaded).
FIRST_PART_TIMEOUT_S = 120
# A retried attempt from worker start to exit (~15 s unloaded).
RETRY_TIMEOUT_S = 180
LOG_TAIL_CHARS = 4000
TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def _tail(path: Path) -> str:
    text = path.read_text(errors="replace") if path.is_file() else ""
    return text[-LOG_TAIL_CHARS:] or "(no output)"


def _prefect(env: dict[str, str], *args: str) -> str:
    """Run a `prefect` command from the repository root; fail the test with its output if it fails."""
    done = subprocess.run(
        [PREFECT, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=CLI_TIMEOUT_S,
    )
    assert done.returncode == 0, (
        f"`prefect {' '.join(args)}` exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout


def _start_worker(env: dict[str, str], output: IO[bytes]) -> subprocess.Popen[bytes]:
    """`prefect worker start --pool assay --run-once`, in its own process group."""
    return subprocess.Popen(
        [PREFECT, "worker", "start", "--pool", "assay", "--run-once"],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _kill_tree(process: subprocess.Popen[bytes]) -> list[str]:
    """SIGKILL the worker and every process below it; return their command lines.

    The process worker starts the flow run in a session of its own, so killing the worker's
    process group would miss it. Each process is stopped (SIGSTOP) as it is found, so none can
    exit, spawn or be reparented while the tree is walked; then all are killed at once.
    """
    found: dict[int, psutil.Process] = {}
    try:
        pending = [psutil.Process(process.pid)]
    except psutil.NoSuchProcess:
        pending = []
    while pending:
        proc = pending.pop()
        if proc.pid in found:
            continue
        try:
            proc.suspend()
            found[proc.pid] = proc
            pending.extend(proc.children())
        except psutil.NoSuchProcess:
            pass
    commands = []
    for proc in found.values():
        try:
            commands.append(" ".join(proc.cmdline()))
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    process.wait(timeout=30)
    _, alive = psutil.wait_procs(list(found.values()), timeout=30)
    assert not alive, f"still running after SIGKILL: {alive}"
    return commands


def _stop(process: subprocess.Popen[bytes] | None) -> None:
    """Leave nothing running if the test failed while a worker was up."""
    if process is not None and process.poll() is None:
        _kill_tree(process)


def _flow_run(api: str, flow_run_id: str) -> dict[str, Any]:
    response = prefect_http.get(f"{api}/flow_runs/{flow_run_id}", timeout=10)
    response.raise_for_status()
    return response.json()


def _only_flow_run_id(api: str) -> str:
    response = prefect_http.post(
        f"{api}/flow_runs/filter", json={"deployments": {"name": {"any_": ["assay-run"]}}}, timeout=10
    )
    response.raise_for_status()
    runs = response.json()
    assert len(runs) == 1, f"expected the one flow run just created, found {len(runs)}"
    return runs[0]["id"]


def _committed_per_shard(store: Path) -> dict[str, int]:
    """Items committed so far, by shard: a part is named `part-<shard>-<random>.parquet`."""
    counts: dict[str, int] = {}
    for part in (store / "items").glob("run_id=*/part-*.parquet"):
        shard = part.name.split("-")[1]
        counts[shard] = counts.get(shard, 0) + pq.read_metadata(part).num_rows
    return counts


def _shard_size(shard: str) -> int:
    """How many items shard `shard` holds: the plan's slices (at least 25, at most MAX_SHARDS)."""
    size = max(25, math.ceil(N_ITEMS / MAX_SHARDS))
    return min(size, N_ITEMS - int(shard) * size)


def _partial_shards(counts: dict[str, int]) -> set[str]:
    """Shards with some but not all of their items committed: begun, not finished."""
    return {shard for shard, n in counts.items() if 0 < n < _shard_size(shard)}


def _wait_mid_shard(store: Path, worker: subprocess.Popen[bytes], log: Path) -> None:
    """Return once some items are committed and one shard is part-way through.

    Killed at its first committed part, a run has finished whole shards only, and a retry would
    re-run the rest from scratch: the item-level skip inside a shard would go untested."""
    deadline = time.monotonic() + FIRST_PART_TIMEOUT_S
    while not _partial_shards(counts := _committed_per_shard(store)):
        assert worker.poll() is None, (
            f"the worker exited ({worker.returncode}) before a shard was part-way through "
            f"(committed items by shard: {counts}):\n{_tail(log)}"
        )
        assert time.monotonic() < deadline, (
            f"no shard was seen part-way through within {FIRST_PART_TIMEOUT_S} s of starting the worker "
            f"(committed items by shard: {counts}):\n{_tail(log)}"
        )
        time.sleep(0.02)


def test_sigkilled_flow_run_resumes_on_prefect_retry(tmp_path: Path, mock: Any) -> None:
    mock.configure(latency_ms=40)
    spec = openai_spec(tmp_path, mock.base_url, n=N_ITEMS, concurrency=4)
    store_path = tmp_path / "store"
    home = tmp_path / "prefect-home"
    worker_log = tmp_path / "worker.log"
    retry_log = tmp_path / "worker-retry.log"
    worker: subprocess.Popen[bytes] | None = None

    with prefect_server(home) as api:
        env = prefect_env(home, api)
        try:
            _prefect(env, "work-pool", "create", "assay", "--type", "process")
            _prefect(env, "--no-prompt", "deploy", "--all")
            params = json.dumps(
                {"request": {"spec": str(spec.resolve()), "store": str(store_path.resolve())}}
            )
            _prefect(env, "deployment", "run", "assay-run/assay-run", "--params", params)
            flow_run_id = _only_flow_run_id(api)

            # First attempt: worker and flow-run process killed together, with a shard part-way through.
            with worker_log.open("wb") as output:
                worker = _start_worker(env, output)
                _wait_mid_shard(store_path, worker, worker_log)
                killed = _kill_tree(worker)
            assert any("prefect.worker" in c or "worker start" in c for c in killed), killed
            assert len(killed) > 1, f"only the worker was found to kill, no flow-run process: {killed}"

            (partition,) = (store_path / "runs").glob("run_id=*")
            run_id = partition.name.removeprefix("run_id=")
            store = Store(store_path)
            assert store.read_run(run_id)["status"] == "running"
            assert store.read_run(run_id)["prefect_flow_run_id"] == flow_run_id
            done_before = len(store.done_keys(run_id))
            before = _committed_per_shard(store_path)
            print(
                f"killed with {done_before}/{N_ITEMS} items committed, by shard {before}: {killed}",
                file=sys.stderr,
            )
            assert 0 < done_before < N_ITEMS, (
                f"{done_before} of {N_ITEMS} items were done when the run was killed"
            )
            partial = _partial_shards(before)
            assert partial, f"the kill left no shard part-way through: {before}"
            killed_state = _flow_run(api, flow_run_id)["state"]
            assert killed_state["type"] not in TERMINAL, f"the killed flow run is {killed_state}"
            mock.reset()

            # Retry the same flow run as the UI's "Retry" button does, and let a worker pick it up.
            retried = prefect_http.post(
                f"{api}/flow_runs/{flow_run_id}/set_state",
                json={
                    "state": {"type": "SCHEDULED", "name": "AwaitingRetry", "message": "Retry from the test"},
                    "force": True,
                },
                timeout=10,
            )
            assert retried.status_code in (200, 201), retried.text
            assert retried.json()["status"] == "ACCEPT", retried.text
            with retry_log.open("wb") as output:
                worker = _start_worker(env, output)
                try:
                    worker.wait(timeout=RETRY_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    raise AssertionError(
                        f"the retry's worker did not exit within {RETRY_TIMEOUT_S} s:\n{_tail(retry_log)}"
                    ) from None
            flow_run = _flow_run(api, flow_run_id)
        finally:
            _stop(worker)

    assert flow_run["state"]["type"] == "COMPLETED", f"{flow_run['state']}\n{_tail(retry_log)}"
    assert flow_run["run_count"] >= 2, flow_run["run_count"]
    # The retry resumed the same Assay run rather than starting another.
    assert [p.name for p in (store_path / "runs").glob("run_id=*")] == [f"run_id={run_id}"]
    record = store.read_run(run_id)
    assert record["status"] == "completed"
    assert record["prefect_flow_run_id"] == flow_run_id
    # Only the items not committed before the kill reached the target again...
    assert mock.stats()["requests"] == N_ITEMS - done_before
    # ...and every item is in the store exactly once, each of its two scores exactly once.
    items = store.run_items(run_id)
    scores = store.run_scores(run_id)
    assert items.height == N_ITEMS and items["item_id"].n_unique() == N_ITEMS
    assert scores.height == 2 * N_ITEMS
    assert scores.group_by("item_id", "scorer").len()["len"].max() == 1
    # The shards the kill interrupted were finished by the retry, not redone.
    after = _committed_per_shard(store_path)
    assert all(after[shard] == _shard_size(shard) > before[shard] for shard in partial), (before, after)
