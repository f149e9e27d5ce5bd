"""Readers see a consistent store while writers run; a writer killed mid-write leaves nothing a
reader trips over (assay/store.py draws the protocol).

Real processes on a real folder: writers in subprocesses (a tight loop through `assay.store`, and
real `assay run`s: two matrix runs at once), readers in this process, in threads, over and over
(Polars lazy and eager, DuckDB, pyarrow over the analysts' documented globs; `Store`; `assay ls`
and `assay show`, also as processes of their own; snippets of docs/analysts.md). Writers go on
as fast as they can while the readers read, and the readers go on until they have read enough.
A run is SIGKILLed by fault injection (`ASSAY_FAULT_KILL`) halfway through writing a batch, or
between publishing its scores and its items, then read and resumed.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Self

import duckdb
import polars as pl
import pyarrow.dataset as ds
import pytest

from assay.cli import EXIT_OK, main
from assay.store import STAGING, Store
from tests.conftest import REPO, run_assay, write_jsonl, write_spec
from tests.helpers import store_writer
from tests.house.test_analysts_doc import PYTHON, SQL, run_python, run_sql

pytestmark = [pytest.mark.slow]  # subprocesses, signals, leases: seconds each

Read = Callable[[], object]


class Readers:
    """Threads, each running its reads in turn over and over until the `with` block ends; counts
    reads and errors (by read and message)."""

    def __init__(self, *readers: dict[str, Read]) -> None:
        self.count, self.errors = 0, Counter()
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._threads = [threading.Thread(target=self._loop, args=(reads,), daemon=True) for reads in readers]

    def __enter__(self) -> Self:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _loop(self, reads: dict[str, Read]) -> None:
        while not self._stop.is_set():
            for name, read in reads.items():
                try:
                    read()
                # Polars reports some broken files with a panic, which is no Exception.
                except (Exception, pl.exceptions.PanicException) as exc:  # noqa: BLE001 - each is reported
                    with self._lock:
                        self.errors[f"{name}: {type(exc).__name__}: {str(exc)[:160]}"] += 1
                with self._lock:
                    self.count += 1

    def wait_for(self, reads: int, timeout: float = 120) -> None:
        """Block until `reads` reads have run."""
        deadline = time.monotonic() + timeout
        while self.count < reads:
            assert time.monotonic() < deadline, f"only {self.count} reads in {timeout} s"
            time.sleep(0.05)

    def report(self) -> str:
        return f"{sum(self.errors.values())} of {self.count} reads failed: {self.errors.most_common(5)}"


def wait_for_file(root: Path, pattern: str, process: subprocess.Popen[str], timeout: float = 60) -> None:
    """Block until a file matching `pattern` exists under `root` (the process still running)."""
    deadline = time.monotonic() + timeout
    while not list(root.glob(pattern)):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"no {pattern} within {timeout} s"
        time.sleep(0.05)


def current(key: str) -> pl.Expr:
    """The analysts' filter: each record's newest revision."""
    return pl.col("revision") == pl.col("revision").max().over(key)


# -- a writer in a tight loop -----------------------------------------------------------------------


ROUNDS = 40


def start_writer(store: Path, *flags: str, rounds: int = ROUNDS) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.store_writer", str(store), str(rounds), *flags],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(writer: subprocess.Popen[str]) -> None:
    assert writer.wait(timeout=120) == 0, writer.stderr.read()


def runs_reads(store: Path) -> dict[str, Read]:
    """An analyst polling the runs, as docs/analysts.md opens them, lazily and eagerly."""
    runs = f"{store}/runs/**/*.parquet"

    def lazy() -> None:
        frame = pl.scan_parquet(runs, hive_partitioning=True).filter(current("run_id")).collect()
        assert frame["run_id"].n_unique() == frame.height, "one current record per run"

    return {
        "polars lazy runs": lazy,
        "polars eager runs": lambda: pl.read_parquet(runs, hive_partitioning=True),
    }


def analyst_reads(store: Path) -> dict[str, Read]:
    """The other documented ways to read the store."""
    runs, items = f"{store}/runs/**/*.parquet", f"{store}/items/**/part-*.parquet"

    def polars_board() -> None:
        board = pl.scan_parquet(f"{store}/leaderboards/**/*.parquet", hive_partitioning=True)
        assert board.filter(current("matrix_id")).collect().height == len(store_writer.RUNS)

    def duckdb_runs() -> None:
        # One connection per thread (DuckDB's default one is shared), held while its result is
        # read: a relation does not keep its connection open.
        with duckdb.connect() as con:
            rows = con.sql(
                f"SELECT run_id FROM read_parquet('{runs}', hive_partitioning = true) "
                "QUALIFY revision = max(revision) OVER (PARTITION BY run_id)"
            ).fetchall()
        assert len(set(rows)) == len(rows), "one current record per run"

    def duckdb_items() -> None:
        with duckdb.connect() as con:
            con.sql(f"SELECT count(*) FROM read_parquet('{items}')").fetchall()

    return {
        "polars scores": lambda: pl.scan_parquet(
            f"{store}/scores/**/*.parquet", hive_partitioning=True
        ).collect(),
        "polars leaderboard": polars_board,
        "duckdb runs": duckdb_runs,
        "duckdb items": duckdb_items,
        "pyarrow items": lambda: ds.dataset(
            store / "items", format="parquet", partitioning="hive"
        ).count_rows(),
    }


def store_reads(store: Path, run_ids: Callable[[], list[str]]) -> dict[str, Read]:
    """Assay's own readers: the scores a run read gives all have their item in a later read
    (unless the run was deleted in between: the writer deletes only `d*` runs)."""
    data = Store(store)

    def per_run() -> None:
        for run_id in run_ids():
            scores = data.run_scores(run_id)
            items = data.run_items(run_id)
            data.done_keys(run_id)
            if run_id in store_writer.RUNS:
                assert set(scores["item_id"]) <= set(items["item_id"]), f"{run_id}: a score without its item"

    return {"Store.runs": lambda: data.runs().collect(), "Store per run": per_run}


def test_readers_never_fail_while_two_writers_revise_records_and_commit_batches(tmp_path):
    store = tmp_path / "store"
    store_writer.seed(Store(store))
    writers = [start_writer(store), start_writer(store, "--batches")]
    with Readers(
        runs_reads(store), analyst_reads(store), store_reads(store, lambda: store_writer.RUNS)
    ) as readers:
        for writer in writers:
            finished(writer)
        readers.wait_for(150)
    assert not readers.errors, readers.report()

    # Every revision either writer meant to write is there, none over another's (put-if-absent).
    per_run = 1 + 2 * ROUNDS // len(store_writer.RUNS)
    for run_id in store_writer.RUNS:
        revisions = sorted(p.name for p in (store / "runs" / f"run_id={run_id}").iterdir())
        assert revisions == [f"run-{n:06d}.parquet" for n in range(1, per_run + 1)]
        assert Store(store).read_run(run_id)["revision"] == per_run
    assert len(list((store / "leaderboards" / "matrix_id=m").iterdir())) == per_run
    assert not list((store / STAGING).rglob("*.*")), "nothing left staged"


def test_our_readers_never_fail_while_runs_are_deleted(tmp_path):
    """Deleting a run removes files a reader may have listed: `Store` leaves the run out."""
    store = tmp_path / "store"
    store_writer.seed(Store(store))
    writer = start_writer(store, "--batches", "--delete", rounds=ROUNDS // 2)

    def listed() -> list[str]:
        return Store(store).runs().collect()["run_id"].to_list()

    with Readers(store_reads(store, listed), store_reads(store, listed)) as readers:
        finished(writer)
        readers.wait_for(80)
    assert not readers.errors, readers.report()
    assert sorted(listed()) == sorted([*store_writer.RUNS, f"d{ROUNDS // 2 - 1}", f"d{ROUNDS // 2}"])


# -- real runs ------------------------------------------------------------------------------------


def cells(folder: Path) -> None:
    """`busy_cells.py` (a name no other test's module has: a target module imported in this
    process stays in `sys.modules`): Python targets. `gated` answers its item `i0` only once `folder/open` exists,
    which holds its run (and the readers on it) open until the test has read enough."""
    (folder / "busy_cells.py").write_text(
        f"""import pathlib, time

