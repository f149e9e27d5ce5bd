"""Batch benchmark: the 2,000-item arithmetic eval online vs through batches, and a SIGKILL.

Against the Anthropic mock (`assay.testing.mock_anthropic`, batches end 5 s after they are
created), with a shipped model and its shipped prices:

1. online: `assay run` with the `anthropic` target, one Messages call per item;
2. batch: the same spec with `batch: {max_requests: <a third of the items>, ...}` (3 batches),
   uninterrupted;
3. killed: the batch run SIGKILLed once its 3 batches are recorded in flight, then
   `assay resume`: how many requests were submitted twice (the mock counts each custom id), and
   the resumed run's wall time against the uninterrupted one's.

The judged case (`--case judged`) grades the same eval's online answers with an `llm_judge` on
the same model: 4. the judge online, 5. the judge with `batch:` (its batches fill as the target's
answers arrive: one every `max_wait_s` at most, so more than 3), 6. the batched judge SIGKILLed
once 3 of its batches are recorded in flight, then `assay resume` (the target's calls are made
again, the judge's batches re-attached).

    .venv/bin/python benchmarks/batch.py [--items 2000] [--delay-s 5] [--case target|judged|all]

Targets (issue 16): batch cost = 50 % +- 1 % of online, same accuracy; 0 requests submitted
twice; resumed wall time <= 1.2x the uninterrupted run's. For the judge: judging cost 50 % +- 1 %
of online, the same scores, 0 requests submitted twice.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from assay.store import Store
from assay.testing.mock_anthropic import MockAnthropicServer

REPO_ROOT = Path(__file__).resolve().parents[1]
MODEL = "claude-haiku-4-5-20251001"
BATCH = {"max_wait_s": 1.0, "poll_s": 0.25}  # and `max_requests`: a third of the items (3 batches)
VERDICT = '{"score": 1, "explanation": "correct"}'


def _spec(
    folder: Path, base_url: str, items: int, batch: dict[str, Any] | None, judge_batch: Any = False
) -> Path:
    """The arithmetic eval; with `judge_batch` not False also graded by an `llm_judge` (batched
    when it is a dict, online when None) and the target always online."""
    rows = [{"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(items)]
    (folder / "data.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    target: dict[str, Any] = {
        "kind": "anthropic",
        "base_url": base_url,
        "model": MODEL,
        "max_tokens": 16,
        "prompt": "{question}",
        "system": "Reply with the number only.",
    }
    if batch is not None:
        target["batch"] = batch
    scorers: list[dict[str, Any]] = [{"kind": "exact_match", "name": "exact"}]
    if judge_batch is not False:
        judge = {
            "kind": "llm_judge",
            "name": "judge",
            "provider": "anthropic",
            "base_url": base_url,
            "model": MODEL,
            "max_tokens": 64,
            "gold_check": False,
        }
        scorers.append({**judge, "batch": judge_batch} if judge_batch else judge)
    spec = {
        "name": "arithmetic-batch" if batch or judge_batch else "arithmetic-online",
        "dataset": {"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        "target": target,
        "scorers": scorers,
        "concurrency": 50,
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _assay(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "assay.cli", *args],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process: subprocess.Popen[str]) -> tuple[dict[str, Any], float]:
    started = time.perf_counter()
    out, err = process.communicate(timeout=600)
    if process.returncode not in (0, 1) or not out.strip():
        raise RuntimeError(f"assay failed ({process.returncode}): {err[-2000:]}")
    return json.loads(out), time.perf_counter() - started


def _timed_run(spec: Path, store: Path) -> tuple[dict[str, Any], float]:
    started = time.perf_counter()
    summary, _ = _finish(_assay("run", str(spec), "--store", str(store), "--json"))
    return summary, time.perf_counter() - started


def _figures(store: Path, run_id: str) -> dict[str, Any]:
    items = Store(store).run_items(run_id)
    scores = Store(store).run_scores(run_id)
    exact = scores.filter(scores["scorer"] == "exact")
    judged = scores.filter(scores["scorer"] == "judge")
    return {
        "items": items.height,
        "completed": int((items["outcome"] == "completed").sum()),
        "accuracy": float(exact["score"].mean()),
        **(
            {
                "judge_mean": float(judged["score"].mean()),
                "judge_scored": int((judged["outcome"] == "scored").sum()),
                "judging_usd": float(Store(store).read_run(run_id)["cost_judging_usd"]),
            }
            if judged.height
            else {}
        ),
        "cost_usd": float(items["cost_usd"].sum()),
        "completeness": sorted(set(items["cost_completeness"])),
        "batched": int(items["operations_batched"].fill_null(0).sum()),
    }


def _wait_for(condition: Any, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.02)


def _killed(
    mock: MockAnthropicServer, folder: Path, spec: Path, what: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run `spec` (in `folder`), SIGKILL it once 3 batches are recorded in flight, resume it: its figures."""
    mock.reset()
    store = folder / "store"
    started = time.perf_counter()
    process = _assay("run", str(spec), "--store", str(store), "--quiet")
    _wait_for(lambda: len(list((store / "batches").glob("run_id=*/*-in_progress.parquet"))) == 3, what)
    in_flight_at_kill = len(list((store / "batches").glob("run_id=*/*-in_progress.parquet")))
    process.send_signal(signal.SIGKILL)
    process.wait()
    killed_after = time.perf_counter() - started
    (partition,) = (store / "runs").glob("run_id=*")
    run_id = partition.name.removeprefix("run_id=")
    summary, resumed_wall = _finish(_assay("resume", run_id, "--store", str(store), "--json"))
    stats = mock.stats()
    return summary, {
        **_figures(store, run_id),
        "batches_in_flight_at_kill": in_flight_at_kill,
        "killed_after_s": round(killed_after, 2),
        "resumed_wall_s": round(resumed_wall, 2),
        "batch_submissions": stats["batch_submissions"],
        "requests_submitted_twice": sum(1 for n in stats["batch_requests"].values() if n > 1),
        "requests_submitted": sum(stats["batch_requests"].values()),
    }


