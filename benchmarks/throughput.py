"""Throughput benchmark: 10,000 items through `assay run` against the mock at 20 ms latency.

In the same run it times a bare aiohttp loop making the same 10,000 calls at the same concurrency
against the same mock: on 2 shared cores that loop, not items x latency / concurrency, is the
practical limit. Prints wall seconds for the flow and for the whole `assay` process, items/s, the
ratio flow / bare loop, and the process's peak RSS.

    .venv/bin/python benchmarks/throughput.py [--items 10000] [--concurrency 100] [--latency-ms 20]

Targets (issue 2): flow <= 2x the bare loop; whole process <= flow + 5 s; peak RSS < 500 MB.
With PREFECT_API_URL set, `assay run` is a real Prefect flow run and so is what gets measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO_ROOT, bare_aiohttp_loop, start_mock_subprocess, stop_mock_subprocess


def write_eval(folder: Path, base_url: str, items: int, concurrency: int) -> Path:
    with (folder / "data.jsonl").open("w") as handle:
        for i in range(items):
            handle.write(
                json.dumps({"id": f"i{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)}) + "\n"
            )
    spec = folder / "spec.yaml"
    spec.write_text(
        f"""name: throughput
dataset: {{path: data.jsonl, id: id, input: question, expected: answer}}
target: {{kind: openai, base_url: "{base_url}", model: mock-1, prompt: "{{question}}"}}
scorers:
  - {{kind: exact_match, name: exact}}
  - {{kind: regex, name: digits, pattern: "\\\\d+"}}
concurrency: {concurrency}
fail_on_item_error_rate: 1
"""
    )
    return spec


def run_assay(spec: Path, store: Path) -> tuple[float, dict, int]:
    """Run `assay run` in a child process; returns (wall s, summary, peak RSS in KiB)."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "assay.cli", "run", str(spec), "--store", str(store), "--json"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "DO_NOT_TRACK": "1"},
    )
    stdout, stderr = process.communicate()
    wall = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"assay run failed ({process.returncode}): {stderr.decode()[-2000:]}")
    # wait4 would be exact per child, but communicate() already reaped it; RUSAGE_CHILDREN holds
    # the largest waited-for child, and the mock (still running) is not yet among them.
    import resource

    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, json.loads(stdout), peak_kib


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    args = parser.parse_args()

    mock, base_url = start_mock_subprocess(args.latency_ms)
    try:
        bare = asyncio.run(bare_aiohttp_loop(base_url, args.items, args.concurrency))
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            spec = write_eval(folder, base_url, args.items, args.concurrency)
            process_s, summary, peak_kib = run_assay(spec, folder / "store")
    finally:
        stop_mock_subprocess(mock)

    flow_s = summary["wall_ms"] / 1000
    ideal = args.items * args.latency_ms / 1000 / args.concurrency
    mode = "prefect flow run" if os.environ.get("PREFECT_API_URL") else "embedded (no Prefect API)"
    completed = summary["items"]["completed"]
    print(
        f"items: {args.items} at concurrency {args.concurrency}, mock latency {args.latency_ms:g} ms ({mode})"
    )
    print(f"completed: {completed}, failed: {summary['items']['failed']}")
    print(f"ideal (items x latency / concurrency): {ideal:.2f} s")
    print(f"bare aiohttp loop: {bare:.2f} s ({args.items / bare:,.0f} req/s)")
    print(f"flow:              {flow_s:.2f} s ({args.items / flow_s:,.0f} items/s)")
    print(f"whole process:     {process_s:.2f} s (flow + {process_s - flow_s:.2f} s)")
    print(f"flow / bare loop:  {flow_s / bare:.2f}x  (target <= 2x)")
    print(f"peak RSS:          {peak_kib / 1024:.0f} MB  (target < 500 MB)")


if __name__ == "__main__":
    main()