def double(x):
    return str(int(x) * 2)

def sloppy(x):
    return str(int(x) * 2) if int(x) % 4 else "?"

def gated(x):
    while x == "0" and not pathlib.Path({str(folder / "open")!r}).exists():
        time.sleep(0.05)
    return double(x)
"""
    )


def python_spec(folder: Path, n: int) -> Path:
    """A plain run of `n` items of a Python target (fast: its batches are full, 500 rows)."""
    cells(folder)
    write_jsonl(
        folder / "data.jsonl", [{"id": f"i{i}", "input": str(i), "expected": str(2 * i)} for i in range(n)]
    )
    return write_spec(
        folder,
        name="busy",
        dataset={"path": "data.jsonl", "id": "id"},
        target={"kind": "python", "function": "busy_cells:double"},
        scorers=[{"kind": "exact_match", "name": "exact"}],
    )


def doc_snippets(store: Path, *headings: str) -> dict[str, Read]:
    """The snippets of docs/analysts.md under these headings, Polars and DuckDB, as reads."""
    reads: dict[str, Read] = {}
    for language, snippets, run in (("python", PYTHON, run_python), ("sql", SQL, run_sql)):
        for n, (heading, code) in enumerate(snippets):
            if heading.startswith(headings):
                reads[f"analysts.md {language} {n} ({heading[:20]})"] = functools.partial(run, code, store)
    return reads


def cli(*args: str) -> str:
    """`assay ARGS` in this process; its standard output (it must succeed). Not `tests.helpers.cli`:
    it runs on the readers' threads, beside each other, where `capsys` would mix their outputs."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(args))
    assert code == EXIT_OK, f"assay {' '.join(args)} exited {code}: {out.getvalue()}"
    return out.getvalue()


