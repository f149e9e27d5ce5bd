"""The store: Parquet datasets hive-partitioned by run id.

    <root>/runs/run_id=<id>/run.parquet         one row per run, rewritten atomically
    <root>/items/run_id=<id>/<part>.parquet     one row per item x trial
    <root>/scores/run_id=<id>/<part>.parquet    one row per item x trial x scorer (and gauge)
    <root>/turns/run_id=<id>/<part>.parquet     one row per prompt of a managed session
    <root>/artifacts/run_id=<id>/<item>/<trial>/ files kept per attempt (transcripts, workspaces)
    <root>/artifacts/run_id=<id>/@<name>        run-level sidecars (an http_agent's harness run ids)
    <root>/leases/run_id=<id>/                  who drives the run (assay/lease.py)

A batch of results is committed as parts of the same name: captured requests, turns and scores
first, then the items part. The items part is the commit marker: a part without its items part is
an orphan of a killed process and is removed before a run resumes, so every item and each of its
scores end up in the store exactly once. Every file is written to a temporary name and renamed.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from assay import _schema
from assay.errors import RunNotFoundError, StoreError
from assay.outcomes import RowKind

DEFAULT_ROOT = "assay-store"
_TMP_PREFIX = ".tmp-"


def default_root() -> str:
    """`ASSAY_STORE` if set, else `./assay-store`."""
    return os.environ.get("ASSAY_STORE") or DEFAULT_ROOT


def write_atomic(table: pa.Table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{_TMP_PREFIX}{uuid.uuid4().hex}-{path.name}")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


class Store:
    """A local folder holding runs, items and scores.

    Args:
        root: the folder (created on first write).
    """

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root if root is not None else default_root())

    def _partition(self, dataset: str, run_id: str) -> Path:
        return self.root / dataset / f"run_id={run_id}"

    # -- runs ---------------------------------------------------------------------------------

    def write_run(self, run_id: str, record: dict[str, Any]) -> None:
        """Write (or replace) a run's row."""
        table = pa.Table.from_pylist([record], schema=_schema.RUNS)
        write_atomic(table, self._partition("runs", run_id) / "run.parquet")

    def read_run(self, run_id: str) -> dict[str, Any]:
        """A run's row; `RunNotFoundError` if the store has no such run."""
        path = self._partition("runs", run_id) / "run.parquet"
        if not path.is_file():
            raise RunNotFoundError(f"no run {run_id!r} in store {str(self.root)!r}")
        rows = _read(_schema.RUNS, [path]).to_dicts()
        if len(rows) != 1:
            raise StoreError(f"{path} holds {len(rows)} rows, expected 1")
        return {"run_id": run_id, **rows[0]}

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
        """Write one batch: captured requests, turns and scores first, then items (the commit marker)."""
        name = f"{part}.parquet"
        if requests is not None and requests.num_rows:
            write_atomic(requests, self._partition("requests", run_id) / name)
        if turns is not None and turns.num_rows:
            write_atomic(turns, self._partition("turns", run_id) / name)
        if scores.num_rows:
            write_atomic(scores, self._partition("scores", run_id) / name)
        write_atomic(items, self._partition("items", run_id) / name)

    def delete_run(self, run_id: str) -> None:
        """Remove a run from every dataset. Its row goes first, so listings never show a run whose
        items are half gone; the partitions are renamed into `.trash/` (atomic each), then deleted.
        A deletion cut short leaves only trash and row-less partitions, which `delete_run` of the
        same id finishes."""
        trash = self.root / ".trash" / f"{run_id}-{uuid.uuid4().hex[:8]}"
        for dataset in ("runs", "items", "scores", "requests", "turns", "artifacts", "leases"):
            partition = self._partition(dataset, run_id)
            if partition.exists():
                target = trash / dataset
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(partition, target)
        shutil.rmtree(self.root / ".trash", ignore_errors=True)

    def artifacts_dir(self, run_id: str, item_id: str, trial: int) -> Path:
        """The folder of one attempt's kept files (not created); item ids are quoted into one
        safe path segment."""
        segment = quote(item_id, safe="")
        # `.`, `..` and an empty id are not names of their own in a path: spelled out instead
        # (`%` alone or before dots is no output of `quote`, so these cannot collide).
        if segment in {"", ".", ".."}:
            segment = "%" + "2E" * len(segment) if segment else "%"
        return self._partition("artifacts", run_id) / segment / str(trial)

    @property
    def artifacts_root(self) -> Path:
        """`<root>/artifacts`: the paths in `items.artifacts` are relative to it (they start with
        the run's partition, so a rescore's rows still point at its source's files)."""
        return self.root / "artifacts"

    def run_sidecar(self, run_id: str, name: str) -> Path:
        """A run-level file in the run's artifacts partition, beside the attempt folders (not
        created). Its name starts with `@`, which no attempt folder can: item ids are
        percent-quoted there, and quoting never leaves an `@`. Deleted with the run."""
        return self._partition("artifacts", run_id) / f"@{name}"

    def write_carried_requests(self, run_id: str, requests: pa.Table) -> None:
        """A rescore's copy of its source's captured requests (not part of any batch)."""
        write_atomic(requests, self._partition("requests", run_id) / "carried.parquet")

    def remove_uncommitted(self, run_id: str) -> int:
        """Delete temporary files and orphaned scores, requests and turns parts of a run; returns how many."""
        removed = 0
        committed = {p.name for p in self._parts("items", run_id)} | {"carried.parquet"}
        for dataset in ("items", "scores", "requests", "turns"):
            folder = self._partition(dataset, run_id)
            if not folder.is_dir():
                continue
            for path in folder.iterdir():
                orphan = dataset != "items" and path.name not in committed
                if path.name.startswith(_TMP_PREFIX) or orphan:
                    path.unlink(missing_ok=True)
                    removed += 1
        return removed

    def part_names(self, run_id: str, dataset: str = "items") -> set[str]:
        """The file names of one run's parts of `dataset` (temporary files excluded); an items
        part's name is the name of a committed batch."""
        return {path.name for path in self._parts(dataset, run_id)}

    def remove_parts(self, run_id: str, names: set[str]) -> None:
        """Remove the batches named `names` from every dataset: the items part (the commit
        marker) first, so no reader sees the batch's items without its scores."""
        for dataset in ("items", "scores", "requests", "turns"):
            for name in names:
                (self._partition(dataset, run_id) / name).unlink(missing_ok=True)

    def _parts(self, dataset: str, run_id: str) -> list[Path]:
        folder = self._partition(dataset, run_id)
        if not folder.is_dir():
            return []
        return sorted(p for p in folder.glob("*.parquet") if not p.name.startswith(_TMP_PREFIX))

    def done_keys(self, run_id: str, parts: set[str] | None = None) -> set[tuple[str, int]]:
        """(item_id, trial) of every item already committed for the run.

        Args:
            run_id: the run.
            parts: only these items parts (by file name); default every one.
        """
        parts = [p for p in self._parts("items", run_id) if parts is None or p.name in parts]
        if not parts:
            return set()
        frame = pl.read_parquet(parts, columns=["item_id", "trial"])
        return set(zip(frame["item_id"].to_list(), frame["trial"].to_list(), strict=True))

    def run_items(self, run_id: str) -> pl.DataFrame:
        """All committed items of one run."""
        return self._read_run_dataset("items", run_id, _schema.ITEMS)

    def run_scores(self, run_id: str, kind: RowKind | None = RowKind.SCORE) -> pl.DataFrame:
        """The committed rows of one run's scores dataset: its scores, by default.

        Args:
            run_id: the run.
            kind: `RowKind.SCORE` (scorers' rows: what every mean, rate and verdict is over),
                `RowKind.GAUGE` (the gauges' rows) or None for both. Scores only by default, so
                that no consumer takes a gauge for a scorer by forgetting a filter.
        """
        committed = {p.name for p in self._parts("items", run_id)}
        frame = _read(_schema.SCORES, [p for p in self._parts("scores", run_id) if p.name in committed])
        return frame if kind is None else frame.filter(pl.col("kind") == kind.value)

    def run_turns(self, run_id: str) -> pl.DataFrame:
        """All committed session turns of one run (empty for a run without a policy or attempts)."""
        committed = {p.name for p in self._parts("items", run_id)}
        return _read(_schema.TURNS, [p for p in self._parts("turns", run_id) if p.name in committed])

    def run_requests(self, run_id: str) -> pl.DataFrame:
        """All committed captured-request records of one run (a rescore's carried ones first)."""
        committed = {p.name for p in self._parts("items", run_id)} | {"carried.parquet"}
        parts = [p for p in self._parts("requests", run_id) if p.name in committed]
        parts.sort(key=lambda p: p.name != "carried.parquet")
        return _read(_schema.REQUESTS, parts)

    def _read_run_dataset(self, dataset: str, run_id: str, schema: pa.Schema) -> pl.DataFrame:
        return _read(schema, self._parts(dataset, run_id))

    # -- the analyst's view -----------------------------------------------------------------------

    def _scan(self, dataset: str, pattern: str) -> pl.LazyFrame:
        if not any((self.root / dataset).glob(f"run_id=*/{pattern}")):
            schema = pl.from_arrow(getattr(_schema, dataset.upper()).empty_table()).schema
            return pl.LazyFrame(schema={"run_id": pl.String, **schema})
        return _with_defaults(
            dataset,
            pl.scan_parquet(
                str(self.root / dataset / "**" / pattern),
                schema=_polars_schema(getattr(_schema, dataset.upper())),
                missing_columns="insert",
                hive_partitioning=True,
                hive_schema={"run_id": pl.String},
            ),
        )

    def runs(self) -> pl.LazyFrame:
        """Every run, one row each."""
        return self._scan("runs", "run.parquet")

    def items(self) -> pl.LazyFrame:
        """Every item of every run."""
        return self._scan("items", "part-*.parquet")

    def scores(self) -> pl.LazyFrame:
        """Every row of every run's scores dataset, as the files hold it: scores and gauges
        (filter on `kind`)."""
        return self._scan("scores", "part-*.parquet")

    def requests(self) -> pl.LazyFrame:
        """Every captured request record of every run."""
        return self._scan("requests", "*.parquet")

    def turns(self) -> pl.LazyFrame:
        """Every session turn of every run."""
        return self._scan("turns", "part-*.parquet")


