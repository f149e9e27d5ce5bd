"""Benchmark of `assay view` (issue 28): its pages over a store holding a 1,000,000-item run.

The store is synthesised through Assay's own writer (`Store.commit_batch`, parts of 50,000
items, two scorers: a binary `exact` and a continuous `judge`), with two 100,000-item runs of one
dataset to compare. `assay view` is then started as its own process (uvicorn on 127.0.0.1) and
each page is fetched over HTTP: once cold (the first request), then the median of `--repeat`.
Prints each page's time against its target and the server's peak RSS (VmHWM).

    .venv/bin/python benchmarks/view.py [--items 1000000] [--pairs 100000] [--repeat 3] [--s3]

`--s3` writes the store into a moto S3 server on 127.0.0.1 (assay/testing/s3.py) instead of a
local folder: what the object store's latency adds. Quote figures with the load average printed.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assay import _schema
from assay.store import Store

PART = 50_000
TARGETS = {"runs": 1.0, "run": 1.0, "items": 0.3, "item": 0.2, "compare": 2.0}
RSS_TARGET_MB = 500


def record(name: str, n: int) -> dict:
    now = datetime.now(UTC)
    return {
        "kind": "run",
        "name": name,
        "status": "completed",
        "created_at": now,
        "finished_at": now,
        "spec_hash": "bench",
        "dataset_hash": "bench",
        "target_hash": name,
        "scorers_hash": "bench",
        "target_kind": "python",
        "model": f"{name}-model",
        "trials": 1,
        "seed": 0,
        "tags": ["bench"],
        "n_items": n,
        "n_planned": n,
        "n_completed": n,
        "n_failed": 0,
        "fail_on_item_error_rate": 1.0,
        "assay_version": "bench",
    }


def write_run(store: Store, run_id: str, n: int, skill: float, seed: int) -> None:
    """A finished run of `n` items: ~3 % failed, the rest scored by `exact` (pass with chance
    `skill`) and `judge` (uniform)."""
    rng = np.random.default_rng(seed)
    store.write_run(run_id, record(run_id, n))
    topics = np.array(['{"topic": "maths"}', '{"topic": "words"}', '{"topic": "code"}'])
    for start in range(0, n, PART):
        index = np.arange(start, min(n, start + PART))
        ids = [f"q{i}" for i in index]
        failed = rng.random(index.size) < 0.03
        passed = rng.random(index.size) < skill
        outputs = np.where(passed, "the answer is right", "the answer is wrong, sadly")
        items = pa.table(
            {
                "item_id": ids,
                "item_index": index,
                "trial": np.zeros(index.size, dtype=np.int32),
                "input": [f'"What is {i} + {i}?"' for i in index],
                "expected": [f'"{2 * i}"' for i in index],
                "annotations": topics[index % 3],
                "output": [f'"{o}"' for o in outputs],
                "output_text": outputs,
                "outcome": np.where(failed, "failed", "completed"),
                "error": np.where(failed, "HTTP 500 from the model", None),
                "duration_ms": rng.gamma(2.0, 150.0, index.size),
                "cost_usd": rng.random(index.size) * 1e-4,
                "operations": np.ones(index.size, dtype=np.int64),
                "retry": np.zeros(index.size, dtype=np.int32),
            }
        )
        items = _conform(items, _schema.ITEMS)
        ok = ~failed
        scored = index[ok]
        scores = pa.table(
            {
                "item_id": [f"q{i}" for i in scored] * 2,
                "item_index": np.concatenate([scored, scored]),
                "trial": np.zeros(2 * scored.size, dtype=np.int32),
                "kind": ["score"] * (2 * scored.size),
                "scorer": ["exact"] * scored.size + ["judge"] * scored.size,
                "scorer_kind": ["deterministic"] * scored.size + ["llm_judge"] * scored.size,
                "score": np.concatenate([passed[ok].astype(float), rng.random(scored.size)]),
                "outcome": ["scored"] * (2 * scored.size),
                "explanation": [None] * scored.size + ["a judge's reason"] * scored.size,
            }
        )
        scores = _conform(scores, _schema.SCORES)
        scores = scores.set_column(scores.schema.get_field_index("value"), "value", scores.column("score"))
        store.commit_batch(run_id, f"part-{start // PART:05d}-bench", items, scores)


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with every column of `schema`, in its order and types (absent ones null)."""
    columns = [
        table.column(f.name).cast(f.type)
        if f.name in table.column_names
        else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(root: str, env: dict[str, str], repeat: int, items: int) -> dict[str, tuple[float, float]]:
    """Each page's (cold, warm median) seconds from a fresh `assay view` over `root`; the
    server's peak RSS under `rss`."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "assay.cli", "view", "--store", root, "--port", str(port)],
        env={**os.environ, **env, "DO_NOT_TRACK": "1"},
    )
    base = f"http://127.0.0.1:{port}"
    pages = {
        "runs": "/",
        "run": "/runs/big",
        "items": "/runs/big/items?outcome=completed&scorer=judge&low=0.2&high=0.6",
        "item": f"/runs/big/item?id=q{items * 2 // 3 + 1}&trial=0",
        "compare": "/compare?a=cmp-a&b=cmp-b",
    }
    out: dict[str, tuple[float, float]] = {}
    try:
        with httpx.Client(base_url=base, timeout=600) as http:
            deadline = time.monotonic() + 60
            while True:
                try:
                    http.get("/static/view.css")
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise
                    time.sleep(0.1)
            for name, path in pages.items():
                times = []
                for _ in range(repeat + 1):
                    started = time.perf_counter()
                    answer = http.get(path)
                    times.append(time.perf_counter() - started)
                    assert answer.status_code == 200, (path, answer.text[:500])
                out[name] = (times[0], statistics.median(times[1:]))
        out["rss"] = (_hwm_mb(server.pid), 0.0)
    finally:
        server.terminate()
        server.wait(timeout=10)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--s3", action="store_true", help="the store in a moto S3 server on 127.0.0.1")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as folder:
        env: dict[str, str] = {}
        s3 = None
        if args.s3:
            from assay.testing.s3 import S3Server

            s3 = S3Server().start()
            env = s3.env
            os.environ.update(env)
            root = s3.url("bench")
        else:
            root = str(Path(folder) / "store")
        started = time.perf_counter()
        store = Store(root)
        write_run(store, "big", args.items, 0.7, seed=1)
        write_run(store, "cmp-a", args.pairs, 0.70, seed=2)
        write_run(store, "cmp-b", args.pairs, 0.72, seed=2)
        print(
            f"store {'s3 (moto)' if args.s3 else 'local'}: {args.items:,} + 2 x {args.pairs:,} items "
            f"written in {time.perf_counter() - started:.1f} s"
        )
        try:
            figures = measure(root, env, args.repeat, args.items)
        finally:
            if s3 is not None:
                s3.stop()
    for name, target in TARGETS.items():
        cold, warm = figures[name]
        verdict = "/".join("ok" if t <= target else "OVER" for t in (cold, warm))
        print(
            f"{name:8} cold {cold * 1000:8.0f} ms   warm {warm * 1000:8.0f} ms   "
            f"target {target * 1000:6.0f} ms  cold/warm {verdict}"
        )
    rss = figures["rss"][0]
    print(
        f"server peak RSS {rss:.0f} MB (target {RSS_TARGET_MB} MB) {'ok' if rss <= RSS_TARGET_MB else 'OVER'}"
    )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
