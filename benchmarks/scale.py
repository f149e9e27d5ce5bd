"""Scale benchmark: runs sharing one rate-limited account (issue 13).

Two `assay run` processes of 600 items each at concurrency 32, started together against one mock
that allows 3,000 requests a minute in total (token bucket; 429 with `Retry-After` and
`x-ratelimit-*` over it), each reply taking `--latency-ms`. Prints, for the two runs together:
items failed, requests sent and the share answered 429, wall time, and the share of the allowed
rate used (successful requests / (rpm x minutes)), over the whole wall time and over the longer
run's flow (its `wall_ms`: without the processes' start-up, when no call can be made).

    .venv/bin/python benchmarks/scale.py [--items 600] [--runs 2] [--concurrency 32] [--rpm 3000]
                                         [--latency-ms 200] [--share local|dask|cluster|prefect]
                                         [--burst N] [--headers all|refusals] [--assay-src DIR]

`--burst N` lets the account's bucket hold only N requests above its steady rate (default: one
second's worth), and `--headers refusals` has the mock send `x-ratelimit-*` only on its 429s:
the strict provider of issue 25, point 3 — with fast replies, `--latency-ms 20 --burst 10
--headers refusals` (two processes on a 3,000/min account), and the same with `--rpm 1200
--share cluster --items 1000` (two `--dask` runs on one cluster).

`--share dask` starts a Dask scheduler on 127.0.0.1 and gives both runs
`ASSAY_RATE_SHARE=<its address>`: the two processes share one controller (assay/calls/fleet.py)
instead of each running its own. `--share cluster` starts a Dask scheduler and 2 `dask worker`
processes and runs both with `--dask <its address>`: their shards on the workers, which share one
controller through the scheduler without any setting. The issue's case (point 4): `--rpm 1200
--share cluster`. `--share prefect` starts `prefect server start` on 127.0.0.1 and runs both as
its flow runs with `ASSAY_RATE_SHARE=prefect`: they share one window held as a global concurrency
limit of that server (assay/calls/fleet_prefect.py).

On a Dask cluster (`dask scheduler` and `dask worker` processes this script starts on 127.0.0.1):

    .venv/bin/python benchmarks/scale.py dask-cpu [--items 20000]     # CPU-bound scorer, 1 vs 2 workers
    .venv/bin/python benchmarks/scale.py dask-s3 [--items 100000]     # into s3:// (moto): RSS, wall

`--assay-src DIR` runs `assay` from another checkout (PYTHONPATH=DIR), e.g. the code before the
adaptive controller, against the same mock. Targets (issue 13): 0 failed items, <= 5 % of calls
answered 429, >= 90 % of the allowed rate used.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml

from assay.testing.dask_scheduler import dask_scheduler
from assay.testing.mock_openai import MockOpenAIServer

REPO_ROOT = Path(__file__).resolve().parents[1]


def _spec(folder: Path, base_url: str, items: int, concurrency: int) -> Path:
    rows = [{"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(items)]
    (folder / "data.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    spec = {
        "name": "scale",
        "dataset": {"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        "target": {"kind": "openai", "base_url": base_url, "model": "mock-1", "prompt": "{question}"},
        "scorers": [{"kind": "exact_match"}],
        "concurrency": concurrency,
        "fail_on_item_error_rate": 1,
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=600)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rpm", type=float, default=3000)
    parser.add_argument("--latency-ms", type=float, default=200)
    parser.add_argument("--share", choices=("local", "dask", "cluster", "prefect"), default="local")
    parser.add_argument(
        "--burst", type=float, help="requests the account's bucket holds (default: 1 s of rpm)"
    )
    parser.add_argument(
        "--headers", choices=("all", "refusals"), default="all", help="which replies carry x-ratelimit-*"
    )
    parser.add_argument("--assay-src", help="run `assay` from this checkout instead")
    args = parser.parse_args()

    env = {**os.environ, "DO_NOT_TRACK": "1"}
    env.pop("PREFECT_API_URL", None)
    if args.assay_src:
        env["PYTHONPATH"] = args.assay_src
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        mock = stack.enter_context(MockOpenAIServer(latency_ms=args.latency_ms))
        extra: tuple[str, ...] = ()
        if args.share == "dask":
            env["ASSAY_RATE_SHARE"] = stack.enter_context(dask_scheduler(Path(tmp)))
        elif args.share == "cluster":
            from assay.testing.dask_cluster import DaskCluster

            cluster_env = {**env, "PYTHONPATH": args.assay_src or str(REPO_ROOT)}
            cluster = stack.enter_context(DaskCluster(workers=2, env=cluster_env, preload=_PRELOAD))
            extra = ("--dask", cluster.address)
        elif args.share == "prefect":
            from tests.helpers.prefect_server import prefect_env, prefect_server

            home = Path(tmp) / "prefect"
            api_url = stack.enter_context(prefect_server(home))
            env = {**prefect_env(home, api_url), "ASSAY_RATE_SHARE": "prefect"}
            if args.assay_src:
                env["PYTHONPATH"] = args.assay_src
        return _measure(args, env, mock, tmp, extra)


def _measure(
    args: argparse.Namespace, env: dict[str, str], mock: MockOpenAIServer, tmp: str, extra: tuple[str, ...]
) -> int:
    """Start the runs together (each with `extra` arguments), wait for them, print the figures."""
    mock.configure(rate_limits={"rpm": args.rpm, "burst": args.burst, "headers": args.headers})
    spec = _spec(Path(tmp), mock.base_url, args.items, args.concurrency)
    load_before = _load()
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "assay.cli",
                "run",
                str(spec),
                "--store",
                f"{tmp}/store",
                "--json",
                "-q",
                *extra,
            ],
            cwd=args.assay_src or REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(args.runs)
    ]
    outputs = [proc.communicate() for proc in procs]
    wall = time.perf_counter() - started
    stats = mock.stats()
    summaries = []
    for proc, (out, err) in zip(procs, outputs, strict=True):
        if not out.strip():
            print(f"run exited {proc.returncode} with no summary: {err[-2000:]}", file=sys.stderr)
            return 1
        summaries.append(json.loads(out))
    failed = sum(s["items"]["failed"] for s in summaries)
    completed = sum(s["items"]["completed"] for s in summaries)
    by_status = stats["by_status"]
    requests = stats["requests"]
    refused = by_status.get("429", 0)
    ok = by_status.get("200", 0)
    allowed = args.rpm * wall / 60
    # The runs' flows (from planning to their last commit), without the processes' start-up.
    flow_s = max(s["wall_ms"] for s in summaries) / 1000
    allowed_in_flows = args.rpm * flow_s / 60
    print(
        f"{args.runs} runs x {args.items} items, concurrency {args.concurrency}, {args.rpm:g} rpm, "
        f"{args.latency_ms:g} ms latency, burst {args.burst or args.rpm / 60:g}, x-ratelimit-* on "
        f"{'429s only' if args.headers == 'refusals' else 'every reply'}, controllers shared: "
        f"{args.share}; before: {load_before}; after: {_load()}"
        f"{' (assay from ' + args.assay_src + ')' if args.assay_src else ''}"
    )
    print(f"items:     {completed} completed, {failed} failed of {args.runs * args.items}")
    print(f"requests:  {requests}, answered 429: {refused} ({100 * refused / max(requests, 1):.1f} %)")
    print(
        f"wall:      {wall:.1f} s; allowed rate used: {100 * ok / allowed:.0f} % ({ok} ok of {allowed:.0f} allowed)"
    )
    print(
        f"flows:     {flow_s:.1f} s (the longer run's flow); allowed rate used in it: "
        f"{100 * ok / allowed_in_flows:.0f} %"
    )
    for i, summary in enumerate(summaries):
        rate = summary.get("rate_control") or {}
        print(
            f"run {i}:     rate control ({rate.get('share')}, {rate.get('members') or 1} member(s)): "
            f"pace learned {rate.get('learned_rpm')} rpm (announced {rate.get('announced_rpm')}), "
            f"window {rate.get('limit')} (peak {rate.get('peak')}), {rate.get('rate_limited')} of "
            f"{rate.get('responses')} answers 429, paused {rate.get('paused_s')} s"
        )
    return 0


# -- on a Dask cluster (issue 13, point 2): `scale.py dask-cpu` and `scale.py dask-s3` ------------------

_CPU_SCORER = """
import time