def _uninterrupted(mock: MockAnthropicServer, folder: Path, spec: Path) -> dict[str, Any]:
    mock.reset()
    summary, wall = _timed_run(spec, folder / "store")
    figures = {**_figures(folder / "store", summary["run_id"]), "wall_s": round(wall, 2)}
    figures["batch_submissions"] = mock.stats()["batch_submissions"]
    return figures


def _batch(items: int) -> dict[str, Any]:
    """The batch settings: 3 batches of the items."""
    return {**BATCH, "max_requests": max(1, -(-items // 3))}


def _target_case(mock: MockAnthropicServer, root: Path, items: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name, batch in (("online", None), ("batch", _batch(items))):
        folder = root / name
        folder.mkdir()
        results[name] = _uninterrupted(mock, folder, _spec(folder, mock.base_url, items, batch))
        print(name, json.dumps(results[name]), file=sys.stderr, flush=True)
    folder = root / "killed"
    folder.mkdir()
    _, results["killed"] = _killed(
        mock, folder, _spec(folder, mock.base_url, items, _batch(items)), "3 batches"
    )
    online, batch, killed = results["online"], results["batch"], results["killed"]
    results["checks"] = {
        "batch_cost_ratio": round(batch["cost_usd"] / online["cost_usd"], 4),
        "same_accuracy": batch["accuracy"] == online["accuracy"] == killed["accuracy"],
        "zero_duplicates": killed["requests_submitted_twice"] == 0,
        "resumed_vs_uninterrupted_wall": round(killed["resumed_wall_s"] / batch["wall_s"], 3),
    }
    return results


def _judged_case(mock: MockAnthropicServer, root: Path, items: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name, judge_batch in (("judge_online", None), ("judge_batch", _batch(items))):
        folder = root / name
        folder.mkdir()
        results[name] = _uninterrupted(mock, folder, _spec(folder, mock.base_url, items, None, judge_batch))
        print(name, json.dumps(results[name]), file=sys.stderr, flush=True)
    folder = root / "judge_killed"
    folder.mkdir()
    spec = _spec(folder, mock.base_url, items, None, _batch(items))
    _, results["judge_killed"] = _killed(mock, folder, spec, "3 judge batches")
    online, batch, killed = results["judge_online"], results["judge_batch"], results["judge_killed"]
    results["checks"] = {
        "judging_cost_ratio": round(batch["judging_usd"] / online["judging_usd"], 4),
        "same_scores": online["judge_mean"] == batch["judge_mean"] == killed["judge_mean"]
        and online["judge_scored"] == batch["judge_scored"] == killed["judge_scored"] == items,
        "zero_duplicates": killed["requests_submitted_twice"] == 0,
        "resumed_vs_uninterrupted_wall": round(killed["resumed_wall_s"] / batch["wall_s"], 3),
    }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument(
        "--delay-s", type=float, default=5.0, help="a batch ends this long after it is created"
    )
    parser.add_argument("--case", choices=("target", "judged", "all"), default="all")
    args = parser.parse_args()
    # The target's answers by question; the judge's prompts (anything else) get a verdict.
    answers = {f"What is {i} + {i}?": str(2 * i) for i in range(args.items)} | {"*": VERDICT}
    results: dict[str, Any] = {}
    with (
        MockAnthropicServer(answers=answers, batch_delay_ms=args.delay_s * 1000) as mock,
        tempfile.TemporaryDirectory() as tmp,
    ):
        root = Path(tmp)
        if args.case in ("target", "all"):
            results["target"] = _target_case(mock, root, args.items)
        if args.case in ("judged", "all"):
            results["judged"] = _judged_case(mock, root, args.items)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
