"""Benchmark of `assay report` and `assay show` over one large run: each command's wall time and
peak RSS as its own process, and the report page's size.

The run is synthesised through Assay's own writer (`tests/helpers/synthetic_runs.write_run`:
~3 % failed, two scorers), its record keeping its summary's figures as a closed run's does.

    .venv/bin/python benchmarks/report.py [--items 1000000] [--repeat 2]

Quote the figures with the load average printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assay.store import Store
from tests.helpers.peak import assay_peak
from tests.helpers.synthetic_runs import write_run


def measure(args: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of `assay <args>` as its own process."""
    started = time.perf_counter()
    done, peak = assay_peak(*args)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"assay {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return wall, peak


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    options = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as folder:
        root = str(Path(folder) / "store")
        started = time.perf_counter()
        write_run(Store(root), "big", options.items, seed=1)
        print(f"store: {options.items:,} items written in {time.perf_counter() - started:.1f} s")
        for name, args in (
            ("show", ["show", "big", "--store", root, "--json"]),
            ("report", ["report", "big", "--store", root]),
        ):
            for attempt in range(options.repeat):
                wall, peak = measure(args)
                print(f"assay {name:6} run {attempt + 1}: {wall:6.2f} s   peak RSS {peak:6.0f} MB")
        page = Path(root) / "reports" / "big.html"
        print(f"report page: {page.stat().st_size / 2**20:.1f} MB")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