def burn(output, expected):
    # ~2 ms of this thread's CPU: a scorer that computes (parsing, embedding, a metric), not waits.
    until = time.thread_time() + 0.002
    while time.thread_time() < until:
        pass
    return output == expected
"""


# What a worker imports for its first shard, imported as it starts (as docs/scale.md advises).
_PRELOAD = ("assay.orchestrate.worker",)


def _echo_spec(folder: Path, items: int, scorer: dict, concurrency: int = 32) -> Path:
    """`items` items through an instant python target (the question back), scored by `scorer`."""
    rows = [{"id": f"q{i}", "input": f"q{i}", "expected": f"q{i}"} for i in range(items)]
    (folder / "data.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    spec = {
        "name": "dask-scale",
        "dataset": {"path": "data.jsonl", "id": "id"},
        "target": {"kind": "python", "function": "tests.helpers.commit_signals:answer"},
        "scorers": [scorer],
        "concurrency": concurrency,
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _peak_rss_mb(pid: int) -> float:
    """A process's peak resident set so far (VmHWM), in MB; 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    line = next((line for line in status.splitlines() if line.startswith("VmHWM:")), None)
    return int(line.split()[1]) / 1024 if line else 0.0  # a process that exited has none


def _assay_run(spec: Path, store: str, env: dict[str, str], *extra: str) -> tuple[dict, float, float]:
    """`assay run` in a subprocess: its summary, wall seconds and peak RSS (MB, sampled)."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "assay.cli", "run", str(spec), "--store", store, "--json", "-q", *extra],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, _peak_rss_mb(proc.pid))
        time.sleep(0.1)  # sampling the high-water mark: it only grows, so the last sample is near the peak
    out, err = proc.communicate()
    wall = time.perf_counter() - started
    if proc.returncode != 0 or not out.strip():
        raise SystemExit(f"assay run exited {proc.returncode}: {err[-3000:]}")
    return json.loads(out), wall, peak


def _cpu_s(pid: int) -> float:
    """A live process's CPU time so far (user + system), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min) / {five:.1f} (5 min) on {os.cpu_count()} cores"


