"""How many requests reading an S3 store takes, against a real S3 API server (moto) on 127.0.0.1,
counted in the server's own request log: every run's current record found in one listing, and
the local copies of the parts (`Store.keep_copies`, as `assay view` keeps them) — a part is
fetched once and then read from its copy, a new batch shows at once, a deleted run is not read
back from its copies, and the copies stay under their cap."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from assay import _schema
from assay.store import Store
from assay.testing.s3 import S3Server
from tests.helpers.s3_requests import S3Requests, s3_requests
from tests.helpers.synthetic_runs import conform, write_run

PART = "run_id=a/part-00000-bench.parquet"


@pytest.fixture
def requests() -> Iterator[S3Requests]:
    with s3_requests() as requests:
        yield requests


@pytest.fixture
def store(s3: S3Server, request: pytest.FixtureRequest) -> Store:
    store = Store(s3.url(request.node.name))
    write_run(store, "a", 40, seed=1)
    write_run(store, "b", 40, seed=2)
    return store


def _copying(store: Store, folder: Path, cap_bytes: int = 2**30, grace_s: float = 60.0) -> Store:
    copying = Store(store.root)
    copying.keep_copies(folder, cap_bytes)
    assert copying.copies is not None
    copying.copies.grace_s = grace_s
    return copying


def _items(store: Store, run_id: str) -> pl.DataFrame:
    return store.scan_run(run_id, "items").sort("item_id").collect()


def test_every_runs_current_record_is_found_in_one_listing(store, requests):
    for revision in range(3):  # a's record gets more revisions; the newest is the current one
        store.write_run("a", {**store.read_run("a"), "name": f"a{revision}"})
    requests.listings()
    runs = store.runs().sort("run_id").collect()
    assert runs["run_id"].to_list() == ["a", "b"] and runs["name"].to_list()[0] == "a2"
    assert requests.listings() == 1  # was one per run, plus one of the runs


def test_a_part_is_fetched_once_then_read_from_its_copy(store, tmp_path, requests):
    copying = _copying(store, tmp_path / "copies")
    expected, expected_scores = _items(store, "a"), store.run_scores("a").sort("item_id", "scorer")
    requests.part_gets()

    assert _items(copying, "a").equals(expected)
    assert requests.part_gets() == [f"items/{PART}"]  # one GET of the whole object
    assert _items(copying, "a").equals(expected)
    assert copying.run_items("a").sort("item_id").equals(expected)
    assert copying.run_scores("a").sort("item_id", "scorer").equals(expected_scores)
    assert requests.part_gets() == [f"scores/{PART}"]  # the scores part, once
    _items(copying, "a")
    copying.run_scores("a")
    assert requests.part_gets() == []  # only listings reach the bucket now

    # Without copies every query reads the bucket's object again.
    _items(store, "a")
    _items(store, "a")
    assert len(requests.part_gets()) >= 2


def test_a_new_batch_shows_at_once_and_a_deleted_run_is_not_read_from_its_copies(store, tmp_path, requests):
    copying = _copying(store, tmp_path / "copies")
    assert _items(copying, "a").height == 40
    assert _items(copying, "b").height == 40

    more = store.run_items("a").head(3).with_columns(pl.format("new-{}", "item_id").alias("item_id"))
    store.commit_batch(
        "a", "part-00001-more", conform(more.to_arrow(), _schema.ITEMS), conform(pa.table({}), _schema.SCORES)
    )
    requests.part_gets()
    assert _items(copying, "a").height == 43
    assert requests.part_gets() == ["items/run_id=a/part-00001-more.parquet"]  # the new part alone

    store.delete_run("b")
    assert _items(copying, "b").height == 0
    assert _items(copying, "b").equals(_items(store, "b"))
    assert _items(copying, "a").height == 43


def test_the_copies_stay_under_their_cap_and_an_evicted_one_is_fetched_again(store, tmp_path, requests):
    folder = tmp_path / "copies"
    one_part = max(path.stat().st_size for path in _parts(_copying(store, tmp_path / "sizes"), "a"))
    copying = _copying(store, folder, cap_bytes=one_part, grace_s=0.0)
    expected = _items(store, "a")
    requests.part_gets()

    _items(copying, "a")
    _items(copying, "b")  # a's copy is read longest ago: deleted to stay under the cap
    assert copying.copies is not None and copying.copies.kept_bytes <= one_part
    assert [p.parent.name for p in folder.rglob("part-*.parquet")] == ["run_id=b"]
    requests.part_gets()
    assert _items(copying, "a").equals(expected)
    assert requests.part_gets() == [f"items/{PART}"]


def test_a_copy_read_within_the_grace_period_is_kept_past_the_cap(store, tmp_path):
    folder = tmp_path / "copies"
    copying = _copying(store, folder, cap_bytes=1)
    _items(copying, "a")
    _items(copying, "b")  # a query may still be reading a's copy: both are kept
    assert sorted(p.parent.name for p in folder.rglob("part-*.parquet")) == ["run_id=a", "run_id=b"]


def test_a_copy_deleted_behind_the_stores_back_is_fetched_again(store, tmp_path, requests):
    folder = tmp_path / "copies"
    copying = _copying(store, folder)
    expected = _items(store, "a")
    _items(copying, "a")
    for copy in folder.rglob("part-*.parquet"):  # a temporary-files cleaner, say
        copy.unlink()
    requests.part_gets()
    assert _items(copying, "a").equals(expected)
    assert requests.part_gets() == [f"items/{PART}"]


def test_copies_that_cannot_be_written_leave_the_bucket_read(store, tmp_path, caplog):
    folder = tmp_path / "copies"
    copying = _copying(store, folder)
    shutil.rmtree(folder)
    folder.write_text("a file where the copies' folder was")
    assert _items(copying, "a").equals(_items(store, "a"))
    assert "its local copies failed" in caplog.text


def _parts(store: Store, run_id: str) -> list[Path]:
    assert store.copies is not None
    keys = store._parts("items", run_id)
    return [Path(path) for path in store.copies.paths(keys)]


def test_a_local_store_keeps_no_copies(tmp_path):
    local = Store(tmp_path / "store")
    local.keep_copies(tmp_path / "copies", 2**20)
    assert local.copies is None