def test_two_matrix_runs_at_once_while_everything_reads(tmp_path):
    """Two matrix runs into one store at once (each cell's record revised as it starts and ends,
    then each matrix's leaderboard built from the runs), while the CLI, `Store` and the
    analysts' snippets read; the first cell of each waits on its first item until enough reads ran."""
    cells(tmp_path)
    write_jsonl(
        tmp_path / "data.jsonl",
        [{"id": f"i{i}", "input": str(i), "expected": str(2 * i)} for i in range(600)],
    )
    spec = write_spec(
        tmp_path,
        name="busy",
        dataset={"path": "data.jsonl", "id": "id"},
        targets={
            "a": {"kind": "python", "function": "busy_cells:gated"},
            "b": {"kind": "python", "function": "busy_cells:sloppy"},
        },
        scorers=[{"kind": "exact_match", "name": "exact"}],
        fail_on_item_error_rate=1,
    )
    store = tmp_path / "store"
    command = [sys.executable, "-m", "assay.cli", "run", str(spec), "--store", str(store), "--json"]
    runs = [
        subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in "ab"
    ]
    # Reading starts once items and scores are there (a glob matching no file at all is an error).
    for run in runs:
        wait_for_file(store, "scores/*/part-*.parquet", run)

    def listed() -> list[str]:
        return [row["run_id"] for row in json.loads(cli("ls", "--store", str(store), "--json"))]

    def show() -> None:
        for run_id in listed()[:2]:
            assert json.loads(cli("show", run_id, "--store", str(store), "--json"))["run_id"] == run_id

    def terminal() -> None:
        """`assay ls` as a process of its own, as a user at another terminal."""
        ls = run_assay("ls", "--store", str(store), "--json")
        assert ls.returncode == 0 and json.loads(ls.stdout), ls.stderr

    readers = Readers(
        {"assay ls": listed, "assay show": show, "assay ls process": terminal},
        {
            **doc_snippets(store, "Opening the store", "1. ", "9. "),
            **store_reads(store, lambda: Store(store).runs().collect()["run_id"].to_list()),
        },
    )
    try:
        with readers:
            readers.wait_for(50)
            (tmp_path / "open").touch()  # the gated items answer: the runs finish while the reads go on
            outcomes = [run.communicate(timeout=300) for run in runs]
    finally:
        (tmp_path / "open").touch()
        for run in runs:
            if run.poll() is None:
                run.kill()
    assert not readers.errors, readers.report()

    assert [run.returncode for run in runs] == [0, 0], outcomes
    for out, _ in outcomes:
        summary = json.loads(out)
        assert [cell["items"]["completed"] for cell in summary["cells"]] == [600] * 2
        assert {row["cell"] for row in summary["leaderboard"]["rows"]} == {"a", "b"}


# -- a kill during a write --------------------------------------------------------------------------


