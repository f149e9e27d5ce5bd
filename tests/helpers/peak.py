"""An `assay` command run as its own process, with its peak RSS (`VmHWM`), for the tests and
benchmarks that bound what a command holds."""

from __future__ import annotations

import os
import subprocess
import sys

# Runs the CLI in the process, then prints the process's peak RSS in kB on stderr's last line.
_PEAK = """
import runpy, sys
sys.argv = ["assay", *sys.argv[1:]]
try:
    runpy.run_module("assay.cli", run_name="__main__")
except SystemExit as end:
    code = end.code
line = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print("peak_kb", line.split()[1], file=sys.stderr)
raise SystemExit(code)
"""


def assay_peak(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """`assay <args>` run as its own process: what it did, and its peak RSS in MB."""
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "DO_NOT_TRACK": "1"},
    )
    peaks = [line for line in done.stderr.splitlines() if line.startswith("peak_kb ")]
    return done, int(peaks[-1].split()[1]) / 1024 if peaks else float("nan")