def dask_cpu(argv: list[str]) -> int:
    """A CPU-bound scorer (~2 ms CPU an item) over `--items` items: items/s on 1 worker process and
    on 2, each a `dask worker` with one thread; the driver apart. Target: 2 workers >= 1.6x."""
    from assay.testing.dask_cluster import DaskCluster

    parser = argparse.ArgumentParser(prog="scale.py dask-cpu")
    parser.add_argument("--items", type=int, default=20_000)
    args = parser.parse_args(argv)
    env = {**os.environ, "DO_NOT_TRACK": "1", "PYTHONPATH": str(REPO_ROOT), "ASSAY_TEST_DELAY_S": "0"}
    env.pop("PREFECT_API_URL", None)
    rates = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "cpu_scorer.py").write_text(_CPU_SCORER)
        spec = _echo_spec(
            folder, args.items, {"kind": "user_code", "name": "cpu", "function": "cpu_scorer:burn"}
        )
        print(f"before: {_load()}")
        for workers in (1, 2):
            with DaskCluster(workers=workers, env=env, preload=_PRELOAD) as cluster:
                before = [_cpu_s(worker.pid) for worker in cluster.workers]
                summary, wall, _ = _assay_run(spec, f"{tmp}/store-{workers}", env, "--dask", cluster.address)
                cpu = [_cpu_s(worker.pid) - b for worker, b in zip(cluster.workers, before, strict=True)]
            done = summary["items"]["completed"]
            rates[workers] = done / (summary["wall_ms"] / 1000)
            print(
                f"{workers} worker(s): {done} items in {summary['wall_ms'] / 1000:.1f} s of run "
                f"({wall:.1f} s with start-up): {rates[workers]:.0f} items/s; workers' CPU "
                f"{', '.join(f'{c:.1f}' for c in cpu)} s; {_load()}"
            )
    print(f"speed-up 2 vs 1 workers: {rates[2] / rates[1]:.2f}x (target >= 1.6x)")
    return 0


def dask_s3(argv: list[str]) -> int:
    """`--items` items through Dask (`--workers` worker processes) into s3:// (moto, in this
    process), against the same run in one local process into the same server: wall time, the
    driver's and each worker's peak RSS. Targets: driver < 400 MB, each worker < 500 MB, the Dask
    run <= 2x the local one."""
    from assay.testing.dask_cluster import DaskCluster
    from assay.testing.s3 import S3Server

    parser = argparse.ArgumentParser(prog="scale.py dask-s3")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    with S3Server(bucket="scale") as s3, tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            **s3.env,
            "DO_NOT_TRACK": "1",
            "PYTHONPATH": str(REPO_ROOT),
            "ASSAY_TEST_DELAY_S": "0",
        }
        env.pop("PREFECT_API_URL", None)
        spec = _echo_spec(Path(tmp), args.items, {"kind": "exact_match"})
        print(f"before: {_load()}")
        local, local_wall, local_rss = _assay_run(spec, s3.url("local"), env)
        print(
            f"one local process: {local['items']['completed']} items in {local_wall:.1f} s "
            f"({local['wall_ms'] / 1000:.1f} s of run), peak RSS {local_rss:.0f} MB; {_load()}"
        )
        with DaskCluster(workers=args.workers, env=env, preload=_PRELOAD) as cluster:
            on_dask, dask_wall, driver_rss = _assay_run(spec, s3.url("dask"), env, "--dask", cluster.address)
            workers_rss = [_peak_rss_mb(worker.pid) for worker in cluster.workers]
        print(
            f"dask, {args.workers} workers: {on_dask['items']['completed']} items in {dask_wall:.1f} s "
            f"({on_dask['wall_ms'] / 1000:.1f} s of run); driver peak RSS {driver_rss:.0f} MB, workers "
            f"{', '.join(f'{r:.0f}' for r in workers_rss)} MB; {_load()}"
        )
        print(
            f"dask / local wall: {dask_wall / local_wall:.2f}x (target <= 2x); driver < 400 MB: "
            f"{driver_rss < 400}; each worker < 500 MB: {all(r < 500 for r in workers_rss)}"
        )
    return 0


if __name__ == "__main__":
    cases = {"dask-cpu": dask_cpu, "dask-s3": dask_s3}
    if len(sys.argv) > 1 and sys.argv[1] in cases:
        raise SystemExit(cases[sys.argv[1]](sys.argv[2:]))
    raise SystemExit(main())
