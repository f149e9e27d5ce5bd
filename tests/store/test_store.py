"""The store as analysts read it: Polars and DuckDB agree, and the docs list every column."""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import get_type_hints

import duckdb
import polars as pl
import pytest

from assay import _schema, outcomes
from assay.analysis.summary import CostSummary, RunSummary, summarise
from assay.cli import main
from assay.outcomes import TOKEN_KINDS, ItemOutcome
from assay.store import Store
from tests.conftest import REPO, openai_spec

DOC = (REPO / "docs" / "schema.md").read_text()


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, mock_server) -> Path:
    """A store holding two runs of the same spec, one with a failing item."""
    folder = tmp_path_factory.mktemp("store-runs")
    mock_server.reset()
    mock_server.configure(latency_ms=0, faults=[], answers={"What is 2 + 2?": "4"})
    spec = openai_spec(folder, mock_server.base_url, n=8, fail_on_item_error_rate=1)
    assert main(["run", str(spec), "--store", str(folder / "store"), "--quiet"]) == 0
    mock_server.configure(faults=[{"status": 400, "times": 1, "match": "What is 5 + 5?"}])
    assert main(["run", str(spec), "--store", str(folder / "store"), "--quiet"]) == 0
    mock_server.reset()
    return folder / "store"


def test_polars_and_duckdb_agree(two_runs):
    store = Store(two_runs)
    by_polars = (
        store.scores()
        .filter(pl.col("outcome") == "scored")
        .group_by("run_id", "scorer")
        .agg(pl.col("score").mean().alias("mean"), pl.len().alias("n"))
        .sort("run_id", "scorer")
        .collect()
    )
    by_duckdb = pl.from_arrow(
        duckdb.sql(
            f"""SELECT run_id, scorer, avg(score) AS mean, count(*) AS n
            FROM read_parquet('{two_runs}/scores/**/*.parquet', hive_partitioning = true)
            WHERE outcome = 'scored' GROUP BY run_id, scorer ORDER BY run_id, scorer"""
        ).arrow()
    )
    assert by_polars.height == 4
    assert by_polars["run_id"].to_list() == by_duckdb["run_id"].to_list()
    assert by_polars["mean"].to_list() == pytest.approx(by_duckdb["mean"].to_list())
    assert by_polars["n"].to_list() == by_duckdb["n"].to_list()
    assert sorted(by_polars["n"].to_list()) == [7, 7, 8, 8]

    items_polars = store.items().group_by("outcome").len().sort("outcome").collect()
    items_duckdb = duckdb.sql(
        f"SELECT outcome, count(*) FROM read_parquet('{two_runs}/items/**/*.parquet', hive_partitioning=true) "
        "GROUP BY outcome ORDER BY outcome"
    ).fetchall()
    assert list(items_polars.iter_rows()) == items_duckdb == [("completed", 15), ("failed", 1)]
    runs = duckdb.sql(
        f"SELECT run_id, status, n_completed, n_failed FROM read_parquet('{two_runs}/runs/**/*.parquet', "
        "hive_partitioning=true) QUALIFY revision = max(revision) OVER (PARTITION BY run_id) ORDER BY run_id"
    ).fetchall()
    assert sorted(r[1:] for r in runs) == [("completed", 7, 1), ("completed", 8, 0)]
    assert [r[0] for r in runs] == store.runs().sort("run_id").collect()["run_id"].to_list()


def test_written_files_have_exactly_the_documented_schema(two_runs):
    for dataset, schema in (("items", _schema.ITEMS), ("scores", _schema.SCORES), ("runs", _schema.RUNS)):
        for path in (two_runs / dataset).rglob("*.parquet"):
            written = pl.read_parquet_schema(path)
            assert list(written) == schema.names, path


@pytest.mark.parametrize(
    "name, schema, key",
    [
        ("runs", _schema.RUNS, "run_id"),
        ("items", _schema.ITEMS, "run_id"),
        ("scores", _schema.SCORES, "run_id"),
        ("turns", _schema.TURNS, "run_id"),
        ("comparisons", _schema.COMPARISONS, "comparison_id"),
        ("leaderboards", _schema.LEADERBOARDS, "matrix_id"),
    ],
)
def test_docs_list_every_column_with_its_type(name, schema, key):
    section = DOC.split(f"\n## {name}\n")[1].split("\n## ")[0]
    documented = dict(re.findall(r"^\| `(\w+)` \| `([^`]+)` \|", section, flags=re.MULTILINE))
    assert documented.pop(key) == "string"
    assert documented == {field.name: str(field.type) for field in schema}


@pytest.mark.parametrize(
    "enum",
    [
        value
        for value in vars(outcomes).values()
        if isinstance(value, type) and issubclass(value, StrEnum) and value.__module__ == outcomes.__name__
    ],
)
def test_docs_list_every_enum_value(enum):
    values = [f"`{value.value}`" for value in enum]
    rows = [line for line in DOC.splitlines() if line.startswith("| ")]
    assert any(all(value in row for value in values) for row in rows), f"no table row lists all of {values}"


def test_a_summary_has_the_keys_its_typed_dict_names(two_runs):
    store = Store(two_runs)
    for run_id in store.runs().collect()["run_id"]:
        summary = summarise(store, run_id)
        assert set(summary) == RunSummary.__required_keys__ | {"accounting"}
        assert set(summary["cost"]) == set(get_type_hints(CostSummary))
        assert list(summary["items"]) == [outcome.value for outcome in ItemOutcome]
        assert list(summary["tokens"]) == list(TOKEN_KINDS)
        assert set(summary["accounting"]) <= set(_schema.RUNS.names)
