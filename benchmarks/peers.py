"""The peer configuration, whole process: `assay run` of 2,000 items as inspect_ai and promptfoo
were measured on this machine (mock at 50 ms, concurrency 64, one exact-match scorer).

The ideal is items x latency / concurrency = 2,000 x 0.05 / 64 = 1.56 s. Prints the wall time of
each whole `assay run` process (start to exit) and the CPU it used, their medians, and where one
more process spends its time: interpreter start, imports, planning, executing, closing, exit.

    .venv/bin/python benchmarks/peers.py [--repeat 5] [--items 2000] [--concurrency 64] [--latency-ms 50]

Target (issue 12): median <= 4 s whole process.
Peers measured on the same machine (issue 12): inspect_ai 0.3.285 60 s, promptfoo 0.123.1 25 s.
"""

from __future__ import annotations

import argparse
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
from _common import REPO_ROOT, start_mock_subprocess, stop_mock_subprocess

# One `assay run` in a fresh interpreter, its phases timed from the inside: the driver's planning
# (`open_runs`) and closing (`close_run`) are wrapped, and the last line is the wall clock at the
# end of `main`, so the caller can tell how long the interpreter took to exit.
_PHASES = """
import sys, time
wall_start = float(sys.argv[1])
started = time.time()
import assay.cli
import assay.orchestrate.run as driver
import assay.orchestrate.finish as finisher
imported = time.time()
spent = {"planning": 0.0, "closing": 0.0}

def timed(name, fn):
    def call(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - t
    return call

driver.open_runs = timed("planning", driver.open_runs)
finisher.close_run = timed("closing", finisher.close_run)
code = assay.cli.main(sys.argv[2:])
ended = time.time()
print(f"phases {started - wall_start} {imported - started} {spent['planning']} "
      f"{ended - imported - spent['planning'] - spent['closing']} {spent['closing']} {code} {ended}")
import gc
gc.freeze()  # as `assay.cli.main()` does when it is the process's command
"""


def write_eval(folder: Path, base_url: str, items: int, concurrency: int) -> Path:
    with (folder / "data.jsonl").open("w") as handle:
        for i in range(items):
            handle.write(json.dumps({"id": f"i{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)}))
            handle.write("\n")
    spec = folder / "spec.yaml"
    spec.write_text(
        f"""name: peers
dataset: {{path: data.jsonl, id: id, input: question, expected: answer}}
target: {{kind: openai, base_url: "{base_url}", model: mock-1, prompt: "{{question}}"}}
scorers:
  - {{kind: exact_match, name: exact}}
concurrency: {concurrency}
fail_on_item_error_rate: 1
"""
    )
    return spec


def whole_process(spec: Path, store: Path) -> tuple[float, float]:
    """One `assay run` process: its wall seconds, start to exit, and the CPU seconds it used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "assay.cli", "run", str(spec), "--store", str(store), "--quiet"],
        cwd=REPO_ROOT,
        env={**os.environ, "DO_NOT_TRACK": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"assay run failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def phases(spec: Path, store: Path) -> dict[str, float]:
    """Where one more `assay run` process spends its wall time (needs `assay.orchestrate.run`)."""
    argv = ["run", str(spec), "--store", str(store), "--quiet"]
    started = time.time()
    done = subprocess.run(
        [sys.executable, "-c", _PHASES, str(started), *argv],
        cwd=REPO_ROOT,
        env={**os.environ, "DO_NOT_TRACK": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    exited = time.time()
    line = next((x for x in done.stdout.splitlines() if x.startswith("phases ")), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"phases run failed ({done.returncode}): {done.stderr[-2000:]}")
    start, imports, planning, executing, closing, _, ended = (float(x) for x in line.split()[1:])
    return {
        "interpreter start": start,
        "imports": imports,
        "planning": planning,
        "executing": executing,
        "closing": closing,
        "exit": exited - ended,
        "total": exited - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--no-phases", action="store_true", help="skip the breakdown run")
    args = parser.parse_args()
    ideal = args.items * args.latency_ms / 1000 / args.concurrency
    mock, base_url = start_mock_subprocess(args.latency_ms)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            spec = write_eval(Path(tmp), base_url, args.items, args.concurrency)
            runs = [whole_process(spec, Path(tmp) / f"store-{n}") for n in range(args.repeat)]
            breakdown = None if args.no_phases else phases(spec, Path(tmp) / "store-phases")
    finally:
        stop_mock_subprocess(mock)
    walls = [wall for wall, _ in runs]
    cpus = [cpu for _, cpu in runs]
    print(
        f"peer configuration: {args.items} items, mock {args.latency_ms:g} ms, concurrency {args.concurrency}"
    )
    print(f"ideal (items x latency / concurrency): {ideal:.2f} s")
    print("whole process, each run: " + ", ".join(f"{w:.2f} s" for w in walls))
    print(
        f"whole process, median: {statistics.median(walls):.2f} s (range {min(walls):.2f}-{max(walls):.2f}; "
        "target <= 4 s)"
    )
    print(f"CPU of the process (user + system), median: {statistics.median(cpus):.2f} s")
    if breakdown is not None:
        print("one more run, by phase: " + ", ".join(f"{name} {s:.2f} s" for name, s in breakdown.items()))


if __name__ == "__main__":
    main()