def test_a_run_killed_mid_write_leaves_nothing_for_analysts_then_resumes_exactly(tmp_path, analysts_store):
    # The analysts' doc store (every dataset its snippets read), plus a run SIGKILLed halfway
    # through staging its second items part.
    store = tmp_path / "store"
    shutil.copytree(analysts_store, store)
    spec = python_spec(tmp_path, n=1200)
    killed = run_assay("run", str(spec), "--store", str(store), env={"ASSAY_FAULT_KILL": "stage:items:2"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (half,) = (store / STAGING).glob("*/*/items.writing")
    run_id = half.parent.parent.name.removeprefix("run_id=")
    assert 0 < half.stat().st_size and half.read_bytes()[-4:] != b"PAR1", "the kill landed mid-write"
    for dataset in ("runs", "items", "scores", "requests", "leaderboards"):
        stray = [p for p in (store / dataset).rglob("*") if p.is_file() and p.suffix != ".parquet"]
        hidden = list((store / dataset).rglob(".*"))
        assert not stray and not hidden, f"{dataset}: {stray + hidden}"

    for _, code in PYTHON:
        run_python(code, store)  # no "File out of specification" here
    for _, code in SQL:
        run_sql(code, store)  # nor DuckDB's "No magic bytes found"
    for dataset in ("runs", "items", "scores", "requests", "leaderboards"):  # schema.md's one-liners
        files = f"{store}/{dataset}/**/*.parquet"
        pl.scan_parquet(files, hive_partitioning=True).collect()
        with duckdb.connect() as con:
            con.sql(f"SELECT count(*) FROM read_parquet('{files}', hive_partitioning = true)").fetchall()
    items = pl.read_parquet(f"{store}/items/**/*.parquet", hive_partitioning=True)
    scores = pl.read_parquet(f"{store}/scores/**/*.parquet", hive_partitioning=True)
    orphans = scores.join(items, on=["run_id", "item_id", "trial"], how="anti")
    assert orphans.is_empty(), f"scores without their item: {orphans.height}"
    committed = items.filter(pl.col("run_id") == run_id).height
    assert 0 < committed < 1200, "the first batch is committed, the second not"

    # Resumed, it discards the half-written batch (its items run again) and, killed this time
    # between publishing the scores and the items of its first batch, leaves those scores out
    # of what our readers return.
    resume = ("resume", run_id, "--store", str(store), "--json")
    killed = run_assay(*resume, env={"ASSAY_FAULT_KILL": "publish:items:1"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not list((store / STAGING).glob("*/*/*.writing")), "the half-written batch was discarded"
    (batch,) = (store / STAGING).glob("*/part-*")
    assert [p.name for p in batch.iterdir()] == ["items.staged"], "scores published, items not yet"
    assert (store / "scores" / f"run_id={run_id}" / f"{batch.name}.parquet").is_file()
    data = Store(store)
    assert data.run_items(run_id).height == committed
    assert set(data.run_scores(run_id)["item_id"]) == set(data.run_items(run_id)["item_id"])

    # The next resume (in this process: nothing to kill) rolls that batch forward, published as
    # it was, its items not run again.
    summary = json.loads(cli(*resume))
    assert (store / "items" / f"run_id={run_id}" / f"{batch.name}.parquet").is_file()
    items, scores = data.run_items(run_id), data.run_scores(run_id)
    assert items.height == 1200 and items["item_id"].n_unique() == 1200
    assert scores.height == 1200 and scores["item_id"].n_unique() == 1200
    assert summary["items"]["completed"] == 1200
    assert not list((store / STAGING).rglob("*.*")), "nothing left staged"


def test_recovery_leaves_a_live_writers_staged_file_alone(tmp_path: Path) -> None:
    """A record being created (a lease renewal, a Dask worker's shard execution) stages its file in
    the run's staging folder; another writer recovering the run meanwhile must not remove it, or
    the create fails. A staged file old enough to be a killed writer's is still removed."""
    from assay._files import create_new
    from assay.store._folder import LocalFolder

    location = LocalFolder(tmp_path)
    staging = ".staging/run_id=r1"
    folder = location.path(staging)
    folder.mkdir(parents=True)
    abandoned = folder / "left-by-a-killed-writer.staged"
    abandoned.write_bytes(b"{}")
    an_hour_ago = time.time() - 3600
    os.utime(abandoned, (an_hour_ago, an_hour_ago))

    def write(tmp: Path) -> None:
        tmp.write_bytes(b'{"attempt": 1}')
        location.staged_batches(staging)  # another worker's recovery, while this file is staged

    assert create_new(location.path("runs/r1/attempts/000001.json"), write, temporary=folder / "live.staged")
    assert (tmp_path / "runs/r1/attempts/000001.json").read_bytes() == b'{"attempt": 1}'
    assert not abandoned.exists()
