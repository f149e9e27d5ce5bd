"""The peer configuration, whole process: `assay run` of 2,000 items as inspect_ai and promptfoo
were measured on this machine (mock at 50 ms, concurrency 64, one exact-match scorer).

The ideal is items x latency / concurrency = 2,000 x 0.05 / 64 = 1.56 s. Prints the wall time of
each whole `assay run` process (start to exit), the median, and how long `import` of the CLI's
modules takes in a fresh interpreter (`-X importtime` is not used: it slows what it measures).

    .venv/bin/python benchmarks/peers.py [--repeat 5] [--items 2000] [--concurrency 64] [--latency-ms 50]

Target (issue 12): median <= 4 s whole process.
Peers measured on the same machine (issue 12): inspect_ai 0.3.285 60 s, promptfoo 0.123.1 25 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO_ROOT, start_mock_subprocess, stop_mock_subprocess


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


def whole_process(spec: Path, store: Path) -> float:
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
    if done.returncode != 0:
        raise SystemExit(f"assay run failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall


def import_seconds() -> float:
    """A fresh interpreter importing the CLI and what the embedded run path loads."""
    code = (
        "import time; t = time.perf_counter(); import assay.cli; "
        "assay.cli._parser(); import assay.run.execute; print(time.perf_counter() - t)"
        if (REPO_ROOT / "assay" / "run").is_dir()
        else "import time; t = time.perf_counter(); import assay.cli; from flows.run import run_eval; "
        "print(time.perf_counter() - t)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    return float(done.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()
    ideal = args.items * args.latency_ms / 1000 / args.concurrency
    mock, base_url = start_mock_subprocess(args.latency_ms)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            spec = write_eval(Path(tmp), base_url, args.items, args.concurrency)
            walls = [whole_process(spec, Path(tmp) / f"store-{n}") for n in range(args.repeat)]
    finally:
        stop_mock_subprocess(mock)
    imports = [import_seconds() for _ in range(3)]
    print(f"peer configuration: {args.items} items, mock {args.latency_ms:g} ms, concurrency {args.concurrency}")
    print(f"ideal (items x latency / concurrency): {ideal:.2f} s")
    print("whole process, each run: " + ", ".join(f"{w:.2f} s" for w in walls))
    print(f"whole process, median: {statistics.median(walls):.2f} s (target <= 4 s)")
    print(f"imports of the embedded path (fresh interpreter, median of 3): {statistics.median(imports):.2f} s")


if __name__ == "__main__":
    main()
