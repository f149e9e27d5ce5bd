"""Whole-process time of the README's quickstart (`assay run examples/quickstart/spec.yaml`).

Runs it first with a brand-new PREFECT_HOME (a fresh machine's first run), then `--repeat` more
times warm, and prints each wall time. Target (issue 2): succeeds on the first run, <= 6 s warm.

    .venv/bin/python benchmarks/quickstart.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed_run(env: dict[str, str], store: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "assay.cli",
            "run",
            "examples/quickstart/spec.yaml",
            "--store",
            str(store),
            "--quiet",
        ],
        cwd=REPO,
        env=env,
        check=True,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
        env.update(PREFECT_HOME=str(Path(tmp) / "prefect-home"), DO_NOT_TRACK="1")
        first = timed_run(env, Path(tmp) / "store")
        warm = [timed_run(env, Path(tmp) / "store") for _ in range(args.repeat)]
    print(f"first run, fresh PREFECT_HOME: {first:.2f} s")
    print(f"warm runs: median {statistics.median(warm):.2f} s, max {max(warm):.2f} s  (target <= 6 s)")


if __name__ == "__main__":
    main()
