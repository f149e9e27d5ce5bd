"""A run with a sequential compare (`compare_to` / `--compare-to`), for real: a baseline run, then
a candidate run that stops admitting items once its confidence sequence decides (issue 17)."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest

from assay.analysis.monitor import compare_line, sequence_of
from assay.analysis.summary import summarise
from assay.cli import EXIT_GATE, main
from assay.report import build_report
from assay.run.compare_to import seeded_key
from assay.store import Store
from tests.conftest import only_run_id, run_assay, start_run, wait_for, write_jsonl, write_spec
from tests.helpers.cli import assay_json

N_ITEMS = 2000

SOLVER = """
import hashlib, pathlib
LOG = pathlib.Path(__file__).with_name("calls.log")

def _u(x):
    return int(hashlib.sha256(x.encode()).hexdigest()[:8], 16) / 2**32

def baseline(x):
    return "yes" if _u(x) < 0.7 else "no"

def _v(x):
    return int(hashlib.sha256(x.encode()).hexdigest()[8:16], 16) / 2**32

def differs(x):  # disagrees with the baseline on ~8 % of items, as often each way; 5 ms an item
    import time
    time.sleep(0.005)
    passed = _u(x) < 0.7
    flip = _v(x) < (0.06 if passed else 0.14)
    return "yes" if passed != flip else "no"

def worse(x):  # passes a subset of the baseline's items: 20 points lower
    with LOG.open("a") as log:
        log.write(x + "\\n")
    return "yes" if _u(x) < 0.5 else "no"
"""


def _spec(folder: Path, function: str, **extra: object) -> Path:
    sub = folder / function
    sub.mkdir(exist_ok=True)
    (sub / f"solver_{function}.py").write_text(SOLVER)  # a module of its own: imports are cached
    write_jsonl(
        sub / "d.jsonl", [{"id": f"i{n}", "input": f"i{n}", "expected": "yes"} for n in range(N_ITEMS)]
    )
    return write_spec(
        sub,
        name="seq",
        dataset={"path": "d.jsonl", "id": "id"},
        target={"kind": "python", "function": f"solver_{function}:{function}"},
        scorers=[{"kind": "exact_match", "name": "exact"}],
        concurrency=2,
        seed=5,
        **extra,
    )


@pytest.fixture(scope="module")
def baseline_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The baseline run (2,000 items), run once for the module."""
    folder = tmp_path_factory.mktemp("baseline")
    store = folder / "store"
    assert main(["run", str(_spec(folder, "baseline")), "--store", str(store), "--quiet"]) == 0
    run_id = only_run_id(store)
    assert Store(store).read_run(run_id)["status"] == "completed"
    return store, run_id


@pytest.fixture
def baseline(tmp_path: Path, baseline_store: tuple[Path, str]) -> tuple[Path, str]:
    """A store of this test's own holding the baseline run (the tests add runs to it)."""
    source, run_id = baseline_store
    shutil.copytree(source, tmp_path / "store")
    return tmp_path / "store", run_id


