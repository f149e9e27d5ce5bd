"""Leases with real processes: a run driven by one process is refused to another; a dead or
expired holder's lease is taken over."""

from __future__ import annotations

import json
import signal
import time

from assay.store import Store
from tests.conftest import only_run_id, openai_spec, run_assay, start_run_until_committed


def test_a_second_process_is_refused_then_takes_over_once_the_holder_dies(tmp_path, mock):
    mock.configure(latency_ms=40)
    spec = openai_spec(tmp_path, mock.base_url, n=1000, concurrency=4)
    store = tmp_path / "store"
    holder = start_run_until_committed(spec, store)
    run_id = only_run_id(store)
    try:
        refused = run_assay("resume", run_id, "--store", str(store))
        assert refused.returncode == 2
        assert f"run {run_id} is held by" in refused.stderr and f":{holder.pid} since" in refused.stderr
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The holder died on this host: its lease is taken over at once, no TTL to wait out.
    resumed = run_assay("resume", run_id, "--store", str(store), "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["items"]["completed"] == 1000
    assert not (store / "leases" / f"{run_id}.json").exists(), "released when the run finished"


def test_a_lease_from_another_host_is_refused_until_it_expires(tmp_path, mock):
    spec = openai_spec(tmp_path, mock.base_url, n=3)
    store = tmp_path / "store"
    first = run_assay("run", str(spec), "--store", str(store), "--json")
    run_id = json.loads(first.stdout)["run_id"]
    lease = store / "leases" / f"{run_id}.json"
    held = {"host": "elsewhere", "pid": 1, "token": "t", "since": "2026-11-29T00:00:00", "ttl": 30}
    lease.write_text(json.dumps({**held, "renewed": time.time()}))
    refused = run_assay("resume", run_id, "--store", str(store))
    assert refused.returncode == 2 and "held by elsewhere:1" in refused.stderr
    lease.write_text(json.dumps({**held, "renewed": time.time() - 31}))
    taken = run_assay("resume", run_id, "--store", str(store))
    assert taken.returncode == 0, taken.stderr
    assert Store(store).read_run(run_id)["status"] == "completed"
