"""A run's shards on a real Dask cluster: `dask scheduler` and `dask worker` processes on
127.0.0.1, the store on a real S3 API server (moto) or a local folder.

The same rows and summary as a local run; a worker SIGKILLed mid-shard (its shard runs again on
the other worker) and a driver SIGKILLed mid-run (`assay resume --dask`) both end with every item
and score exactly once; a bad address is bad input, with nothing written. docs/scale.md.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from assay.store import Store
from assay.testing.dask_cluster import DaskCluster
from assay.testing.s3 import S3Server
from tests.conftest import REPO, openai_spec, paced_spec, run_assay, start_assay, write_jsonl, write_spec
from tests.helpers.cli import assay_process_json

pytestmark = [pytest.mark.slow]  # processes, a cluster, seconds each


def _cluster(s3: S3Server, worker_env: dict[str, str] | None = None) -> DaskCluster:
    """Two workers that import this checkout (the tests' python target: 100 ms an item, 4 at a
    time) and reach the bucket."""
    env = {**s3.env, "PYTHONPATH": str(REPO), "DO_NOT_TRACK": "1", "ASSAY_TEST_DELAY_S": "0.1"}
    return DaskCluster(workers=2, env=env, worker_env=worker_env)


@pytest.fixture(scope="module")
def cluster(s3_server: S3Server) -> Iterator[DaskCluster]:
    with _cluster(s3_server) as running:
        yield running


def _exactly_once(store: Store, run_id: str, n: int, scorers: int) -> pl.DataFrame:
    items, scores = store.run_items(run_id), store.run_scores(run_id)
    assert items.height == n and items["item_id"].n_unique() == n
    assert scores.height == n * scorers and scores.select("item_id", "scorer").n_unique() == n * scorers
    # Every part the bucket holds is a committed batch's: nothing stray for an analyst's glob.
    assert store.part_names(run_id, "scores") == store.part_names(run_id, "items")
    raw = pl.read_parquet(
        f"{store.root}/items/run_id={run_id}/*.parquet", storage_options=store.location.storage_options
    )
    assert raw.height == n
    return items


def _run_id(store: Store) -> str:
    (run_id,) = store.runs().collect()["run_id"].to_list()
    return run_id


def _executions(store: Store, run_id: str) -> dict[str, list[str]]:
    """Each shard's execution records (`assay/store/executions.py`)."""
    folder = f"leases/run_id={run_id}/shards"
    return {shard: store.location.names(f"{folder}/{shard}") for shard in store.location.names(folder)}


def test_a_run_through_dask_on_s3_has_the_rows_and_summary_of_a_local_run(
    s3, cluster, tmp_path, mock, request
):
    spec = openai_spec(tmp_path, mock.base_url, n=120)
    local_url, dask_url = s3.url(f"{request.node.name}-local"), s3.url(f"{request.node.name}-dask")
    a = assay_process_json("run", str(spec), "--store", local_url)
    b = assay_process_json("run", str(spec), "--store", dask_url, "--dask", cluster.address)
    for key in ("status", "planned", "items", "failures", "item_error_rate", "gate_passed", "scorers"):
        assert a[key] == b[key], key

    def rows(url: str) -> tuple[pl.DataFrame, pl.DataFrame]:
        store = Store(url)
        run_id = _run_id(store)
        items = _exactly_once(store, run_id, 120, 2)
        scores = store.run_scores(run_id)
        return (
            items.select("item_id", "trial", "outcome", "output", "tokens_input", "tokens_output").sort(
                "item_id"
            ),
            scores.select("item_id", "scorer", "score").sort("item_id", "scorer"),
        )

    local_rows, dask_rows = rows(local_url), rows(dask_url)
    assert local_rows[0].equals(dask_rows[0]) and local_rows[1].equals(dask_rows[1])
    # Cut for the cluster: many more shards than its 2 worker threads, each a task of its own.
    store = Store(dask_url)
    assert len(_executions(store, _run_id(store))) >= 4


def test_a_worker_killed_mid_shard_has_its_shard_run_elsewhere_exactly_once(s3, tmp_path, request):
    url = s3.url(request.node.name)
    spec = paced_spec(tmp_path, 400)
    # The first worker SIGKILLs itself inside its second commit, between the PUTs of the batch's
    # scores part and its items part (the commit marker): a shard half done, an orphan scores part.
    with _cluster(s3, worker_env={"ASSAY_FAULT_KILL": "publish:items:2"}) as dying:
        ran = run_assay("run", str(spec), "--store", url, "--json", "--dask", dying.address, timeout=300)
        assert dying.workers[0].wait(timeout=60) == -signal.SIGKILL
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["items"]["completed"] == 400
    store = Store(url)
    run_id = _run_id(store)
    _exactly_once(store, run_id, 400, 1)
    # The killed worker's shard was begun again: a second execution.
    assert any(len(records) > 1 for records in _executions(store, run_id).values())


