"""Whole-process start-up of the commands a person types most: `assay ls`, `show`, `compare`,
`power`, `estimate` on a small store, and the quickstart run warm — with which heavy libraries
each one loaded (Prefect, SciPy, Plotly, Rich).

Target (issue 15, point 11): each command <= 1 s whole-process on a small store, the quickstart
run <= 2 s warm, and none imports Prefect or SciPy unless it needs them.

    .venv/bin/python benchmarks/cli_startup.py [--repeat 5]
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

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("prefect", "scipy", "plotly", "rich")
# Runs the CLI in this process, then reports the heavy top-level packages it loaded (on stderr,
# after the command's own output).
_PROBE = f"""
import sys
from assay.cli import main
code = main(sys.argv[1:])
loaded = sorted({{name.split(".")[0] for name in sys.modules}} & set({HEAVY!r}))
print("LOADED " + ",".join(loaded), file=sys.stderr)
raise SystemExit(code)
"""


def assay(args: list[str], env: dict[str, str]) -> tuple[float, list[str], str]:
    """Wall time, heavy packages loaded and stdout of one `assay` process."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    took = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"assay {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    loaded = next(line for line in done.stderr.splitlines() if line.startswith("LOADED "))
    return took, [name for name in loaded.removeprefix("LOADED ").split(",") if name], done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--repeat", type=int, default=5, help="timed runs of each command (the median is shown)"
    )
    args = parser.parse_args()
    env = {**os.environ, "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    with tempfile.TemporaryDirectory() as scratch:
        store = str(Path(scratch) / "store")
        env["PREFECT_HOME"] = str(Path(scratch) / "prefect-home")
        spec = "examples/quickstart/spec.yaml"
        ids = []
        for _ in range(2):  # two small runs of the quickstart: something to show and compare
            _, _, out = assay(["run", spec, "--store", store, "--json"], env)
            ids.append(json.loads(out)["run_id"])
        commands = {
            "ls": ["ls", "--store", store],
            "show": ["show", ids[0], "--store", store],
            "compare": ["compare", ids[0], "--candidate", ids[1], "--store", store],
            "power": ["power", ids[0], "--mde", "0.05", "--store", store],
            "estimate": ["estimate", spec, "--store", store],
            "run (quickstart, warm)": ["run", spec, "--store", store, "--quiet"],
        }
        print(f"{'command':<24} {'median s':>9} {'min s':>7}  heavy packages loaded")
        for name, argv in commands.items():
            times, loaded = [], []
            for _ in range(args.repeat):
                took, loaded, _ = assay(argv, env)
                times.append(took)
            print(
                f"{name:<24} {statistics.median(times):>9.2f} {min(times):>7.2f}  {', '.join(loaded) or '-'}"
            )


if __name__ == "__main__":
    main()
