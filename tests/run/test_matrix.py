"""Matrix specs (`targets:`): one run per cell under one matrix id, and the leaderboard."""

from __future__ import annotations

import json

import polars as pl
import pytest

from assay.cli import main
from assay.store import Store
from tests.conftest import arithmetic_rows, write_jsonl, write_spec

SOLVERS = """
def perfect(x):
    return str(int(x) * 2)

def sloppy(x):
    return str(int(x) * 2) if int(x) % 4 else "?"

def awful(x):
    return str(int(x) * 2) if int(x) % 2 else "?"
"""


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    folder = tmp_path_factory.mktemp("matrix")
    (folder / "cells.py").write_text(SOLVERS)
    write_jsonl(
        folder / "data.jsonl", [{"id": f"i{i}", "input": str(i), "expected": str(2 * i)} for i in range(120)]
    )
    spec = write_spec(
        folder,
        name="matrix",
        dataset={"path": "data.jsonl", "id": "id"},
        targets={
            "sloppy": {"kind": "python", "function": "cells:sloppy"},
            "perfect": {"kind": "python", "function": "cells:perfect"},
            "awful": {"kind": "python", "function": "cells:awful"},
        },
        scorers=[{"kind": "exact_match", "name": "exact"}],
    )
    store = str(folder / "store")
    return folder, spec, store