def test_a_driver_killed_mid_run_is_resumed_on_the_cluster_exactly_once(s3, cluster, tmp_path, request):
    url = s3.url(request.node.name)
    spec = paced_spec(tmp_path, 400)
    driver = start_assay("run", str(spec), "--store", url, "--quiet", "--dask", cluster.address)
    store = Store(url)
    deadline = time.monotonic() + 120
    # Killed once the workers committed a first batch (polling the bucket: the event is there).
    while not store.location.names("items"):
        assert time.monotonic() < deadline and driver.poll() is None, driver.communicate()
        time.sleep(0.05)
    driver.send_signal(signal.SIGKILL)
    driver.wait(timeout=30)
    run_id = _run_id(store)
    assert store.run_items(run_id).height < 400
    resumed = assay_process_json("resume", run_id, "--store", url, "--dask", cluster.address, timeout=300)
    assert resumed["items"]["completed"] == 400
    _exactly_once(store, run_id, 400, 1)


def test_an_address_where_no_scheduler_answers_is_bad_input_and_writes_nothing(tmp_path, mock):
    spec = openai_spec(tmp_path, mock.base_url, n=5)
    store = tmp_path / "store"
    # A port just closed: nothing listens there.
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = run_assay(
        "run",
        str(spec),
        "--store",
        str(store),
        "--dask",
        f"tcp://127.0.0.1:{port}",
        env={"ASSAY_DASK_TIMEOUT": "3"},
    )
    assert done.returncode == 2, done.stderr
    assert f"--dask tcp://127.0.0.1:{port}" in done.stderr and "dask scheduler" in done.stderr
    assert not store.exists()
    bad = run_assay("run", str(spec), "--store", str(store), env={"ASSAY_DASK": "nowhere://x"})
    assert bad.returncode == 2 and "ASSAY_DASK" not in bad.stdout and "--dask nowhere://x" in bad.stderr
    assert not store.exists()


def test_a_budget_on_dask_is_the_runs_across_its_workers(cluster, tmp_path, mock):
    """Both workers admit calls against the run's spend, which the scheduler keeps: the run stops
    at its budget as a local run does — not at twice it, as a budget per worker would — and its
    record stores the run's spend, what its rows add up to."""
    mock.configure(latency_ms=100)
    prices = {"mock-1": {"input": 10.0, "output": 30.0}}
    spec = openai_spec(tmp_path, mock.base_url, n=200, budget="$0.004", prices=prices)
    store = tmp_path / "store"
    done = assay_process_json("run", str(spec), "--store", str(store), "-q", "--dask", cluster.address)
    run_id = done["run_id"]
    items = Store(store).run_items(run_id)
    assert items.height == 200 and items["item_id"].n_unique() == 200
    outcomes = dict(items["outcome"].value_counts().iter_rows())
    completed, calls = outcomes["completed"], mock.stats()["requests"]
    assert set(outcomes) <= {"completed", "budget_skipped", "budget_interrupted"}, outcomes
    spent = items["cost_usd"].sum()
    per_call = spent / calls
    # The limit is 20 calls. Past it: at most the calls in flight on both workers (4 each) and
    # as many started while a worker's last report travelled (a call takes 100 ms, a report ms).
    assert 0.004 <= spent <= 0.004 + 16 * per_call, (spent, per_call, outcomes)
    assert calls == completed < 40, "a budget per worker would have let each spend it"
    record = Store(store).read_run(run_id)
    assert record["budget_status"] == "closed" and record["budget_closed_by"] in ("case", "operation")
    assert record["budget_spent_usd"] == pytest.approx(spent)
    assert record["n_budget_skipped"] == outcomes.get("budget_skipped", 0)


SEQUENTIAL_SOLVER = """
import hashlib, pathlib, time
LOG = pathlib.Path(__file__).with_name("calls.log")

def _u(x):
    return int(hashlib.sha256(x.encode()).hexdigest()[:8], 16) / 2**32

def baseline(x):
    return "yes" if _u(x) < 0.7 else "no"

def worse(x):  # passes a subset of the baseline's items: 20 points lower; 5 ms an item
    time.sleep(0.005)
    with LOG.open("a") as log:
        log.write(x + "\\n")
    return "yes" if _u(x) < 0.5 else "no"
"""