def test_a_clear_regression_stops_early_and_compare_agrees(tmp_path, capsys, baseline) -> None:
    store_path, base_id = baseline
    spec = _spec(tmp_path, "worse")
    # summary
    summary = assay_json(capsys, "run", str(spec), "--store", str(store_path), "--compare-to", base_id)
    store = Store(store_path)
    run_id = summary["run_id"]
    record = store.read_run(run_id)
    assert record["status"] == summary["status"] == "stopped_early"
    assert record["compare_verdict"] == "regressed" and record["compare_baseline"] == base_id
    assert (
        record["compare_high"] < 0
        and record["compare_low"] < record["compare_delta"] < record["compare_high"]
    )
    executed = (spec.parent / "calls.log").read_text().split()
    # It stopped admitting items: far fewer than the 2,000 ran, and the sequence used no more.
    assert record["compare_items"] <= len(executed) < N_ITEMS
    assert record["n_completed"] == len(executed) and record["n_cancelled"] == N_ITEMS - len(executed)
    # In the seeded random order, not dataset order.
    seeded = sorted((f"i{n}" for n in range(N_ITEMS)), key=lambda i: seeded_key(5, i, 0))
    assert sorted(executed) == sorted(seeded[: len(executed)])  # a prefix of it (two at a time)
    assert seeded[:50] != [f"i{n}" for n in range(50)]

    # `assay compare` on it: the same verdict and interval, from the run's own sequence.
    # A regression fails the comparison's gate.
    comparison = assay_json(
        capsys, "compare", base_id, "--candidate", run_id, "--store", str(store_path), code=EXIT_GATE
    )
    (row,) = comparison["scorers"]
    assert row["verdict"] == "regressed" and row["ci_method"] == "betting_cs"
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((record["compare_low"], record["compare_high"]))
    assert row["sequential_pairs"] == record["compare_items"]
    assert "betting_cs over the first" in comparison["lines"][0]
    adjusted = assay_json(
        capsys,
        "compare",
        base_id,
        "--candidate",
        run_id,
        "--store",
        str(store_path),
        "--adjust",
        "holm",
        code=EXIT_GATE,
    )
    (row,) = adjusted["scorers"]
    assert row["adjustment"] == "holm" and row["p_adjusted"] == row["p_value"]  # a family of one

    # `assay show` (like the run's own summary and its Prefect artifact) says why it stopped.
    assert main(["show", run_id, "--store", str(store_path)]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    done = len(executed)
    assert f"stopped early after {done} of {N_ITEMS} items: exact regressed vs run {base_id}" in shown
    assert compare_line(summary) == compare_line(summarise(store, run_id))

    # The report draws the sequence narrowing to the stop.
    page = build_report(store, run_id)
    assert '<section id="sequential">' in page and 'id="fig-sequence"' in page
    assert (
        f"after {record['compare_items']:,} pairs" in page or f"after {record['compare_items']} pairs" in page
    )

    # Resumed, it stays decided: no item runs again, the record keeps its verdict.
    again = assay_json(capsys, "resume", run_id, "--store", str(store_path))
    assert again["status"] == "stopped_early"
    assert (spec.parent / "calls.log").read_text().split() == executed
    assert store.read_run(run_id)["compare_items"] == record["compare_items"]


def test_monitor_only_runs_every_item_and_records_the_verdict(tmp_path, capsys, baseline) -> None:
    store_path, base_id = baseline
    spec = _spec(tmp_path, "worse", compare_to={"baseline": base_id, "stop": "never", "threshold": 0.05})
    summary = assay_json(capsys, "run", str(spec), "--store", str(store_path))
    assert summary["status"] == "completed"
    record = Store(store_path).read_run(summary["run_id"])
    assert record["n_completed"] == N_ITEMS and record["compare_items"] == N_ITEMS
    assert record["compare_verdict"] == "regressed" and record["compare_threshold"] == 0.05
    sequence = sequence_of(Store(store_path), summary["run_id"])
    assert sequence is not None and sequence["items"] == N_ITEMS and len(sequence["path"]) == N_ITEMS
    assert sequence["low"] == pytest.approx(record["compare_low"])


def test_a_bad_baseline_is_refused_before_anything_is_written(tmp_path, capsys, baseline) -> None:
    store_path, base_id = baseline
    spec = _spec(tmp_path, "worse")
    assert main(["run", str(spec), "--store", str(store_path), "--compare-to", "no-such-run"]) == 2
    assert "compare_to.baseline: no run 'no-such-run'" in capsys.readouterr().err
    bad_scorer = _spec(tmp_path, "worse", compare_to={"baseline": base_id, "scorer": "nope"})
    assert main(["run", str(bad_scorer), "--store", str(store_path)]) == 2
    assert "compare_to" in capsys.readouterr().err
    assert [p.name for p in (store_path / "runs").iterdir()] == [f"run_id={base_id}"]
    assert not (spec.parent / "calls.log").exists()


@pytest.mark.slow
def test_an_interrupted_run_resumes_its_sequence_from_the_committed_rows(tmp_path, capsys, baseline) -> None:
    """SIGKILL mid-run, then `assay resume`: the sequence is rebuilt from what was committed and
    carried on over every pair, as if the run had never stopped."""
    store_path, base_id = baseline
    spec = _spec(tmp_path, "differs", compare_to={"baseline": base_id, "stop": "never"})
    process = start_run(spec, store_path)
    wait_for(  # a part of the new run (the baseline's are there already)
        lambda: len({p.parent for p in (store_path / "items").glob("run_id=*/part-*.parquet")}) == 2,
        "the candidate committed a part",
        process,
    )
    process.send_signal(signal.SIGKILL)
    process.wait()
    store = Store(store_path)
    run_id = next(r for r in store.runs().collect()["run_id"] if r != base_id)
    assert 0 < len(store.done_keys(run_id)) < N_ITEMS
    result = run_assay("resume", run_id, "--store", str(store_path), "--json", timeout=300)
    assert result.returncode == 0, result.stderr
    record = store.read_run(run_id)
    assert record["status"] == "completed" and record["n_completed"] == N_ITEMS
    sequence = sequence_of(store, run_id)
    assert sequence is not None and record["compare_items"] == sequence["items"] == N_ITEMS
    assert (record["compare_low"], record["compare_high"]) == pytest.approx(
        (sequence["low"], sequence["high"])
    )
