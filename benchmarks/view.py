"""Benchmark of `assay view` (issue 28): its pages over a store holding a 1,000,000-item run.

The store is synthesised through Assay's own writer (`Store.commit_batch`, parts of 50,000
items, two scorers: a binary `exact` and a continuous `judge`), with two 100,000-item runs of one
dataset to compare, which are also the two cells of a matrix (`bench-matrix`: its cell picker,
alone and above their comparison). `assay view` is then started as its own process (uvicorn on
127.0.0.1) and
each page is fetched over HTTP: once cold (the first request), then the median of `--repeat`.
`item+diff` is the item page of a one-item run whose item kept a workspace `diff.patch` of
`--diff-mb` MB (1 by default; read from the store no further than the 200 KB the page shows).
Prints each page's time against its target and the server's peak RSS (VmHWM).

    .venv/bin/python benchmarks/view.py [--items 1000000] [--pairs 100000] [--repeat 3] [--s3] [--fresh] [--unkept] [--diff-mb 1] [--pages item,item+diff]

`--fresh` starts a server of its own for each page and prints each page's peak RSS (a peak is
otherwise the whole session's: the run page's summary hides what the compare page takes).

`--unkept` writes the runs' records without the figures a closing record keeps
(`runs.summary_json`), as an Assay before them did: the run page then summarises the parts.

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
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa

from assay import _schema
from assay.store import Store
from tests.helpers.synthetic_runs import conform, record, write_run

TARGETS = {
    "runs": 1.0,
    "run": 1.0,
    "items": 0.3,
    "item": 0.2,
    "item+diff": 0.2,
    "compare": 2.0,
    "picker": 1.0,
    "cells": 2.0,
}
MATRIX = "bench-matrix"
DIFF_PATH = "run_id=diffs/d0/0/diff.patch"
RSS_TARGET_MB = 500


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(
    root: str, env: dict[str, str], repeat: int, items: int, only: list[str] | None = None
) -> dict[str, tuple[float, float]]:
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
        "item+diff": "/runs/diffs/item?id=d0&trial=0",
        "compare": "/compare?a=cmp-a&b=cmp-b",
        "picker": f"/compare?matrix={MATRIX}",
        # The compare page's pair under the picker: cold only with --fresh (else it is kept).
        "cells": f"/compare?matrix={MATRIX}&a=cmp-a&b=cmp-b",
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
                if only is not None and name not in only:
                    continue
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


def write_diff_run(store: Store, mb: float = 1.0) -> None:
    """A one-item run whose item kept a `diff.patch` of about `mb` MB (files of 1,000 changed
    lines, ~52 KB each), written into the store's artifacts (the bucket's on s3) before its row
    names it."""
    chunks = []
    for f in range(max(1, round(mb * 2**20 / 52_000))):
        chunks.append(f"diff --git a/f{f}.py b/f{f}.py\n--- a/f{f}.py\n+++ b/f{f}.py\n@@ -1,500 +1,500 @@\n")
        chunks += [f"-old line {i} of file {f}, as it was before the agent\n" for i in range(500)]
        chunks += [f"+new line {i} of file {f}, as the agent left it after\n" for i in range(500)]
    store.location.write(f"artifacts/{DIFF_PATH}", "".join(chunks).encode())
    store.write_run("diffs", record("diffs", 1))
    items = pa.table(
        {
            "item_id": ["d0"],
            "item_index": [0],
            "trial": pa.array([0], pa.int32()),
            "input": ['"edit the files"'],
            "output": ['"done"'],
            "outcome": ["completed"],
            "artifacts": [[DIFF_PATH]],
            "retry": pa.array([0], pa.int32()),
        }
    )
    scores = conform(pa.table({"item_id": pa.array([], pa.string())}), _schema.SCORES)
    store.commit_batch("diffs", "part-00000-bench", conform(items, _schema.ITEMS), scores)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--s3", action="store_true", help="the store in a moto S3 server on 127.0.0.1")
    parser.add_argument("--pages", default=",".join(TARGETS), help="the pages measured, comma-separated")
    parser.add_argument("--diff-mb", type=float, default=1.0, help="the size of item+diff's diff.patch")
    parser.add_argument(
        "--unkept", action="store_true", help="records without their summary's figures (an older Assay's)"
    )
    parser.add_argument("--fresh", action="store_true", help="a fresh server per page: each page's peak RSS")
    args = parser.parse_args()
    pages = [p for p in args.pages.split(",") if p in TARGETS]
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
        kept = not args.unkept
        write_run(store, "big", args.items, 0.7, seed=1, kept=kept)
        write_run(store, "cmp-a", args.pairs, 0.70, seed=2, kept=kept)
        write_run(store, "cmp-b", args.pairs, 0.72, seed=2, kept=kept)
        for run_id in ("cmp-a", "cmp-b"):
            # The records' next revision: the two runs as a matrix's cells.
            store.write_run(run_id, record(run_id, args.pairs) | {"matrix_id": MATRIX, "cell": run_id})
        write_diff_run(store, args.diff_mb)
        print(
            f"store {'s3 (moto)' if args.s3 else 'local'}: {args.items:,} + 2 x {args.pairs:,} items "
            f"written in {time.perf_counter() - started:.1f} s"
        )
        try:
            if args.fresh:
                peaks: dict[str, float] = {}
                figures = {}
                for name in pages:
                    alone = measure(root, env, args.repeat, args.items, only=[name])
                    figures[name], peaks[name] = alone[name], alone["rss"][0]
                figures["rss"] = (max(peaks.values()), 0.0)
                print(
                    "peak RSS per page (a fresh server each): "
                    + ", ".join(f"{k} {v:.0f} MB" for k, v in peaks.items())
                )
            else:
                figures = measure(root, env, args.repeat, args.items, only=pages)
        finally:
            if s3 is not None:
                s3.stop()
    for name in pages:
        target = TARGETS[name]
        cold, warm = figures[name]
        verdict = "/".join("ok" if t <= target else "OVER" for t in (cold, warm))
        print(
            f"{name:9} cold {cold * 1000:8.0f} ms   warm {warm * 1000:8.0f} ms   "
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