def _sequential_spec(folder: Path, function: str, n: int) -> Path:
    sub = folder / function
    sub.mkdir()
    (sub / f"seq_{function}.py").write_text(SEQUENTIAL_SOLVER)
    write_jsonl(sub / "d.jsonl", [{"id": f"i{k}", "input": f"i{k}", "expected": "yes"} for k in range(n)])
    return write_spec(
        sub,
        name="seq",
        dataset={"path": "d.jsonl", "id": "id"},
        target={"kind": "python", "function": f"seq_{function}:{function}"},
        scorers=[{"kind": "exact_match", "name": "exact"}],
        concurrency=2,
        seed=5,
    )


def test_a_sequential_compare_on_dask_stops_every_worker_once_it_decides(cluster, tmp_path):
    """`--compare-to` with `--dask`: the driver feeds the confidence sequence from each shard's
    report and, once it decides, tells the workers through the scheduler; they admit no more
    items — the run stops early with the verdict a local run would give, and `assay compare`
    reads the same from the stored rows."""
    n = 2000
    store = tmp_path / "store"
    assert (
        run_assay(
            "run", str(_sequential_spec(tmp_path, "baseline", n)), "--store", str(store), "-q"
        ).returncode
        == 0
    )
    (base_id,) = Store(store).runs().collect()["run_id"].to_list()
    spec = _sequential_spec(tmp_path, "worse", n)
    done = run_assay(
        "run",
        str(spec),
        "--store",
        str(store),
        "--json",
        "-q",
        "--compare-to",
        base_id,
        "--dask",
        cluster.address,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    run_id = json.loads(done.stdout)["run_id"]
    record = Store(store).read_run(run_id)
    assert record["status"] == "stopped_early" and record["compare_verdict"] == "regressed", record
    executed = (spec.parent / "calls.log").read_text().split()
    assert record["compare_items"] <= len(executed) < n / 2, (record["compare_items"], len(executed))
    assert record["n_completed"] == len(executed) and record["n_cancelled"] == n - len(executed)
    compared = run_assay("compare", base_id, "--candidate", run_id, "--store", str(store), "--json")
    (row,) = json.loads(compared.stdout)["scorers"]
    assert row["verdict"] == "regressed" and row["sequential_pairs"] == record["compare_items"]
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((record["compare_low"], record["compare_high"]))
    # Resumed on the cluster, it stays decided: no item runs again, the record keeps its verdict.
    again = run_assay("resume", run_id, "--store", str(store), "--json", "-q", "--dask", cluster.address)
    assert again.returncode == 0 and json.loads(again.stdout)["status"] == "stopped_early", again.stderr[
        -3000:
    ]
    assert (spec.parent / "calls.log").read_text().split() == executed
    assert Store(store).read_run(run_id)["compare_items"] == record["compare_items"]


def test_the_embedded_path_does_not_import_dask(tmp_path, mock):
    spec = openai_spec(tmp_path, mock.base_url, n=3)
    probe = (
        "import sys, json; from assay.cli import main; code = main(sys.argv[1:]); "
        "print(json.dumps([code, sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed'))]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, "run", str(spec), "--store", str(tmp_path / "s"), "--quiet"],
        capture_output=True,
        text=True,
        cwd=Path(REPO),
        check=False,
        timeout=120,
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [0, []], done.stderr


@pytest.mark.prefect
def test_under_prefect_each_shard_is_a_task_run_on_the_cluster(s3, tmp_path, request):
    import httpx

    from tests.helpers.prefect_server import prefect_env, prefect_server

    url = s3.url(request.node.name)
    spec = paced_spec(tmp_path, 200)
    # A budget, kept by the scheduler for the shards' task runs too (the python target spends
    # nothing), and a sequential compare with a baseline run first, fed from the shards' reports
    # (`stop: never`: every item runs, the verdict is recorded).
    baseline = assay_process_json("run", str(spec), "--store", url, "-q", env=s3.env)
    base_id = baseline["run_id"]
    spec.write_text(spec.read_text() + f"budget: $5\ncompare_to: {{baseline: {base_id}, stop: never}}\n")
    home = tmp_path / "prefect-home"
    with prefect_server(home) as api:
        env = {**prefect_env(home, api), **s3.env}
        workers_env = {**env, "PYTHONPATH": str(REPO), "ASSAY_TEST_DELAY_S": "0.02"}
        with DaskCluster(workers=2, env=workers_env) as cluster:
            ran = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "assay.cli",
                    "run",
                    str(spec),
                    "--store",
                    url,
                    "--json",
                    "--dask",
                    cluster.address,
                ],
                capture_output=True,
                text=True,
                cwd=REPO,
                env=env,
                check=False,
                timeout=300,
            )
            # Its end closed the run's target in every worker (nothing of it stays open there).
            from distributed import Client

            with Client(cluster.address, timeout=60) as client:
                open_runs = client.run(
                    lambda: len(__import__("assay.orchestrate.worker", fromlist=["_"])._runs)
                )
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert set(open_runs.values()) == {0}, open_runs
        summary = json.loads(ran.stdout)
        assert summary["items"]["completed"] == 200
        store = Store(url)
        run_id = summary["run_id"]
        flow_run_id = store.read_run(run_id)["prefect_flow_run_id"]
        task_runs = httpx.post(
            f"{api}/task_runs/filter", json={"flow_runs": {"id": {"any_": [flow_run_id]}}}, timeout=30
        ).json()
    _exactly_once(store, run_id, 200, 1)
    record = store.read_run(run_id)
    assert (record["budget_limit_usd"], record["budget_spent_usd"], record["budget_status"]) == (
        5.0,
        0.0,
        "open",
    )
    assert record["compare_baseline"] == base_id and record["compare_items"] == 200
    assert record["compare_delta"] == 0.0 and record["status"] == "completed"
    shards = _executions(store, run_id)
    # One `run-shard` task run per shard, each completed on a Dask worker.
    runs = [t for t in task_runs if t["name"].startswith("shard-")]
    assert len(runs) == len(shards) >= 4 and {t["state_type"] for t in runs} == {"COMPLETED"}