# -- reading files an older Assay wrote ---------------------------------------------------------


def _polars_schema(schema: pa.Schema) -> pl.Schema:
    return pl.from_arrow(schema.empty_table()).schema


def _read(schema: pa.Schema, parts: list[Path]) -> pl.DataFrame:
    """Parts of one dataset under today's schema: a column an older Assay did not write reads as
    null (or its default), so stores outlive schema additions."""
    polars_schema = _polars_schema(schema)
    if not parts:
        return pl.DataFrame(schema=polars_schema)
    dataset = next((name for name in _DEFAULTS if getattr(_schema, name.upper()) is schema), "")
    frame = pl.scan_parquet(parts, schema=polars_schema, missing_columns="insert")
    return _with_defaults(dataset, frame).collect()


def _with_defaults(dataset: str, frame: pl.LazyFrame) -> pl.LazyFrame:
    defaults = _DEFAULTS.get(dataset)
    return frame.with_columns(**defaults) if defaults else frame


# What a column added later means for rows written before it: every score row of an older store
# is a score (gauges came later), its value its score.
_DEFAULTS: dict[str, dict[str, pl.Expr]] = {
    "scores": {
        "kind": pl.col("kind").fill_null(RowKind.SCORE.value),
        "value": pl.when(pl.col("kind").is_null()).then(pl.col("score")).otherwise(pl.col("value")),
    },
}
