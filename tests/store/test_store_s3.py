"""The store on S3-compatible object storage: a real S3 API server (moto) on 127.0.0.1.

The whole cycle — run, resume, rescore, compare, report, show — with `--store s3://…`; the commit
protocol without rename (put-if-absent with `If-None-Match: *`, the items part as commit marker);
leases taken with a conditional PUT; a SIGKILL between two PUTs of a batch and a resume with
every item and score exactly once; and the analysts' reads (Polars with `storage_options`).
"""

from __future__ import annotations

import json
import re
import signal
import threading
from pathlib import Path

import duckdb
import duckdb_ext
import polars as pl
import pyarrow as pa
import pytest

from assay.errors import InputError, RunHeldError
from assay.store import Store
from assay.store.lease import Lease
from assay.testing.s3 import S3Server
from tests.conftest import REPO, openai_spec, run_assay
from tests.helpers.cli import assay_json


def _url(s3: S3Server, request: pytest.FixtureRequest) -> str:
    """A prefix of its own per test."""
    return s3.url(request.node.name.replace("[", "-").replace("]", ""))


def test_put_if_absent_is_a_conditional_put(s3, request):
    store = Store(_url(s3, request))
    assert store.local is False and store.root == _url(s3, request)
    assert store.location.create("x/a.json", b"first", ".staging")
    assert not store.location.create("x/a.json", b"second", ".staging")  # 412 from the server
    assert store.location.read("x/a.json") == b"first"
    assert store.location.names("x") == ["a.json"] and store.location.names("nothing") == []


