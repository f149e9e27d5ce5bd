"""Scale benchmark: runs sharing one rate-limited account (issue 13).

Two `assay run` processes of 600 items each at concurrency 32, started together against one mock
that allows 3,000 requests a minute in total (token bucket; 429 with `Retry-After` and
`x-ratelimit-*` over it), each reply taking `--latency-ms`. Prints, for the two runs together:
items failed, requests sent and the share answered 429, wall time, and the share of the allowed
rate used (successful requests / (rpm x minutes)), over the whole wall time and over the longer
run's flow (its `wall_ms`: without the processes' start-up, when no call can be made).

    .venv/bin/python benchmarks/scale.py [--items 600] [--runs 2] [--concurrency 32] [--rpm 3000]
                                         [--latency-ms 200] [--share local|dask] [--assay-src DIR]

`--share dask` starts a Dask scheduler on 127.0.0.1 and gives both runs
`ASSAY_RATE_SHARE=<its address>`: the two processes share one controller (assay/calls/fleet.py)
instead of each running its own. The issue's case: `--rpm 1200 --share dask`.

`--assay-src DIR` runs `assay` from another checkout (PYTHONPATH=DIR), e.g. the code before the
adaptive controller, against the same mock. Targets (issue 13): 0 failed items, <= 5 % of calls
answered 429, >= 90 % of the allowed rate used.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml

from assay.testing.dask_scheduler import dask_scheduler
from assay.testing.mock_openai import MockOpenAIServer

REPO_ROOT = Path(__file__).resolve().parents[1]


def _spec(folder: Path, base_url: str, items: int, concurrency: int) -> Path:
    rows = [{"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(items)]
    (folder / "data.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    spec = {
        "name": "scale",
        "dataset": {"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        "target": {"kind": "openai", "base_url": base_url, "model": "mock-1", "prompt": "{question}"},
        "scorers": [{"kind": "exact_match"}],
        "concurrency": concurrency,
        "fail_on_item_error_rate": 1,
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=600)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rpm", type=float, default=3000)
    parser.add_argument("--latency-ms", type=float, default=200)
    parser.add_argument("--share", choices=("local", "dask"), default="local")
    parser.add_argument("--assay-src", help="run `assay` from this checkout instead")
    args = parser.parse_args()

    env = {**os.environ, "DO_NOT_TRACK": "1"}
    env.pop("PREFECT_API_URL", None)
    if args.assay_src:
        env["PYTHONPATH"] = args.assay_src
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        mock = stack.enter_context(MockOpenAIServer(latency_ms=args.latency_ms))
        if args.share == "dask":
            env["ASSAY_RATE_SHARE"] = stack.enter_context(dask_scheduler(Path(tmp)))
        return _measure(args, env, mock, tmp)


def _measure(args: argparse.Namespace, env: dict[str, str], mock: MockOpenAIServer, tmp: str) -> int:
    """Start the runs together, wait for them, print the figures."""
    mock.configure(rate_limits={"rpm": args.rpm})
    spec = _spec(Path(tmp), mock.base_url, args.items, args.concurrency)
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "assay.cli",
                "run",
                str(spec),
                "--store",
                f"{tmp}/store",
                "--json",
                "-q",
            ],
            cwd=args.assay_src or REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(args.runs)
    ]
    outputs = [proc.communicate() for proc in procs]
    wall = time.perf_counter() - started
    stats = mock.stats()
    summaries = []
    for proc, (out, err) in zip(procs, outputs, strict=True):
        if not out.strip():
            print(f"run exited {proc.returncode} with no summary: {err[-2000:]}", file=sys.stderr)
            return 1
        summaries.append(json.loads(out))
    failed = sum(s["items"]["failed"] for s in summaries)
    completed = sum(s["items"]["completed"] for s in summaries)
    by_status = stats["by_status"]
    requests = stats["requests"]
    refused = by_status.get("429", 0)
    ok = by_status.get("200", 0)
    allowed = args.rpm * wall / 60
    # The runs' flows (from planning to their last commit), without the processes' start-up.
    flow_s = max(s["wall_ms"] for s in summaries) / 1000
    allowed_in_flows = args.rpm * flow_s / 60
    print(
        f"{args.runs} runs x {args.items} items, concurrency {args.concurrency}, {args.rpm:g} rpm, "
        f"{args.latency_ms:g} ms latency, controllers shared: {args.share}"
        f"{' (assay from ' + args.assay_src + ')' if args.assay_src else ''}"
    )
    print(f"items:     {completed} completed, {failed} failed of {args.runs * args.items}")
    print(f"requests:  {requests}, answered 429: {refused} ({100 * refused / max(requests, 1):.1f} %)")
    print(
        f"wall:      {wall:.1f} s; allowed rate used: {100 * ok / allowed:.0f} % ({ok} ok of {allowed:.0f} allowed)"
    )
    print(
        f"flows:     {flow_s:.1f} s (the longer run's flow); allowed rate used in it: "
        f"{100 * ok / allowed_in_flows:.0f} %"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
