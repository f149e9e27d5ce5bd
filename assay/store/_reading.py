"""The store's readers, also of files an older Assay wrote: parts of a dataset read (or scanned)
under today's schema, a column added later given its meaning for the rows written before it, and
an item's current row among its retries."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

import pyarrow as pa

from assay import _schema
from assay._lazy import lazy_module
from assay.outcomes import RowKind
from assay.store._bucket import ObjectPrefix
from assay.store._copies import PartCopies, copyable

if TYPE_CHECKING:
    import polars as pl

    from assay.store._location import Location
else:
    pl = lazy_module("polars")


_log = logging.getLogger(__name__)


def _polars_schema(schema: pa.Schema) -> pl.Schema:
    # A copy of the one converted per schema (~1 ms for `runs`, and a record read needs it twice).
    return _converted_schema(schema).copy()


def _frame(table: pa.Table) -> pl.DataFrame:
    """`pl.from_arrow` of a table, typed as the DataFrame it is (pyarrow has no types, so Polars'
    overloads cannot tell a table from an array, which makes a Series)."""
    return cast(pl.DataFrame, pl.from_arrow(table))


@cache
def _converted_schema(schema: pa.Schema) -> pl.Schema:
    return _frame(schema.empty_table()).schema


def read_parts(
    schema: pa.Schema,
    parts: list[str],
    *,
    hive: bool = False,
    columns: list[str] | None = None,
    storage_options: dict[str, str] | None = None,
) -> pl.DataFrame:
    """Parts of one dataset under today's schema: a column an older Assay did not write reads as
    null (or its default), so stores outlive schema additions.

    Args:
        schema: the dataset's schema.
        parts: the files (paths, or URLs readable with `storage_options`).
        hive: add the partition key `run_id` (from the path) as the first column.
        columns: only these columns (default: all).
        storage_options: Polars' options for object-store URLs.
    """
    while parts:
        try:
            return _read_files(schema, parts, hive=hive, columns=columns, storage_options=storage_options)
        except FileNotFoundError:
            # Files never change once published, but deleting a run removes them: one gone since
            # the listing belonged to a run deleted meanwhile, which the answer leaves out.
            present = [p for p in parts if storage_options is not None or Path(p).exists()]
            if len(present) == len(parts):
                raise
            parts = present
    polars_schema = _polars_schema(schema)
    frame = pl.DataFrame(schema={"run_id": pl.String, **polars_schema} if hive else polars_schema)
    return frame.select(columns) if columns else frame


def _read_files(
    schema: pa.Schema,
    parts: list[str],
    *,
    hive: bool,
    columns: list[str] | None,
    storage_options: dict[str, str] | None,
) -> pl.DataFrame:
    lazy = scan_parts(schema, parts, hive=hive, storage_options=storage_options)
    return (lazy.select(columns) if columns else lazy).collect()


def scan_parts(
    schema: pa.Schema,
    parts: list[str] | list[IO[bytes]],
    *,
    hive: bool = False,
    storage_options: dict[str, str] | None = None,
) -> pl.LazyFrame:
    """A lazy view of parts of one dataset under today's schema (`read_parts`, not read yet): a
    query over it reads only the columns and rows it needs.

    Args:
        schema: the dataset's schema.
        parts: the files (paths, or URLs readable with `storage_options`, or their bytes: no
            `hive`); none: no rows.
        hive: add the partition key `run_id` (from the path) as the first column.
        storage_options: Polars' options for object-store URLs.
    """
    polars_schema = _polars_schema(schema)
    if not parts:
        return pl.LazyFrame(schema={"run_id": pl.String, **polars_schema} if hive else polars_schema)
    dataset = next((name for name in _DATASETS if getattr(_schema, name.upper()) is schema), "")
    lazy = pl.scan_parquet(
        parts,
        schema=polars_schema,
        missing_columns="insert",
        # A newer Assay's columns: this version does not know them, and reads the rest.
        extra_columns="ignore",
        hive_partitioning=hive,
        hive_schema={"run_id": pl.String} if hive else None,
        storage_options=storage_options,
    )
    lazy = _with_defaults(dataset, lazy)
    return lazy.select("run_id", pl.exclude("run_id")) if hive else lazy


def _with_defaults(dataset: str, frame: pl.LazyFrame) -> pl.LazyFrame:
    defaults = _defaults().get(dataset)
    return frame.with_columns(**defaults) if defaults else frame


_DATASETS = ("runs", "items", "scores", "requests", "turns")


@cache
def _defaults() -> dict[str, dict[str, pl.Expr]]:
    """What a column added later means for rows written before it: every score row of an older
    store is a score (gauges came later), its value its score; a run record from before revisions
    is revision 0; an item row (and its turns) from before retries is retry 0. (A function: the
    expressions need Polars, which a run loads only once it is under way.)"""
    return {
        "scores": {
            "kind": pl.col("kind").fill_null(RowKind.SCORE.value),
            "value": pl.when(pl.col("kind").is_null()).then(pl.col("score")).otherwise(pl.col("value")),
        },
        "runs": {"revision": pl.col("revision").fill_null(0)},
        # Rows from before `--retry-failed` are each item x trial's first execution.
        "items": {"retry": pl.col("retry").fill_null(0)},
        "turns": {"retry": pl.col("retry").fill_null(0)},
    }


def stored_form(run_id: str, record: Mapping[str, Any]) -> _schema.RunRecord:
    """A run record as `Store.read_run` would return it once written: every column of `runs`,
    each value as read back (a writer that holds the record need not read it again)."""
    table = pa.Table.from_pylist([dict(record)], schema=_schema.RUNS)
    (row,) = _with_defaults("runs", _frame(table).lazy()).collect().to_dicts()
    return cast(_schema.RunRecord, {"run_id": run_id, **row})


def current_items(items: pl.DataFrame | pl.LazyFrame, by: tuple[str, ...] = ()) -> Any:
    """The current row of each item x trial: its highest `retry` (`assay resume --retry-failed`
    keeps the failed rows it replaced, as history). Without retries, every row.

    Args:
        items: items rows (a frame or a lazy one).
        by: more key columns, e.g. `("run_id",)` over several runs.
    """
    keys = [*by, "item_id", "trial"]
    return items.filter(pl.col("retry") == pl.col("retry").max().over(keys))


# The listings made in a `Reading.same_listings` block, by location root and key.
_listed: ContextVar[dict[tuple[str, str], list[str]] | None] = ContextVar("listed", default=None)


class Reading:
    """What `Store` reads through its location: a dataset's parts by key, and every run's rows of a
    dataset as one lazy frame (the analyst's view).

    Attributes:
        location: where the bytes live (set by `Store`).
        copies: local copies of an object store's parts, read instead of the bucket's objects
            (`keep_copies`); None: parts are read where they live.
    """

    location: Location
    copies: PartCopies | None = None

    def keep_copies(self, folder: Path, cap_bytes: int) -> None:
        """Read an object store's parts from local copies kept in `folder` (`_copies.py`): for a
        reader that reads the same parts again and again (`assay view`). No effect on a local
        folder, whose parts are files already.

        Args:
            folder: where the copies are kept (this store's own: not shared with another).
            cap_bytes: the copies' total size past which the least recently read are deleted.
        """
        if isinstance(self.location, ObjectPrefix):
            self.copies = PartCopies(self.location, folder, cap_bytes)

    @contextmanager
    def same_listings(self) -> Iterator[None]:
        """List each run's partition of a dataset once while the block runs, in this thread:
        a page of `assay view` reads one run's parts in several queries, and on an object store
        each listing is a request (20–50 ms on a real bucket). Parts are only ever added, so the
        block reads a snapshot: a batch committed meanwhile is seen by the next block."""
        token = _listed.set({})
        try:
            yield
        finally:
            _listed.reset(token)

    def _names(self, key: str) -> list[str]:
        """The names under `key` (`Location.names`), listed once in a `same_listings` block."""
        listed = _listed.get()
        if listed is None:
            return self.location.names(key)
        memo = (str(self.location.root), key)
        if memo not in listed:
            listed[memo] = self.location.names(key)
        return listed[memo]

    def _reader_paths(self, keys: list[str]) -> tuple[list[str], dict[str, str] | None]:
        """Where Polars reads `keys`, and the storage options it needs for that: the local copies
        when every key is a part and copies are kept, else the location's own paths."""
        if self.copies is not None and keys and all(copyable(key) for key in keys):
            try:
                return self.copies.paths(keys), None
            except OSError as exc:
                # The local folder full or unwritable: the bucket still answers, only slower.
                _log.warning("reading %s from the bucket: its local copies failed (%s)", keys[0], exc)
        return [self.location.reader_path(key) for key in keys], self.location.storage_options

    # -- reading ------------------------------------------------------------------------------

    def _read(
        self, schema: pa.Schema, keys: list[str], *, hive: bool = False, columns: list[str] | None = None
    ) -> pl.DataFrame:
        """Parts of one dataset (by key) under today's schema (`read_parts`)."""
        paths, storage_options = self._reader_paths(keys)
        return read_parts(schema, paths, hive=hive, columns=columns, storage_options=storage_options)

    # -- the analyst's view -----------------------------------------------------------------------

    def _scan(self, dataset: str, pattern: str, key: str = "run_id") -> pl.LazyFrame:
        prefix = pattern.split("*", 1)[0]
        if not any(
            name.startswith(prefix) and name.endswith(".parquet")
            for partition in self.location.names(dataset)
            if partition.startswith(f"{key}=")
            for name in self.location.names(f"{dataset}/{partition}")
        ):
            schema = _frame(getattr(_schema, dataset.upper()).empty_table()).schema
            return pl.LazyFrame(schema={key: pl.String, **schema})
        return _with_defaults(
            dataset,
            pl.scan_parquet(
                self.location.reader_path(f"{dataset}/**/{pattern}"),
                schema=_polars_schema(getattr(_schema, dataset.upper())),
                missing_columns="insert",
                extra_columns="ignore",
                hive_partitioning=True,
                hive_schema={key: pl.String},
                storage_options=self.location.storage_options,
            ),
        )

    def items(self) -> pl.LazyFrame:
        """Every item row of every run, history included: `current_items` keeps the current ones."""
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

    def leaderboards(self) -> pl.LazyFrame:
        """Every revision of every matrix's leaderboard (a matrix's current one: its highest
        `revision`); an empty frame where no matrix ran."""
        return self._scan("leaderboards", "*.parquet", key="matrix_id")
