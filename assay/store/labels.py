"""Human labels of a run's outputs: `<root>/labels/run_id=<id>/labels-<revision>.parquet`.

Plain functions over a `Store`, for the CLI (`assay labels`), the analysis (agreement and
judge-corrected estimates) and the viewer's labelling page alike:

    output_hash(output)          what ties a label to the output it judged
    write_labels(store, id, rows) one import: the run's next revision, a file of its own
    read_labels(store, id)       a run's current labels (each labeller's newest per item x trial x scorer)
    run_labels(store, id)        the labels that apply to a run, its rescores' sources' included,
                                 each marked `stale` where the output changed since it was judged
    all_labels(store)            every revision of every run's labels (the analysts' view)

Labels are written like the run records (`_revisions.py`): an import never changes a file, a
second import of the same item adds a newer revision, and the history stays. A label carries the
sha256 of the output it judged; a run whose current output of that item x trial hashes otherwise
reports the label stale and no estimate uses it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from assay import _schema
from assay._lazy import lazy_module
from assay.errors import StoreError
from assay.store import _revisions
from assay.store.local import STAGING, Store, current_items, scan_parts

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")

_STEM = "labels"
_KEY = ("item_id", "trial", "scorer", "labeller")
_LABEL_KEYS = frozenset(_schema.LABELS.names) - {"revision"}


def output_hash(output: str | None) -> str:
    """sha256 of an output as `items.output` stores it (JSON text); a missing output hashes as ''."""
    return hashlib.sha256((output or "").encode()).hexdigest()


def _folder(run_id: str) -> str:
    return f"labels/run_id={run_id}"


def write_labels(store: Store, run_id: str, rows: Sequence[_schema.LabelRow]) -> int:
    """Store one import of a run's labels as its next revision; returns the revision.

    Args:
        store: the store.
        run_id: the labelled run.
        rows: the labels, every column of `labels` but `revision` (which this adds).

    Raises:
        StoreError: a row has a key that is no column of `labels`.
    """
    for row in rows:
        unknown = sorted(row.keys() - _LABEL_KEYS - {"run_id"})
        if unknown:
            raise StoreError(f"run {run_id!r}'s labels: no column of labels is named {', '.join(unknown)}")

    def table(revision: int) -> pa.Table:
        return pa.Table.from_pylist(
            [{k: v for k, v in row.items() if k != "run_id"} | {"revision": revision} for row in rows],
            schema=_schema.LABELS,
        )

    return _revisions.write_revision(
        store.location, _folder(run_id), _STEM, table, f"{STAGING}/run_id={run_id}"
    )


def read_labels(store: Store, run_id: str, *, history: bool = False) -> pl.DataFrame:
    """A run's labels: each labeller's current label of each item x trial x scorer (the one of
    the highest revision), or with `history` every row of every revision. No labels: no rows."""
    keys = sorted(_revisions.revisions(store.location, _folder(run_id), _STEM).items())
    frame = scan_parts(
        _schema.LABELS,
        [store.location.reader_path(key) for _, key in keys],
        storage_options=store.location.storage_options,
    ).collect()
    frame = frame.with_columns(pl.lit(run_id).alias("run_id")).select("run_id", pl.exclude("run_id"))
    if history:
        return frame
    # Within one revision a later row of the same key wins, as a file is read in order.
    return (
        frame.with_row_index("_order")
        .sort("revision", "_order")
        .unique(list(_KEY), keep="last", maintain_order=True)
        .drop("_order")
    )


def run_labels(store: Store, run_id: str) -> pl.DataFrame:
    """The labels that apply to a run: its own and those of the runs it rescored (a rescore keeps
    the outputs, so their labels still judge them), each with `stale` — the run's current output
    of that item x trial hashes otherwise than the output labelled, or the run has no such item —
    and `labelled_run_id`, the run the label was imported for. The run's own label wins over a
    source's of the same key."""
    chain = [run_id]
    while (source := store.read_run(chain[-1]).get("source_run_id")) and source not in chain:
        chain.append(source)
    frames = [read_labels(store, rid).rename({"run_id": "labelled_run_id"}) for rid in chain]
    labels = pl.concat(frames, how="vertical")
    labels = labels.unique(list(_KEY), keep="first", maintain_order=True)
    # Only the labelled items' outputs are hashed: a label's staleness needs no other.
    hashes = _hashes(store, run_id, labels.select("item_id", "trial").unique()).rename(
        {"output_hash": "current_hash"}
    )
    joined = labels.join(hashes, on=["item_id", "trial"], how="left")
    return joined.with_columns(
        stale=pl.col("current_hash").is_null() | (pl.col("current_hash") != pl.col("output_hash"))
    ).drop("current_hash")


def all_labels(store: Store) -> pl.LazyFrame:
    """Every revision of every run's labels, with `run_id` (docs/analysts.md: a labeller's current
    label is the highest `revision` per run x item x trial x scorer x labeller)."""
    return store._scan("labels", "*.parquet")


def current_hashes(store: Store, run_id: str, keys: pl.DataFrame | None = None) -> dict[tuple[str, int], str]:
    """The output hash of each current item x trial of a run: what a new label of it judges.

    Args:
        store: the store.
        run_id: the run.
        keys: only these items x trials (a frame of `item_id`, `trial`); default every one.
    """
    return {(item, trial): digest for item, trial, digest in _hashes(store, run_id, keys).iter_rows()}


def _hashes(store: Store, run_id: str, keys: pl.DataFrame | None = None) -> pl.DataFrame:
    """The output hash of the run's current items x trials, of those in `keys` only when given."""
    lazy = current_items(store.scan_run(run_id, "items")).select("item_id", "trial", "output")
    if keys is not None:
        lazy = lazy.join(keys.lazy(), on=["item_id", "trial"], how="semi")
    items = lazy.collect()
    return items.select(
        "item_id",
        "trial",
        pl.col("output")
        .map_elements(output_hash, return_dtype=pl.String, skip_nulls=False)
        .alias("output_hash"),
    )
