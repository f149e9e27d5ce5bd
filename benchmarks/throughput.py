"""Throughput benchmark: 10,000 items through `assay run` against the mock at 20 ms latency.

In the same session it times a bare aiohttp loop making the same 10,000 calls at the same
concurrency against the same mock: on 2 shared cores that loop, not items x latency / concurrency,
is the practical limit. Each repeat times the bare loop, then `assay run`, then the bare loop again,
and divides the flow by the mean of the two loops around it, so a load that moves during a repeat
moves both sides. Prints, per repeat and as median and range: wall seconds for the flow and the
whole `assay` process, flow / bare loop, and the CPU each spent per item (a figure other processes
on the machine disturb less than wall time); and the process's peak RSS.

    .venv/bin/python benchmarks/throughput.py [--repeat 3] [--items 10000] [--concurrency 100] [--latency-ms 20]

Targets: flow <= 1.5x the bare loop (issue 12; issue 2 asked for 2x); whole process <= flow + 5 s;
peak RSS < 500 MB. With PREFECT_API_URL set, `assay run` is a real Prefect flow run and so is what
gets measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO_ROOT, bare_aiohttp_loop, start_mock_subprocess, stop_mock_subprocess

# `assay run` as the `assay` command runs it (`main()` reading sys.argv), and the CPU its `main`
# spent (the flow, with planning and closing; not the imports) on stderr: the whole process's, and
# the main thread's — the event loop's, which bounds the run (the HTTP client's own thread does its
# HTTP work outside the GIL, assay/calls/transport.py).
_COMMAND = """
import sys, time
import assay.cli
sys.argv = ["assay", *sys.argv[1:]]
cpu, thread = time.process_time(), time.thread_time()
try:
    assay.cli.main()
finally:
    print(f"cpu-of-main {time.process_time() - cpu} {time.thread_time() - thread}", file=sys.stderr)
"""


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


def run_assay(spec: Path, store: Path) -> tuple[float, dict, tuple[float, float], int]:
    """Run `assay run` in a child process; returns (wall s, summary, CPU s of its `main` (process,
    main thread), peak RSS KiB)."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", _COMMAND, "run", str(spec), "--store", str(store), "--json"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "DO_NOT_TRACK": "1"},
    )
    stdout, stderr = process.communicate()
    wall = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"assay run failed ({process.returncode}): {stderr.decode()[-2000:]}")
    line = next(x for x in stderr.decode().splitlines() if x.startswith("cpu-of-main "))
    cpu = (float(line.split()[1]), float(line.split()[2]))
    # wait4 would be exact per child, but communicate() already reaped it; RUSAGE_CHILDREN holds
    # the largest waited-for child, and the mock (still running) is not yet among them.
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, json.loads(stdout), cpu, peak_kib


def bare(base_url: str, items: int, concurrency: int) -> tuple[float, float]:
    """The bare loop once: (wall s, CPU s)."""
    cpu = time.process_time()
    wall = asyncio.run(bare_aiohttp_loop(base_url, items, concurrency))
    return wall, time.process_time() - cpu


def spread(values: list[float], unit: str = "", digits: int = 2) -> str:
    """`median (min-max)` of the values."""
    fmt = f"{{:.{digits}f}}"
    median, low, high = (fmt.format(v) for v in (statistics.median(values), min(values), max(values)))
    return f"{median}{unit} (range {low}-{high}{unit})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    args = parser.parse_args()

    rows = []
    mock, base_url = start_mock_subprocess(args.latency_ms)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            spec = write_eval(Path(tmp), base_url, args.items, args.concurrency)
            for n in range(args.repeat):
                before = bare(base_url, args.items, args.concurrency)
                process_s, summary, flow_cpu, peak_kib = run_assay(spec, Path(tmp) / f"store-{n}")
                after = bare(base_url, args.items, args.concurrency)
                rows.append((before, after, process_s, summary, flow_cpu, peak_kib))
    finally:
        stop_mock_subprocess(mock)

    ideal = args.items * args.latency_ms / 1000 / args.concurrency
    mode = "prefect flow run" if os.environ.get("PREFECT_API_URL") else "embedded (no Prefect API)"
    print(
        f"items: {args.items} at concurrency {args.concurrency}, mock latency {args.latency_ms:g} ms ({mode})"
    )
    print(f"ideal (items x latency / concurrency): {ideal:.2f} s")
    bares, flows, wholes, ratios, bare_cpu, flow_cpu, flow_thread = [], [], [], [], [], [], []
    for n, (before, after, process_s, summary, cpu, _) in enumerate(rows, start=1):
        bare_s = (before[0] + after[0]) / 2
        flow_s = summary["wall_ms"] / 1000
        bares.append(bare_s)
        flows.append(flow_s)
        wholes.append(process_s)
        ratios.append(flow_s / bare_s)
        bare_cpu.append((before[1] + after[1]) / 2 / args.items * 1e6)
        flow_cpu.append(cpu[0] / args.items * 1e6)
        flow_thread.append(cpu[1] / args.items * 1e6)
        done = summary["items"]
        print(
            f"repeat {n}: bare {before[0]:.2f} / {after[0]:.2f} s, flow {flow_s:.2f} s "
            f"({done['completed']} completed, {done['failed']} failed), whole process {process_s:.2f} s, "
            f"flow / bare {flow_s / bare_s:.2f}x"
        )
    print(f"bare aiohttp loop: {spread(bares, ' s')} ({args.items / statistics.median(bares):,.0f} req/s)")
    print(f"flow:              {spread(flows, ' s')} ({args.items / statistics.median(flows):,.0f} items/s)")
    print(f"whole process:     {spread(wholes, ' s')}")
    print(f"flow / bare loop:  {spread(ratios, 'x')}  (target <= 1.5x)")
    print(
        f"CPU per item:      flow {spread(flow_cpu, ' us', 0)}, bare loop {spread(bare_cpu, ' us', 0)}; "
        f"flow / bare {spread([f / b for f, b in zip(flow_cpu, bare_cpu, strict=True)], 'x')}"
    )
    print(
        f"  the flow's main thread (its event loop): {spread(flow_thread, ' us', 0)}; "
        f"/ bare {spread([f / b for f, b in zip(flow_thread, bare_cpu, strict=True)], 'x')}"
    )
    print(f"peak RSS:          {max(r[5] for r in rows) / 1024:.0f} MB  (target < 500 MB)")


if __name__ == "__main__":
    main()
