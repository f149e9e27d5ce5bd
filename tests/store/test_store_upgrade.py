"""A store an older Assay wrote (before gauges, sessions and sandboxes added columns) still reads:
missing columns are null or their default, and a run of today can sit beside it."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from assay import _schema
from assay.analysis.summary import summarise
from assay.store import Store
from tests.conftest import openai_spec, run_assay


def _drop(path, columns: list[str]) -> None:
    table = pq.read_table(path)
    pq.write_table(table.drop_columns([c for c in columns if c in table.column_names]), path)


@pytest.mark.slow
def test_a_store_without_todays_columns_reads_and_summarises(tmp_path, mock) -> None:
    spec = openai_spec(tmp_path, mock.base_url, n=4)
    store = tmp_path / "store"
    assert run_assay("run", str(spec), "--store", str(store), "--quiet").returncode == 0
    (run_dir,) = (store / "runs").glob("run_id=*")
    run_id = run_dir.name.removeprefix("run_id=")
    # What an older Assay wrote: no gauges (`kind`, `value`), no sandbox or session columns.
    for part in (store / "scores").rglob("*.parquet"):
        table = pq.read_table(part)
        old = table.filter(pa.compute.equal(table["kind"], "score"))
        pq.write_table(old.drop_columns(["kind", "value"]), part)
    for part in (store / "items").rglob("*.parquet"):
        _drop(part, ["artifacts", "sandbox", "teardown_error", "attempt", "attempts_made"])
    # Its run record was one file, `run.parquet`, replaced at each change (no revisions).
    *older, newest = sorted(run_dir.glob("run-*.parquet"))
    newest.rename(run_dir / "run.parquet")
    for path in older:
        path.unlink()
    _drop(run_dir / "run.parquet", ["revision", "policy", "attempts", "target_snapshot", "summary_json"])

    data = Store(store)
    scores = data.run_scores(run_id)
    assert scores.height == 8 and set(scores["kind"]) == {"score"}
    assert scores["value"].to_list() == scores["score"].to_list()
    assert data.run_items(run_id)["sandbox"].null_count() == 4
    record = data.read_run(run_id)
    assert record["target_snapshot"] is None and record["revision"] == 0 and record["status"] == "completed"
    assert data.runs().select("run_id", "revision").collect().rows() == [(run_id, 0)]
    assert set(data.scores().collect().columns) >= {name for name in _schema.SCORES.names}
    summary = summarise(data, run_id)
    assert {row["scorer"]: row["scored"] for row in summary["scorers"]} == {"exact": 4, "digits": 4}
    assert summary["gauges"] == []
    # Today's run beside the old one: both read through the analyst's view.
    assert run_assay("run", str(spec), "--store", str(store), "--quiet").returncode == 0
    kinds = data.scores().group_by("kind").len().collect()
    assert set(kinds["kind"]) == {"score", "gauge"}
    # A change to the old run is its revision 1, which supersedes `run.parquet`.
    data.write_run(run_id, {**record, "tags": ["upgraded"]})
    assert data.read_run(run_id)["tags"] == ["upgraded"] and (run_dir / "run-000001.parquet").is_file()
    assert data.runs().filter(pl.col("run_id") == run_id).select("revision", "tags").collect().rows() == [
        (1, ["upgraded"])
    ]


@pytest.mark.slow
def test_a_store_a_newer_assay_wrote_reads_with_the_columns_this_one_knows(tmp_path, mock) -> None:
    """A nightly on a newer Assay adds columns an analyst's older Assay does not know: its readers
    leave them out instead of failing the whole scan ("extra column in file")."""
    spec = openai_spec(tmp_path, mock.base_url, n=4)
    store = tmp_path / "store"
    assert run_assay("run", str(spec), "--store", str(store), "--quiet").returncode == 0
    for dataset in ("items", "scores", "runs"):
        for part in (store / dataset).rglob("*.parquet"):
            table = pq.read_table(part)
            pq.write_table(table.append_column("from_the_future", pa.array([1.5] * table.num_rows)), part)
    data = Store(store)
    (run_id,) = data.runs().select("run_id").collect()["run_id"].to_list()
    assert data.run_items(run_id).height == 4 and "from_the_future" not in data.run_items(run_id).columns
    assert data.run_scores(run_id).height == 8 and "from_the_future" not in data.scores().collect().columns
    assert data.read_run(run_id)["status"] == "completed"
    assert summarise(data, run_id)["items"]["completed"] == 4
    shown = run_assay("show", run_id, "--store", str(store))
    assert shown.returncode == 0 and "from_the_future" not in shown.stdout, shown.stderr[-2000:]
