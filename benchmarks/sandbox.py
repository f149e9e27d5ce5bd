"""Per-attempt overhead of the `container` target: create → exec → export → score → teardown,
with the busybox test image (tests/helpers/sandbox_images.py), at concurrency 1 and 8.

Each attempt copies a small fixture folder in, runs a one-line command that writes a file, has its
workspace diffed and exported, is scored by one `code_exec` check run inside the live container,
and is removed. Prints wall time per attempt (the run's wall time over its attempts) and the
median of each stage. Target (issue 5): <= 0.5 s per attempt at concurrency 1.

    .venv/bin/python benchmarks/sandbox.py [--attempts 40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from assay.flows.run import run_eval
from assay.orchestrate.run import RunRequest
from assay.store import Store
from tests.helpers.sandbox_images import busybox_image, engine


def write_eval(folder: Path, image: str, attempts: int, concurrency: int) -> Path:
    (folder / "fixtures").mkdir(parents=True)
    for n in range(5):
        (folder / "fixtures" / f"file{n}.txt").write_text(f"fixture {n}\n" * 20)
    (folder / "data.jsonl").write_text(
        "".join(json.dumps({"id": f"a{n}", "input": "go"}) + "\n" for n in range(attempts))
    )
    spec = {
        "name": f"sandbox-bench-c{concurrency}",
        "dataset": {"path": "data.jsonl", "id": "id"},
        "target": {
            "kind": "container",
            "image": image,
            "fixtures": "fixtures",
            "command": ["sh", "-c", "echo 42 > answer.txt; echo done"],
        },
        "scorers": [{"kind": "code_exec", "checks": ["grep -q 42 answer.txt"]}],
        "concurrency": concurrency,
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def measure(image: str, attempts: int, concurrency: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        spec = write_eval(Path(tmp) / "eval", image, attempts, concurrency)
        started = time.perf_counter()
        summary = asyncio.run(run_eval.fn(RunRequest(spec=str(spec), store=str(Path(tmp) / "store"))))
        wall = time.perf_counter() - started
        items = Store(Path(tmp) / "store").run_items(summary["run_id"])
        assert items["outcome"].to_list() == ["completed"] * attempts, items["error"].to_list()
        stages: dict[str, list[float]] = {}
        for facts in items["sandbox"].to_list():
            for stage, ms in json.loads(facts)["stage_ms"].items():
                stages.setdefault(stage, []).append(ms)
        figures = {
            "per_attempt_s": wall / attempts,
            "wall_s": wall,
            "item_p50_ms": items["duration_ms"].median(),
        }
        figures.update({f"{stage}_ms_p50": statistics.median(ms) for stage, ms in stages.items()})
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=40)
    args = parser.parse_args()
    image = busybox_image(engine())
    measure(image, 4, 1)  # warm the engine and the image's page cache
    for concurrency in (1, 8):
        figures = measure(image, args.attempts, concurrency)
        print(
            f"concurrency {concurrency}: {figures['per_attempt_s']:.3f} s per attempt "
            f"({args.attempts} attempts in {figures['wall_s']:.1f} s; item p50 {figures['item_p50_ms']:.0f} ms; "
            + ", ".join(
                f"{k.removesuffix('_ms_p50')} {v:.0f}" for k, v in figures.items() if k.endswith("_ms_p50")
            )
            + " ms p50)"
        )


if __name__ == "__main__":
    main()