def _two_dask_runs(cluster: DaskCluster, spec: Path, tmp_path: Path) -> list[dict]:
    """Two `assay run --dask` drivers started together on `spec`; their summaries."""
    drivers = [
        start_assay(
            "run",
            str(spec),
            "--store",
            str(tmp_path / f"store{i}"),
            "--json",
            "-q",
            "--dask",
            cluster.address,
        )
        for i in range(2)
    ]
    outputs = [driver.communicate(timeout=300) for driver in drivers]
    for driver, (_, err) in zip(drivers, outputs, strict=True):
        assert driver.returncode == 0, err[-3000:]
    return [json.loads(out) for out, _ in outputs]


def test_two_dask_runs_on_an_account_with_a_small_burst_refuse_few_calls(cluster, tmp_path):
    """Two `--dask` runs at concurrency 16 sharing the scheduler's controller, against an account
    allowing 1,200 calls a minute but only 10 at once, which says its limit only on its 429s, at
    20 ms a reply: a shared window alone refused half of the calls (issue 25); with the pace the
    fleet learns, divided among the workers as the window is, few."""
    from assay.testing.mock_openai import MockOpenAIServer

    with MockOpenAIServer(latency_ms=20) as mock:
        mock.configure(rate_limits={"rpm": 1200, "burst": 10, "headers": "refusals"})
        spec = openai_spec(tmp_path, mock.base_url, n=150, concurrency=16, fail_on_item_error_rate=1)
        summaries = _two_dask_runs(cluster, spec, tmp_path)
        stats = mock.stats()
    assert [s["items"]["completed"] for s in summaries] == [150, 150]
    refused = stats["by_status"].get("429", 0)
    assert refused <= 0.2 * stats["requests"], stats["by_status"]
    fleet = summaries[0]["rate_control"]
    assert fleet["share"] == "dask" and fleet["announced_rpm"] == 1200 and fleet["learned_rpm"] <= 1200


def test_two_dask_runs_share_one_window_through_the_clusters_scheduler(cluster, tmp_path):
    """Two `--dask` runs at once, their shards on both workers, each at concurrency 8: the
    workers share one window per (endpoint, model) through the cluster's scheduler, so the two
    runs together never have more than 8 calls in flight at the server (per worker, 16 or 32)."""
    from assay.testing.mock_openai import MockOpenAIServer

    with MockOpenAIServer(latency_ms=200) as mock:
        spec = openai_spec(tmp_path, mock.base_url, n=160, concurrency=8, fail_on_item_error_rate=1)
        summaries = _two_dask_runs(cluster, spec, tmp_path)
        stats = mock.stats()
    assert [s["items"]["completed"] for s in summaries] == [160, 160]
    assert stats["by_status"] == {"200": 320}
    assert stats["peak_in_flight"] <= 8, stats
    # Each run's record carries the fleet's controller, as the scheduler hosted it: the calls of
    # both runs, from both workers.
    for i, summary in enumerate(summaries):
        stored = json.loads(Store(tmp_path / f"store{i}").read_run(summary["run_id"])["rate_control"])
        assert stored["share"] == "dask" and stored["members"] == 2 and stored["ceiling"] == 8
        assert stored["responses"] >= 160 and stored["history"]["rows"]
