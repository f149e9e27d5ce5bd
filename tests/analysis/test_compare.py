"""`assay compare` end to end over real stored runs (python targets, embedded path)."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import get_type_hints

import polars as pl
import pytest

from assay.analysis.compare import Comparison, GateResult, ScorerComparison
from assay.analysis.stats import PairedEstimate
from assay.cli import EXIT_GATE, EXIT_INPUT, EXIT_OK, main
from assay.outcomes import Gate
from assay.store import Store
from tests.conftest import openai_spec, write_jsonl, write_spec
from tests.helpers.cli import assay_json, assay_out

N = 200
SOLVERS = """
import hashlib

def _bucket(x):
    return int(hashlib.sha256(x.encode()).hexdigest(), 16) % 100

def right(x):
    return str(int(x) * 2)

def mostly_right(x):
    return str(int(x) * 2) if _bucket(x) >= 20 else "no idea"

def flaky(x):
    if _bucket(x) < 30:
        raise RuntimeError("provider down")
    return str(int(x) * 2)

def one_in_ten(x):
    if int(x) % 10 == 0:
        raise RuntimeError("provider down")
    return str(int(x) * 2)
"""


@pytest.fixture(scope="module")
def evals(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compare")
    (folder / "solvers.py").write_text(SOLVERS)
    write_jsonl(
        folder / "data.jsonl",
        [
            {"id": f"i{i}", "input": str(i), "expected": str(2 * i), "cluster": f"c{i // 10}"}
            for i in range(N)
        ],
    )
    write_jsonl(
        folder / "other.jsonl", [{"id": f"i{i}", "input": str(i), "expected": str(2 * i)} for i in range(5)]
    )
    store = str(folder / "store")
    run_ids = {}
    for name, function, data in (
        ("right", "right", "data.jsonl"),
        ("right2", "right", "data.jsonl"),
        ("worse", "mostly_right", "data.jsonl"),
        ("flaky", "flaky", "data.jsonl"),
        ("tenth", "one_in_ten", "data.jsonl"),
        ("other", "right", "other.jsonl"),
    ):
        sub = folder / name
        sub.mkdir()
        spec = write_spec(
            sub,
            name=name,
            dataset={"path": f"../{data}", "id": "id"},
            target={"kind": "python", "function": f"solvers:{function}"},
            scorers=[{"kind": "exact_match", "name": "exact"}],
            fail_on_item_error_rate=1,
        )
        (sub / "solvers.py").write_text(SOLVERS)
        code = main(["run", str(spec), "--store", store, "--quiet"])
        assert code == 0
        run_ids[name] = Store(store).runs().filter(pl.col("name") == name).collect()["run_id"][0]
    return store, run_ids


def compare_json(capsys, store, *argv, code=EXIT_OK):
    """`assay compare ARGV --json` on `store` at 2000 resamples: asserts it exits `code`; its JSON."""
    return assay_json(capsys, "compare", *argv, "--store", store, "--resamples", "2000", code=code)


def compare_refused(capsys, store, *argv) -> str:
    """`assay compare ARGV` refused as bad input (exit 2): what it says."""
    return assay_out(capsys, "compare", *argv, "--store", store, "--json", code=EXIT_INPUT).err


def test_a_regression_is_found_gated_and_stored(evals, capsys):
    store, runs = evals
    doc = compare_json(capsys, store, runs["right"], "--candidate", runs["worse"], code=EXIT_GATE)
    assert doc["passed"] is False
    assert set(doc) == set(get_type_hints(Comparison))
    (row,) = doc["scorers"]
    estimate = {f.name for f in fields(PairedEstimate)} - {"n"}
    assert set(row) == set(get_type_hints(ScorerComparison)) | estimate
    for gate in doc["gates"]:
        assert GateResult.__required_keys__ <= set(gate) <= set(get_type_hints(GateResult))
    assert {gate["gate"] for gate in doc["gates"]} == set(Gate)
    assert row["n_pairs"] == N and row["baseline_mean"] == 1.0
    assert row["delta"] == pytest.approx(row["candidate_mean"] - 1.0) and -0.3 < row["delta"] < -0.1
    assert row["ci_high"] < 0 and row["verdict"] == "regressed"
    assert row["clustered_se"] is not None and row["n_clusters"] == 20, "items carry a `cluster` annotation"
    assert any("exact" in m and "regressed" in m for m in doc["failed_gates"])
    assert doc["lines"][0].startswith("exact −") and "regressed" in doc["lines"][0]
    assert doc["cost"]["certified"] is False
    assert doc["cost"]["reason"] == "accounting incomplete on the baseline side (uninstrumented 200)"

    stored = pl.read_parquet(f"{store}/comparisons/**/*.parquet", hive_partitioning=True)
    assert stored.filter(pl.col("comparison_id") == doc["comparison_id"])["verdict"].to_list() == [
        "regressed"
    ]


def test_identical_runs_are_unchanged_and_repeats_average(evals, capsys):
    store, runs = evals
    doc = compare_json(capsys, store, runs["right"], runs["right2"], "--candidate", runs["right"])
    assert doc["passed"]
    (row,) = doc["scorers"]
    assert row["verdict"] == "unchanged" and row["delta"] == 0 and row["n_pairs"] == N
    assert doc["baseline"] == [runs["right"], runs["right2"]]


def test_item_error_rate_gate_names_side_run_and_figures(evals, capsys):
    store, runs = evals
    doc = compare_json(capsys, store, runs["right"], "--candidate", runs["flaky"], code=EXIT_GATE)
    gate = next(g for g in doc["gates"] if g["gate"] == "item_error_rate" and g["side"] == "candidate")
    assert gate["passed"] is False and 0.2 < gate["value"] < 0.4
    assert runs["flaky"] in gate["message"] and "failed of 200 attempted" in gate["message"]
    (row,) = doc["scorers"]
    assert row["unscored_candidate"] == N - row["n_pairs"] > 0, "failed items are unscored, not zeros"
    assert row["verdict"] == "unchanged", "what the flaky run did answer, it answered right"
    compare_json(capsys, store, runs["right"], "--candidate", runs["flaky"], "--max-item-error-rate", "1")


def test_item_error_rate_gate_is_per_run_and_names_the_run(evals, capsys):
    """A baseline run failing 10 % beside a clean repeat pools to exactly 5 % and would pass a
    5 % gate; the seed evaluates each run, so the failing run fails the gate, by name."""
    store, runs = evals
    doc = compare_json(
        capsys,
        store,
        runs["right"],
        runs["tenth"],
        "--candidate",
        runs["right"],
        runs["right2"],
        code=EXIT_GATE,
    )
    assert doc["passed"] is False
    gates = [g for g in doc["gates"] if g["gate"] == "item_error_rate"]
    assert [(g["side"], g["runs"]) for g in gates] == [
        ("baseline", [runs["right"]]),
        ("baseline", [runs["tenth"]]),
        ("candidate", [runs["right"]]),
        ("candidate", [runs["right2"]]),
    ]
    (failing,) = [g for g in gates if not g["passed"]]
    assert failing["runs"] == [runs["tenth"]] and failing["value"] == pytest.approx(0.1)
    assert failing["message"].startswith(f"baseline run 2 ({runs['tenth']}): item error rate 10.0%")
    assert "20 failed of 200 attempted" in failing["message"]
    assert failing["message"] in doc["failed_gates"]


def test_fail_on_inconclusive_and_thresholds(evals, capsys):
    store, runs = evals
    doc = compare_json(capsys, store, runs["right"], "--candidate", runs["worse"], "--threshold", "exact=0.5")
    assert doc["scorers"][0]["threshold"] == 0.5
    assert doc["scorers"][0]["verdict"] == "unchanged", "the CI lies inside ±0.5"


def test_bad_input_exits_2(evals, capsys):
    store, runs = evals
    err = compare_refused(capsys, store, runs["right"], "--candidate", runs["other"])
    assert "different datasets" in err and runs["other"] in err
    assert "no run 'nope'" in compare_refused(capsys, store, "nope", "--candidate", runs["right"])
    err = compare_refused(capsys, store, runs["right"], "--candidate", runs["worse"], "--threshold", "exact")
    assert "NAME=NUMBER" in err


def test_power_from_one_run(evals, capsys):
    store, runs = evals
    assert main(["power", runs["worse"], "--mde", "0.05", "--store", store, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (row,) = report["scorers"]
    scores = Store(store).run_scores(runs["worse"])["score"].to_list()
    p = sum(scores) / len(scores)
    variance = sum((s - p) ** 2 for s in scores) / (len(scores) - 1)
    z = 1.959964 + 0.841621  # z_{0.975} + z_{0.80}
    by_hand = (z * (2 * variance) ** 0.5 / 0.05) ** 2
    assert row["items_needed"] == pytest.approx(by_hand, abs=1.01)
    assert row["n_scored"] == N and row["enough"] is (N >= row["items_needed"])
    assert main(["power", runs["worse"], "--mde", "0", "--store", store]) == 2


def test_nothing_paired_is_bad_input(evals, capsys):
    store, runs = evals
    rescore = assay_json(
        capsys, "rescore", runs["right"], "--scorer", "{kind: token_f1, name: f1}", "--store", store
    )
    assert "nothing paired" in compare_refused(capsys, store, runs["right"], "--candidate", rescore["run_id"])


def test_the_terminal_labels_the_comparison_id(evals, capsys):
    store, runs = evals
    assert main(["compare", runs["right"], "--candidate", runs["right2"], "--store", store]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    (comparison_id,) = (
        pl.read_parquet(f"{store}/comparisons/**/*.parquet", hive_partitioning=True)
        .sort("created_at")["comparison_id"]
        .tail(1)
    )
    assert head == (
        f"compare {runs['right']} → {runs['right2']}  · comparison {comparison_id} "
        "(stored in the store's comparisons/)"
    ), head


PRICES = {"mock-1": {"input": 10.0, "output": 30.0}}


def _priced_run(capsys, folder, mock, store, **overrides) -> str:
    """A run of 10 arithmetic items against the mock server, every call priced."""
    folder.mkdir()
    (folder / "skips.py").write_text(
        "def not_q3(output, input, annotations):\n    return '3 + 3' not in input\n"
    )
    spec = openai_spec(folder, mock.base_url, n=10, prices=PRICES, fail_on_item_error_rate=1, **overrides)
    return assay_json(capsys, "run", spec, "--store", store)["run_id"]


def test_cost_is_certified_only_when_every_run_did_the_same_work(tmp_path, mock, capsys):
    """The seed's certifyCost: per-item scorer coverage and per-run work, not pooled sets; and
    the summary line speaks of cost only when it is certified."""
    store = str(tmp_path / "store")
    full = _priced_run(capsys, tmp_path / "full", mock, store)
    again = _priced_run(capsys, tmp_path / "again", mock, store)
    doc = compare_json(capsys, store, full, "--candidate", again)
    assert doc["cost"]["certified"] is True and doc["cost"]["reason"] is None
    assert doc["cost"]["change_pct"] == 0

    # Same scorers scored somewhere on each side, but the candidate skipped one on item q3.
    skipping = _priced_run(
        capsys,
        tmp_path / "skipping",
        mock,
        store,
        scorers=[
            {"kind": "exact_match", "name": "exact"},
            {"kind": "regex", "name": "digits", "pattern": "\\d+", "applies": "skips:not_q3"},
        ],
    )
    doc = compare_json(capsys, store, full, "--candidate", skipping)
    assert doc["cost"]["certified"] is False
    assert doc["cost"]["reason"] == (
        f"scorer coverage differs for 'digits' at q3 trial 0: only baseline run {full} produced a score"
    )

    # A budget-stopped repeat on the baseline: pooled, the side completed every item; per run, it
    # did not, and its side's mean cost per run is no measure of the target.
    stopped = _priced_run(capsys, tmp_path / "stopped", mock, store, budget="$0.0007", concurrency=1)
    doc = compare_json(capsys, store, full, stopped, "--candidate", again)
    assert doc["cost"]["certified"] is False
    assert doc["cost"]["reason"] == (
        f"item coverage differs at q4 trial 0: only baseline run {full} completed it"
    )
    assert doc["cost"]["change_pct"] > 1
    assert not any("expensive" in line or "cheaper" in line for line in doc["lines"])
