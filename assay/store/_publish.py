"""How a file enters the store: written whole under a staging folder, then published under its
final name in one step, never replaced (assay/store.py draws the protocol that builds on these).

    stage(table, batch, dataset)     a batch's table, `<dataset>.staged` once whole (local folders)
    write_revision(location, …)      a record's next revision, `<stem>-<n>.parquet`, put-if-absent
    newest_revision(location, …)     the key of a record's highest revision

`ASSAY_FAULT_KILL` (tests only) SIGKILLs the process at a chosen write or publish: `fault`.
"""

from __future__ import annotations

import os
import re
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from assay.store._location import STAGED, WRITING, Location, write_parquet

__all__ = ["STAGED", "WRITING", "newest_revision", "revisions", "stage", "write_parquet", "write_revision"]


def stage(table: pa.Table, batch: Path, dataset: str) -> None:
    """Write a batch's table of `dataset` into its staging folder: `<dataset>.staged` once whole."""
    writing = batch / f"{dataset}{WRITING}"
    if fault("stage", dataset):
        die_midway(table, writing)
    write_parquet(table, writing)
    os.replace(writing, batch / f"{dataset}{STAGED}")


_REVISION = re.compile(r"-(\d+)")


def revision_of(name: str, stem: str) -> int | None:
    """`<stem>-<n>.parquet` is revision n; `<stem>.parquet`, from before revisions, is 0."""
    if not name.endswith(".parquet") or not name.startswith(stem):
        return None
    rest = name[len(stem) : -len(".parquet")]
    if not rest:
        return 0
    match = _REVISION.fullmatch(rest)
    return int(match.group(1)) if match else None


def revisions(location: Location, folder: str, stem: str) -> dict[int, str]:
    """The record's keys in `folder` by revision."""
    found = {}
    for name in location.names(folder):
        revision = revision_of(name, stem)
        if revision is not None:
            found[revision] = f"{folder}/{name}"
    return found


def newest_revision(location: Location, folder: str, stem: str) -> str | None:
    """The key of the record's highest revision in `folder`, or None."""
    found = revisions(location, folder, stem)
    return found[max(found)] if found else None


def write_revision(
    location: Location, folder: str, stem: str, table: Callable[[int], pa.Table], staging: str
) -> int:
    """Write `table(n)` as `<stem>-<n>.parquet`, n one more than the newest revision: if another
    writer took n meanwhile (put-if-absent), the next one."""
    while True:
        revision = max(revisions(location, folder, stem), default=0) + 1
        if location.create(f"{folder}/{stem}-{revision:06d}.parquet", table(revision), staging):
            return revision


# -- fault injection, for the tests of the commit protocol ------------------------------------------

_FAULT_ENV = "ASSAY_FAULT_KILL"
_fault_seen: Counter[str] = Counter()


def fault(step: str, dataset: str) -> bool:
    """With `ASSAY_FAULT_KILL=<step>:<dataset>:<n>` (tests only), true the n-th time this process
    reaches `step` (`stage` or `publish`) for a file of `dataset`: the caller then dies there."""
    wanted = os.environ.get(_FAULT_ENV)
    if not wanted:
        return False
    key = f"{step}:{dataset}"
    _fault_seen[key] += 1
    return wanted == f"{key}:{_fault_seen[key]}"


def die_midway(table: pa.Table, path: Path) -> None:
    """SIGKILL this process halfway through writing `table` to `path`: what a kill during a write leaves."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    data = sink.getvalue().to_pybytes()
    with path.open("wb") as file:
        file.write(data[: len(data) // 2])
        file.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def crash_point(step: str, dataset: str) -> None:
    """SIGKILL this process here if `ASSAY_FAULT_KILL` names this point (see `fault`)."""
    if fault(step, dataset):
        os.kill(os.getpid(), signal.SIGKILL)