def test_a_run_record_gets_revisions_and_two_writers_never_share_one(s3, request):
    store = Store(_url(s3, request))
    record = {"name": "r", "status": "running"}
    revisions: list[int] = []
    threads = [
        threading.Thread(target=lambda: revisions.append(store.write_run("r1", record))) for _ in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(revisions) == [1, 2, 3, 4, 5, 6]
    assert store.read_run("r1")["revision"] == 6


def test_a_lease_is_taken_by_exactly_one_of_two_racing_processes(s3, request):
    store = Store(_url(s3, request))
    leases = [Lease(store, "r1") for _ in range(8)]
    for lease in leases:
        lease.holder["host"] = "elsewhere"  # not this host: a live pid check cannot decide
    won, refused = [], []
    barrier = threading.Barrier(len(leases))

    def take(lease: Lease) -> None:
        barrier.wait()
        try:
            lease.acquire()
            won.append(lease)
        except RunHeldError:
            refused.append(lease)

    threads = [threading.Thread(target=take, args=(lease,)) for lease in leases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1 and len(refused) == 7
    winner = won[0]
    winner.renew()
    winner.check()
    winner.release()
    again = Lease(store, "r1")
    again.acquire()  # released: free to take
    assert again.generation > winner.generation


def test_an_unknown_store_scheme_is_bad_input():
    with pytest.raises(InputError, match="gs:// is not a store"):
        Store("gs://bucket/x")


@pytest.mark.slow
def test_run_resume_rescore_compare_report_show_on_s3(s3, request, tmp_path, mock, capsys):
    url = _url(s3, request)
    mock.configure(answers={"What is 3 + 3?": "6"})
    spec = openai_spec(tmp_path, mock.base_url, n=12)
    first = assay_json(capsys, "run", str(spec), "--store", url)
    assert first["status"] == "completed" and first["items"]["completed"] == 12
    store = Store(url)
    assert store.run_items(first["run_id"]).height == 12
    assert store.run_scores(first["run_id"]).height == 24
    assert not (tmp_path / "assay-store").exists()

    resumed = assay_json(capsys, "resume", first["run_id"], "--store", url)
    assert resumed["items"]["completed"] == 12 and store.run_items(first["run_id"]).height == 12

    second = assay_json(capsys, "run", str(spec), "--store", url)
    rescored = assay_json(
        capsys, "rescore", first["run_id"], "--scorer", "{kind: token_f1, name: f1}", "--store", url
    )
    assert rescored["status"] == "completed"
    assert set(store.run_scores(rescored["run_id"])["scorer"]) == {"f1"}

    comparison = assay_json(
        capsys,
        "compare",
        first["run_id"],
        "--candidate",
        second["run_id"],
        "--store",
        url,
        "--resamples",
        "200",
    )
    assert comparison["comparison_id"] and store.location.names("comparisons")

    report = assay_json(capsys, "report", first["run_id"], "--store", url)
    assert report["path"] == f"{url}/reports/{first['run_id']}.html"
    assert b"<html" in store.location.read(f"reports/{first['run_id']}.html")

    shown = assay_json(capsys, "show", first["run_id"], "--store", url)
    assert shown["run_id"] == first["run_id"]
    listed = store.runs().collect()
    assert set(listed["run_id"]) == {first["run_id"], second["run_id"], rescored["run_id"]}

    # The analyst's one-liners, straight from the bucket.
    options = store.location.storage_options
    scores = pl.scan_parquet(f"{url}/scores/**/*.parquet", hive_partitioning=True, storage_options=options)
    is_score = pl.col("kind") == "score"  # the scores dataset holds the gauges' rows too
    assert scores.filter(pl.col("run_id") == first["run_id"], is_score).collect().height == 24
    assert store.scores().filter(pl.col("run_id") == second["run_id"], is_score).collect().height == 24


def test_response_cache_lives_in_the_bucket(s3, request, tmp_path, mock, capsys):
    url = _url(s3, request)
    target = {
        "kind": "openai",
        "base_url": mock.base_url,
        "model": "mock-1",
        "prompt": "{question}",
        "cache": True,
        "temperature": 0,
    }
    spec = openai_spec(tmp_path, mock.base_url, n=5, target=target)
    assay_json(capsys, "run", str(spec), "--store", url)
    assert mock.stats()["requests"] == 5
    assert Store(url).location.names("cache/responses")
    again = assay_json(capsys, "run", str(spec), "--store", url)
    assert mock.stats()["requests"] == 5 and again["items"]["completed"] == 5


@pytest.mark.slow
def test_sigkill_between_puts_of_a_batch_then_resume_commits_every_row_once(s3, request, tmp_path, mock):
    url = _url(s3, request)
    # 100 items, 4 at a time, 120 ms each: 3 s, so a batch is committed after 2 s and another at the end.
    mock.configure(latency_ms=120)
    spec = openai_spec(tmp_path, mock.base_url, n=100)
    # Killed after its second batch's scores part is PUT, before that batch's items part.
    killed = run_assay(
        "run", str(spec), "--store", url, "--quiet", env={"ASSAY_FAULT_KILL": "publish:items:2"}
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    store = Store(url)
    (run_id,) = store.runs().collect()["run_id"].to_list()
    items_parts = store.part_names(run_id, "items")
    scores_parts = store.part_names(run_id, "scores")
    assert len(items_parts) == 1 and len(scores_parts) == 2, "the second batch: scores PUT, items not"
    # Our readers leave the uncommitted batch out.
    committed = store.run_items(run_id).height
    assert 0 < committed < 100 and store.run_scores(run_id).height == 2 * committed

    resumed = run_assay("resume", run_id, "--store", url, "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["items"]["completed"] == 100
    items, scores = store.run_items(run_id), store.run_scores(run_id)
    assert items.height == 100 and items["item_id"].n_unique() == 100
    assert scores.height == 200 and scores.select("item_id", "scorer").n_unique() == 200
    # Nothing stray is left in the bucket: the orphan scores part was removed on resume.
    assert store.part_names(run_id, "scores") == store.part_names(run_id, "items")
    everything = pl.read_parquet(f"{url}/scores/**/*.parquet", storage_options=store.location.storage_options)
    assert everything.filter(pl.col("kind") == "score").height == 200


def test_the_analysts_s3_snippet_runs_against_the_bucket(s3, request, tmp_path, mock, capsys):
    """docs/analysts.md's `python s3` block, with its STORE pointed at this test's prefix."""
    url = _url(s3, request)
    spec = openai_spec(tmp_path, mock.base_url, n=6)
    run = assay_json(capsys, "run", str(spec), "--store", url)
    text = (REPO / "docs" / "analysts.md").read_text()
    (code,) = re.findall(r"```python s3\n(.*?)```", text, flags=re.DOTALL)
    assert 'STORE = "s3://evals/assay"' in code
    scope: dict = {}
    code = code.replace('"s3://evals/assay"', repr(url))
    exec(compile(code, "docs/analysts.md", "exec"), scope)  # noqa: S102 - the repo's own doc, on purpose
    result = scope["result"]
    assert result["run_id"].to_list() == [run["run_id"]] * 2
    assert result["n"].to_list() == [6, 6]

    # The `sql s3` block, through DuckDB's httpfs (from PyPI's duckdb-ext-httpfs: no download),
    # with its secret pointed at this server: the same rows as Polars.
    (sql,) = re.findall(r"```sql s3\n(.*?)```", text, flags=re.DOTALL)
    statements = [s.strip() for s in sql.split(";") if s.strip()]
    assert [s.split()[0] for s in statements] == ["LOAD", "CREATE", "SELECT"]
    endpoint = s3.endpoint.removeprefix("http://")
    secret = (
        statements[1]
        .replace("'your-key-id'", "'testing'")
        .replace("'your-secret'", "'testing'")
        .replace("'127.0.0.1:9000'", f"'{endpoint}'")
    )
    con = duckdb.connect()
    con.execute(f"SET extension_directory = '{Path(duckdb_ext.__path__[0]) / 'extensions'}'")
    con.execute(statements[0])
    con.execute(secret)
    rows = con.execute(statements[2].replace("s3://evals/assay", url)).fetchall()
    assert rows == [tuple(row) for row in result.iter_rows()]


def test_comparison_and_carried_requests_are_written_once(s3, request):
    store = Store(_url(s3, request))
    table = pa.table({"x": [1]})
    store.write_comparison("c1", table, "{}")
    with pytest.raises(FileExistsError):
        store.write_comparison("c1", table, "{}")
