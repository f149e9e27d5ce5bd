"""`Store`: Parquet datasets hive-partitioned by run id, whose files never change once written,
in a local folder or an object-store prefix (`_location.py`).

    <root>/runs/run_id=<id>/run-<revision>.parquet    the run's record, one row per revision
    <root>/items/run_id=<id>/<part>.parquet           one row per item x trial
    <root>/scores/run_id=<id>/<part>.parquet          one row per item x trial x scorer (and gauge)
    <root>/requests/run_id=<id>/<part>.parquet        captured requests (`carried.parquet`: a
                                                      rescore's copy of its source's)
    <root>/turns/run_id=<id>/<part>.parquet           one row per prompt of a managed session
    <root>/leaderboards/matrix_id=<id>/leaderboard-<revision>.parquet
    <root>/comparisons/comparison_id=<id>/comparison.parquet and comparison.json
    <root>/artifacts/run_id=<id>/<item>/<trial>/      files kept per item x trial (transcripts, workspaces)
    <root>/artifacts/run_id=<id>/@<name>              run-level sidecars (an http_agent's harness run ids)
    <root>/leases/run_id=<id>/                        who drives the run (assay/store/lease.py)
    <root>/.staging/                                  files being written; no dataset's glob reaches it

Readers (this module's, the CLI's, an analyst's `scan_parquet("<root>/scores/**/*.parquet")`) see a
consistent snapshot while writers run, because of three rules:

1. **A published file is complete and never changes.** Every file is written under `.staging/`
   (outside the dataset folders, under a name ending `.staged`, which no `*.parquet` glob matches)
   and then given its final name in one step: a rename, or a hard link where the name must not be
   taken already (put-if-absent). Replacing a file in place is not enough: Polars sizes a file
   when it plans a scan and opens it again to read, so a file replaced in between reads as
   "out of specification" (measured: most reads of a glob fail while its files are replaced).
2. **A record that changes is written as revisions.** A run's record (status, totals, tags) and a
   matrix's leaderboard get a new file per change, `run-<revision>.parquet`, put-if-absent (two
   writers cannot take one revision: the second takes the next; a writer that holds the record
   writes the one after the revision it holds, or learns that the record changed:
   `write_run(after=)`). Revisions are never removed (they
   are the record's history, a few per run): the current record is the highest `revision`, which
   `read_run` and `runs()` pick from the folder listing, and analysts by `revision = max(revision)`
   per run (docs/analysts.md). A store written before revisions holds `run.parquet`: revision 0.
3. **Files are removed only when a run is deleted** (`delete_run`, nightly retention). A reader
   that listed them a moment before then misses a file: this module's readers leave the files that
   vanished out (their run is gone); an analyst's query fails with "No such file" and is simply
   run again.

A batch of results (items, and their scores, captured requests and turns) is committed with the
items part as the commit marker, so that no reader ever counts a score without its item:

- *stage*: write the requests, turns, scores, then the items table into `.staging/run_id=<id>/<part>/`,
  each `<dataset>.writing` renamed to `<dataset>.staged` once complete: the batch is complete
  once `items.staged` exists;
- *publish*: rename each staged file to `<dataset>/run_id=<id>/<part>.parquet`, items last, then
  remove the batch's staging folder;
- *recover* (before a run resumes, under its lease): a staged batch with `items.staged` is rolled
  forward (published), any other is rolled back (deleted; nothing of it was visible).

A SIGKILL while a batch is written (the slow step) therefore leaves nothing a reader can see; one
between two renames of the publish step (microseconds) leaves a scores, requests or turns part
without its items part until the run resumes. Our readers read only parts whose items part exists;
analysts keep to finished runs or join scores to items (docs/schema.md).

The file steps (staging, the tests' fault injection) are in `assay/store/_publish.py`, what the store
needs of where the bytes live (a folder or a bucket; put-if-absent) in `_location.py`, revisions in
`_revisions.py`. `Store` reads and writes only through its `Location`, never asking which kind it is.

On object storage (`s3://bucket/prefix`: no rename; a PUT is atomic; conditional writes exist) the
same guarantees hold without a staging step (`assay/store/_bucket.py`, docs/storage.md): a batch's
parts are PUT under their final keys with `If-None-Match: *`, items (the commit marker) last;
put-if-absent (revisions, leases, fences, comparisons) is the same conditional PUT, answered 412
when the key is taken; readers LIST then GET, which is safe because no key is ever overwritten.
A writer killed between the PUTs of one batch leaves scores without their items part, which our
readers ignore and `recover` removes.
Artifacts, which targets write as files, are written into a local spool there and uploaded per
item folder under deterministic keys before the batch naming them is committed (`_spool.py`).
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast, overload
from urllib.parse import quote

import pyarrow as pa

from assay import _schema
from assay._lazy import lazy_module
from assay.errors import InputError, RunNotFoundError, StoreError
from assay.outcomes import BatchState, ItemOutcome, RowKind
from assay.settings import Settings, settings
from assay.store import _revisions
from assay.store._bucket import ObjectPrefix
from assay.store._folder import LocalFolder
from assay.store._location import Location, root_problem
from assay.store._reading import Reading, current_items, scan_parts

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")

DEFAULT_ROOT = Settings.model_fields["store"].default
STAGING = ".staging"
_CARRIED = "carried.parquet"
# The batch datasets in publish order: the items part, the commit marker, last.
_BATCH_DATASETS = ("requests", "turns", "scores", "items")
# What a run record may hold: the columns of `runs`, and the run's id as `read_run` adds it.
_RUN_KEYS = frozenset(["run_id", *_schema.RUNS.names])
# Temporary files an older Assay wrote inside the partitions; `recover` removes them.
_LEGACY_TMP_PREFIX = ".tmp-"


def default_root() -> str:
    """`ASSAY_STORE` if set, else `./assay-store`."""
    return settings().store


def open_location(root: str | os.PathLike[str]) -> Location:
    """The location a store root names: `s3://bucket/prefix`, else a local folder.

    Raises:
        InputError: the root cannot be a store (`root_problem`).
    """
    text = os.fspath(root)
    if text.startswith("s3://"):
        return ObjectPrefix(text)
    if (problem := root_problem(text)) is not None:
        raise InputError(problem)
    return LocalFolder(Path(text))


class Store(Reading):
    """A local folder or an object-store prefix holding runs, items and scores.

    Args:
        root: a folder (created on first write) or `s3://bucket/prefix` (`assay/store/_location.py`).

    Attributes:
        location: where the bytes live; every read and write goes through it.
        root: the local folder (`Path`); for an object store, its URL (`str`).
    """

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.location: Location = open_location(root if root is not None else default_root())
        self.root: Path | str = self.location.root

    @property
    def local(self) -> bool:
        """Whether the store is a local folder (artifacts and reports are files there)."""
        return self.location.local

    def _partition(self, dataset: str, run_id: str) -> str:
        return f"{dataset}/run_id={run_id}"

    def _staging(self, run_id: str | None = None) -> str:
        """`.staging` (files of no run), or the run's folder in it (its batches and records)."""
        return STAGING if run_id is None else f"{STAGING}/run_id={run_id}"

    # -- runs ---------------------------------------------------------------------------------

    @overload
    def write_run(self, run_id: str, record: _schema.RunRecord) -> int: ...

    @overload
    def write_run(self, run_id: str, record: _schema.RunRecord, *, after: int) -> int | None: ...

    def write_run(self, run_id: str, record: _schema.RunRecord, *, after: int | None = None) -> int | None:
        """Record a change of a run: its next revision (see the module docstring); returns it.

        Args:
            run_id: the run.
            record: its columns.
            after: the revision the writer holds (read or wrote last): written as the one after
                it, without listing the run's revisions; None if another writer took that one
                (the run changed meanwhile: `assay/run/record.py`).

        Raises:
            StoreError: the record has a key that is no column of `runs` (a misspelt name would
                otherwise be dropped without a word).
        """
        unknown = sorted(record.keys() - _RUN_KEYS)
        if unknown:
            raise StoreError(f"run {run_id!r}'s record: no column of runs is named {', '.join(unknown)}")

        def table(revision: int) -> pa.Table:
            return pa.Table.from_pylist([{**record, "revision": revision}], schema=_schema.RUNS)

        folder, staging = self._partition("runs", run_id), self._staging(run_id)
        if after is not None:
            return _revisions.write_revision_after(self.location, folder, "run", table, staging, after)
        return _revisions.write_revision(self.location, folder, "run", table, staging)

    def read_run(self, run_id: str) -> _schema.RunRecord:
        """A run's current record; `RunNotFoundError` if the store has no such run. One listing
        and one read of the newest revision (through the location: one GET on object storage)."""
        key = _revisions.newest_revision(self.location, self._partition("runs", run_id), "run")
        try:
            data = self.location.read(key) if key is not None else None
        except FileNotFoundError:  # deleted since the listing
            data = None
        if data is None:
            raise RunNotFoundError(f"no run {run_id!r} in store {str(self.root)!r}")
        record: list[IO[bytes]] = [io.BytesIO(data)]
        rows = scan_parts(_schema.RUNS, record).collect().to_dicts()
        if len(rows) != 1:
            raise StoreError(f"run {run_id!r}'s record holds {len(rows)} rows, expected 1")
        return cast(_schema.RunRecord, {"run_id": run_id, **rows[0]})

    def runs(self) -> pl.LazyFrame:
        """Every run's current record (its newest revision), one row each."""
        return self._read(_schema.RUNS, self._current_run_files(), hive=True).lazy()

    def _current_run_files(self) -> list[str]:
        return _revisions.newest_revisions(self.location, "runs", "run_id=", "run")

    # -- items and scores -----------------------------------------------------------------------

    def commit_batch(
        self,
        run_id: str,
        part: str,
        items: pa.Table,
        scores: pa.Table,
        requests: pa.Table | None = None,
        turns: pa.Table | None = None,
    ) -> None:
        """Commit one batch: its files published items (the commit marker) last — staged whole
        then renamed in a local folder, PUT if absent on object storage."""
        tables = [
            (f"{self._partition(dataset, run_id)}/{part}.parquet", table)
            for dataset, table in (
                ("requests", requests),
                ("turns", turns),
                ("scores", scores),
                ("items", items),
            )
            if table is not None and (table.num_rows or dataset == "items")
        ]
        # The items' files go up first (on object storage; in a local folder they are in
        # place): a committed row never names a missing file (assay/store/_spool.py). Here, in
        # the process that ran the items.
        artifacts = self.location.artifacts
        item_folders = self._item_folders(run_id, items)
        artifacts.upload(item_folders, f"run_id={run_id}")
        self.location.commit_batch(tables, f"{self._staging(run_id)}/{part}")
        artifacts.committed(item_folders)

    def recover(self, run_id: str) -> dict[str, int]:
        """Finish what a killed writer of the run left: roll complete staged batches forward,
        incomplete ones back, and remove what an older Assay left in the partitions (temporary
        files) and parts without their items part. Call it holding the run's lease.

        Returns:
            how many batches were `published` and `discarded`, and `legacy` files removed.
        """
        counts = {"published": 0, "discarded": 0, "legacy": 0}
        for batch, complete in self.location.staged_batches(self._staging(run_id)):
            if complete:
                part = batch.rsplit("/", 1)[-1]
                finals = [(d, f"{self._partition(d, run_id)}/{part}.parquet") for d in _BATCH_DATASETS]
                self.location.publish_staged(batch, finals)
                counts["published"] += 1
            else:
                self.location.delete_tree(batch)
                counts["discarded"] += 1
        committed = self.part_names(run_id) | {_CARRIED}
        for dataset in _BATCH_DATASETS:
            partition = self._partition(dataset, run_id)
            for name in self.location.names(partition):
                orphan = dataset != "items" and name not in committed
                if name.startswith(_LEGACY_TMP_PREFIX) or orphan:
                    self.location.delete(f"{partition}/{name}")
                    counts["legacy"] += 1
        return counts

    def delete_run(self, run_id: str) -> None:
        """Remove a run from every dataset. Its record goes first, so listings never show a run
        whose items are half gone. In a local folder the partitions are renamed into `.trash/`
        (atomic each), then deleted; on object storage the record's objects are deleted first,
        then the rest. A deletion cut short leaves only record-less partitions (or trash), which
        `delete_run` of the same id finishes."""
        datasets: tuple[str, ...] = ("runs", "items", "scores", "requests", "turns", "batches", "labels")
        datasets += ("artifacts", "leases")
        keys = [*(self._partition(d, run_id) for d in datasets), self._staging(run_id)]
        self.location.delete_trees(keys, label=run_id)

    def _item_folders(self, run_id: str, items: pa.Table) -> list[str]:
        """The item folders of a batch's item rows."""
        return [
            self._item_folder(run_id, item_id, trial)
            for item_id, trial in zip(
                items.column("item_id").to_pylist(), items.column("trial").to_pylist(), strict=True
            )
        ]

    def _item_folder(self, run_id: str, item_id: str, trial: int) -> str:
        """An item x trial's folder below `artifacts/`: `run_id=<id>/<item>/<trial>`, the item id
        quoted into one safe path segment."""
        segment = quote(item_id, safe="")
        # `.`, `..` and an empty id are not names of their own in a path: spelled out instead
        # (`%` alone or before dots is no output of `quote`, so these cannot collide).
        if segment in {"", ".", ".."}:
            segment = "%" + "2E" * len(segment) if segment else "%"
        return f"run_id={run_id}/{segment}/{trial}"

    def artifacts_dir(self, run_id: str, item_id: str, trial: int) -> Path:
        """The folder of one item x trial's kept files (not created)."""
        return self.artifacts_root / self._item_folder(run_id, item_id, trial)

    @property
    def artifacts_root(self) -> Path:
        """The folder targets write artifacts into; the paths in `items.artifacts` are relative
        to it (they start with the run's partition, so a rescore's rows still point at its
        source's files). `<root>/artifacts` in a local store; on object storage this process's
        spool, uploaded to `<root>/artifacts/` as each batch is committed (`_spool.py`). Read
        kept files with `read_artifact` / `artifact_folder`, which work on both."""
        return self.location.artifacts.root

    def run_sidecar(self, run_id: str, name: str) -> Path:
        """A run-level file in the run's artifacts partition, beside the item folders (not
        created in a local store). Its name starts with `@`, which no item folder can: item
        ids are percent-quoted there, and quoting never leaves an `@`. Deleted with the run. On
        object storage an append-only file: its spool copy, holding what other processes wrote
        (uploaded with each batch, `_spool.py`)."""
        return self.location.artifacts.sidecar(f"run_id={run_id}/@{name}")

    def read_artifact(self, path: str) -> bytes:
        """The bytes of a kept file (`FileNotFoundError` if it is gone).

        Args:
            path: as `items.artifacts` holds it (relative to `<root>/artifacts`).
        """
        return self.location.artifacts.read(path)

    def read_artifact_head(self, path: str, limit: int) -> tuple[bytes, int]:
        """A kept file's first `limit` bytes and its whole size, the rest unread (`FileNotFoundError` if gone).

        Args:
            path: as `items.artifacts` holds it (relative to `<root>/artifacts`).
            limit: the most bytes read (> 0).
        """
        return self.location.artifacts.read_head(path, limit)

    def artifact_folder(self, path: str) -> Path:
        """A kept folder (an exported workspace) as a local folder: in place in a local store,
        downloaded into a temporary folder from object storage.

        Args:
            path: as `items.artifacts` holds it (relative to `<root>/artifacts`).
        """
        return self.location.artifacts.fetch_folder(path)

    def write_carried_requests(self, run_id: str, requests: pa.Table) -> None:
        """A rescore's copy of its source's captured requests (not part of any batch), once:
        `FileExistsError` if the run has it already."""
        key = f"{self._partition('requests', run_id)}/{_CARRIED}"
        if not self.location.create(key, requests, self._staging(run_id)):
            raise FileExistsError(self.location.reader_path(key))

    # -- batches (batch mode's ledger) -----------------------------------------------------------

    def record_batch(self, run_id: str, row: dict[str, Any]) -> None:
        """Record a provider batch's state (a `BATCHES` row), durably, before returning: one file
        per batch and state, `<batch_id>-<state>.parquet`, never replaced (put-if-absent)."""
        table = pa.Table.from_pylist([row], schema=_schema.BATCHES)
        key = f"{self._partition('batches', run_id)}/{row['batch_id']}-{row['state']}.parquet"
        # False: the same state recorded twice (a re-attached batch seen to end again).
        self.location.create(key, table, self._staging(run_id))

    def run_batches(self, run_id: str) -> pl.DataFrame:
        """A run's batches, each in its latest state (ended over in progress)."""
        partition = self._partition("batches", run_id)
        keys = [f"{partition}/{n}" for n in self.location.names(partition) if n.endswith(".parquet")]
        frame = self._read(_schema.BATCHES, keys)
        ended_first = frame.sort(pl.col("state") == BatchState.ENDED, descending=True)
        return ended_first.unique("batch_id", keep="first", maintain_order=True).sort("submitted_at")

    def part_names(self, run_id: str, dataset: str = "items") -> set[str]:
        """The file names of one run's parts of `dataset` (temporary files excluded); an items
        part's name is the name of a committed batch."""
        return set(self._part_names(dataset, run_id))

    def remove_parts(self, run_id: str, names: set[str]) -> None:
        """Remove the batches named `names` from every dataset: the items part (the commit
        marker) first, so no reader sees the batch's items without its scores."""
        for dataset in ("items", "scores", "requests", "turns"):
            for name in names:
                self.location.delete(f"{self._partition(dataset, run_id)}/{name}")

    def _part_names(self, dataset: str, run_id: str) -> list[str]:
        listing = self._names(self._partition(dataset, run_id))
        return [n for n in listing if n.endswith(".parquet") and not n.startswith(_LEGACY_TMP_PREFIX)]

    def _parts(self, dataset: str, run_id: str, names: set[str] | None = None) -> list[str]:
        """Keys of the run's parts of `dataset` (only those named `names`, when given)."""
        partition = self._partition(dataset, run_id)
        return [f"{partition}/{n}" for n in self._part_names(dataset, run_id) if names is None or n in names]

    def _committed_parts(self, dataset: str, run_id: str) -> list[str]:
        """The run's parts of `dataset` whose batch is committed (its items part exists); for
        requests, the carried records too, first."""
        committed = self.part_names(run_id) | {_CARRIED}
        parts = self._parts(dataset, run_id, committed)
        return sorted(parts, key=lambda p: not p.endswith(f"/{_CARRIED}"))

    def done_keys(self, run_id: str, parts: set[str] | None = None) -> set[tuple[str, int]]:
        """(item_id, trial) of every item already committed for the run.

        Args:
            run_id: the run.
            parts: only these items parts (by file name); default every one.
        """
        keys = self._parts("items", run_id, parts)
        if not keys:  # a new run: nothing to read (and no Polars to load for it)
            return set()
        frame = self._read(_schema.ITEMS, keys, columns=["item_id", "trial"])
        return set(zip(frame["item_id"].to_list(), frame["trial"].to_list(), strict=True))

    def failed_keys(
        self, run_id: str, selected: Callable[[pl.DataFrame], pl.Series], parts: set[str] | None = None
    ) -> dict[tuple[str, int], int]:
        """The (item_id, trial) whose current row failed and is `selected`, with that row's `retry`.

        Args:
            run_id: the run.
            selected: which failed rows count (a mask over them: their failure kind, say).
            parts: only these items parts (by file name); default every one.
        """
        columns = ["item_id", "trial", "outcome", "failure_kind", "failure_http_status", "error", "retry"]
        keys = self._parts("items", run_id, parts)
        failed = current_items(self._read(_schema.ITEMS, keys, columns=columns)).filter(
            pl.col("outcome") == ItemOutcome.FAILED
        )
        failed = failed.filter(selected(failed))
        return {(i, t): r for i, t, r in failed.select("item_id", "trial", "retry").iter_rows()}

    def run_items(self, run_id: str, *, history: bool = False) -> pl.DataFrame:
        """The committed items of one run: the current row of each item x trial (`current_items`).

        Args:
            run_id: the run.
            history: every row instead, failed ones a retry replaced included (what was spent).
        """
        frame = self._read(_schema.ITEMS, self._parts("items", run_id))
        return frame if history else current_items(frame)

    def run_scores(self, run_id: str, kind: RowKind | None = RowKind.SCORE) -> pl.DataFrame:
        """The committed rows of one run's scores dataset: its scores, by default.

        Args:
            run_id: the run.
            kind: `RowKind.SCORE` (scorers' rows: what every mean, rate and verdict is over),
                `RowKind.GAUGE` (the gauges' rows) or None for both. Scores only by default, so
                that no consumer takes a gauge for a scorer by forgetting a filter.
        """
        frame = self._read(_schema.SCORES, self._committed_parts("scores", run_id))
        return frame if kind is None else frame.filter(pl.col("kind") == kind.value)

    def run_turns(self, run_id: str) -> pl.DataFrame:
        """All committed session turns of one run (empty for a run without a policy or attempts)."""
        return self._read(_schema.TURNS, self._committed_parts("turns", run_id))

    def run_requests(self, run_id: str) -> pl.DataFrame:
        """All committed captured-request records of one run (a rescore's carried ones first)."""
        return self._read(_schema.REQUESTS, self._committed_parts("requests", run_id))

    def scan_run(self, run_id: str, dataset: str) -> pl.LazyFrame:
        """One run's committed rows of `dataset`, lazily: the parts are listed now and read when
        a query over them is collected, only the columns and rows it needs (a run's summary at
        100,000 items: docs/scale.md).

        Args:
            run_id: the run.
            dataset: `items` (every row, history included: `current_items` keeps the current
                ones), `scores` (scores and gauges: filter on `kind`), `requests` or `turns`.
        """
        keys = self._parts(dataset, run_id) if dataset == "items" else self._committed_parts(dataset, run_id)
        paths, storage_options = self._reader_paths(keys)
        return scan_parts(getattr(_schema, dataset.upper()), paths, storage_options=storage_options)

    # -- leaderboards and comparisons -------------------------------------------------------------

    def write_leaderboard(self, matrix_id: str, rows: list[dict[str, Any]]) -> int:
        """A matrix's leaderboard, as its next revision; returns the revision."""

        def table(revision: int) -> pa.Table:
            return pa.Table.from_pylist(
                [{**r, "revision": revision} for r in rows], schema=_schema.LEADERBOARDS
            )

        folder = f"leaderboards/matrix_id={matrix_id}"
        return _revisions.write_revision(self.location, folder, "leaderboard", table, self._staging())

    def write_comparison(self, comparison_id: str, table: pa.Table, document: str) -> None:
        """A comparison's rows (`comparison.parquet`) and its whole document (`comparison.json`),
        each written once under the comparison's fresh id."""
        folder = f"comparisons/comparison_id={comparison_id}"
        for name, data in (("comparison.parquet", table), ("comparison.json", document.encode())):
            if not self.location.create(f"{folder}/{name}", data, self._staging()):
                raise FileExistsError(self.location.reader_path(f"{folder}/{name}"))