def test_every_cell_is_its_own_run_under_one_matrix(matrix, capsys):
    _, spec, store = matrix
    assert main(["run", str(spec), "--store", store, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    matrix_id = summary["matrix_id"]
    assert [cell["cell"] for cell in summary["cells"]] == ["sloppy", "perfect", "awful"]
    runs = Store(store).runs().filter(pl.col("matrix_id") == matrix_id).collect()
    assert sorted(runs["run_id"]) == sorted(f"{matrix_id}-{cell}" for cell in ("sloppy", "perfect", "awful"))
    assert runs["dataset_hash"].n_unique() == 1 and runs["target_hash"].n_unique() == 3
    for cell in summary["cells"]:
        assert Store(store).run_items(cell["run_id"]).height == 120

    board = summary["leaderboard"]
    assert board["baseline_cell"] == "sloppy", "the spec's first cell"
    by_cell = {row["cell"]: row for row in board["rows"]}
    assert (
        by_cell["perfect"]["rank"] == 1 and by_cell["sloppy"]["rank"] == 2 and by_cell["awful"]["rank"] == 3
    )
    assert by_cell["perfect"]["mean"] == 1.0 and by_cell["sloppy"]["mean"] == 0.75
    assert by_cell["perfect"]["verdict_vs_baseline"] == "improved"
    assert by_cell["awful"]["verdict_vs_baseline"] == "regressed"
    assert by_cell["awful"]["delta_vs_baseline"] == pytest.approx(-0.25)
    assert by_cell["sloppy"]["verdict_vs_baseline"] is None
    assert by_cell["sloppy"]["ci_low"] < 0.75 < by_cell["sloppy"]["ci_high"]
    stored = pl.read_parquet(f"{store}/leaderboards/matrix_id={matrix_id}/*.parquet")
    assert stored.height == 3 and set(stored["cell"]) == {"sloppy", "perfect", "awful"}
    assert set(stored["revision"]) == {1}


@pytest.mark.slow
def test_leaderboard_command_with_another_baseline(matrix, capsys):
    _, spec, store = matrix
    main(["run", str(spec), "--store", store, "--json"])
    matrix_id = json.loads(capsys.readouterr().out)["matrix_id"]
    assert main(["leaderboard", matrix_id, "--baseline", "perfect", "--store", store, "--json"]) == 0
    board = json.loads(capsys.readouterr().out)
    verdicts = {row["cell"]: row["verdict_vs_baseline"] for row in board["rows"]}
    assert verdicts == {"perfect": None, "sloppy": "regressed", "awful": "regressed"}
    # The rebuild is the matrix's second revision of its leaderboard, beside the first.
    stored = pl.read_parquet(f"{store}/leaderboards/matrix_id={matrix_id}/*.parquet")
    current = stored.filter(pl.col("revision") == pl.col("revision").max())
    assert sorted(stored["revision"].unique()) == [1, 2] and set(current["baseline_cell"]) == {"perfect"}
    # Two cells against one baseline are a family: Holm-adjusted, said beside each verdict.
    assert (
        main(
            [
                "leaderboard",
                matrix_id,
                "--baseline",
                "perfect",
                "--adjust",
                "holm",
                "--store",
                store,
                "--json",
            ]
        )
        == 0
    )
    adjusted = {row["cell"]: row for row in json.loads(capsys.readouterr().out)["rows"]}
    for cell in ("sloppy", "awful"):
        row = adjusted[cell]
        assert row["verdict_vs_baseline"] == "regressed" and row["adjustment"] == "holm"
        assert 0 < row["p_adjusted"] <= 0.05 and row["delta_ci_method"] == "newcombe"  # 120 pass/fail pairs
    assert adjusted["perfect"]["adjustment"] is None and adjusted["perfect"]["ci_method"] == "wilson"
    stored = pl.read_parquet(f"{store}/leaderboards/matrix_id={matrix_id}/*.parquet")
    assert set(stored.filter(pl.col("revision") == 3)["adjustment"].drop_nulls()) == {"holm"}
    assert main(["leaderboard", matrix_id, "--baseline", "nope", "--store", store]) == 2
    assert "sloppy, perfect, awful" in capsys.readouterr().err
    assert main(["leaderboard", "no-such-matrix", "--store", store]) == 2


@pytest.mark.slow
def test_a_cell_resumes_alone(matrix, capsys):
    _, spec, store = matrix
    main(["run", str(spec), "--store", store, "--json"])
    summary = json.loads(capsys.readouterr().out)
    cell_run = summary["cells"][1]["run_id"]
    assert main(["resume", cell_run, "--store", store, "--json"]) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert resumed["run_id"] == cell_run and resumed["cell"] == "perfect"
    assert Store(store).run_items(cell_run).height == 120


def test_target_and_targets_together_is_bad_input(matrix, capsys):
    folder, spec, _ = matrix
    bad = spec.read_text() + "target: {kind: python, function: 'cells:perfect'}\n"
    (folder / "bad.yaml").write_text(bad)
    assert main(["run", str(folder / "bad.yaml"), "--store", str(folder / "bad-store")]) == 2
    assert "either `target` or `targets`" in capsys.readouterr().err
    assert not (folder / "bad-store").exists()


def test_a_rescore_of_a_cell_keeps_its_cell(tmp_path, capsys):
    (tmp_path / "cells.py").write_text(SOLVERS)
    write_jsonl(
        tmp_path / "data.jsonl", [{"id": f"i{i}", "input": str(i), "expected": str(2 * i)} for i in range(4)]
    )
    spec = write_spec(
        tmp_path,
        name="matrix",
        dataset={"path": "data.jsonl", "id": "id"},
        targets={"perfect": {"kind": "python", "function": "cells:perfect"}},
        scorers=[{"kind": "exact_match", "name": "exact"}],
    )
    store = str(tmp_path / "store")
    assert main(["run", str(spec), "--store", store, "--json"]) == 0
    (cell,) = json.loads(capsys.readouterr().out)["cells"]
    assert (
        main(
            [
                "rescore",
                cell["run_id"],
                "--scorer",
                "{kind: includes, value: '2'}",
                "--store",
                store,
                "--json",
            ]
        )
        == 0
    )
    rescore = Store(store).read_run(json.loads(capsys.readouterr().out)["run_id"])
    assert rescore["kind"] == "rescore" and rescore["cell"] == "perfect"
    assert rescore["matrix_id"] is None, "a rescore is no cell of the matrix's leaderboard"


def test_the_leaderboard_names_each_cells_model(tmp_path, mock, capsys):
    """Cells told apart by their model, on the terminal and in `--json` (the run facts beside the rows)."""
    write_jsonl(tmp_path / "data.jsonl", arithmetic_rows(4))
    cell = {"kind": "openai", "base_url": mock.base_url, "prompt": "{question}"}
    spec = write_spec(
        tmp_path,
        name="two-models",
        dataset={"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        targets={"small": {**cell, "model": "mock-small"}, "large": {**cell, "model": "mock-large"}},
        scorers=[{"kind": "exact_match", "name": "exact"}],
        fail_on_item_error_rate=1,
    )
    store = str(tmp_path / "s")
    assert main(["run", str(spec), "--store", store, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    matrix_id = summary["matrix_id"]
    runs = summary["leaderboard"]["runs"]
    assert {facts["cell"]: facts["model"] for facts in runs.values()} == {
        "small": "mock-small",
        "large": "mock-large",
    }
    assert main(["leaderboard", matrix_id, "--store", store]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "exact" in line]
    cells = {line.split("│")[3].strip(): line.split("│")[4].strip() for line in rows}
    assert cells == {"small": "mock-small", "large": "mock-large"}, rows
