"""How a file enters the store: written whole under a staging folder, then published under its
final name in one step, never replaced (assay/store/local.py draws the protocol that builds on these).

    listing(folder)                  a folder's entries; none if it is gone (a run deleted meanwhile)
    stage(table, batch, dataset)     a batch's table, `<dataset>.staged` once whole
    put(final, write, staging)       write under `staging`, then link to `final` unless taken
                                     (`assay._files.create_new`)
    write_revision(folder, stem, …)  a record's next revision, `<stem>-<n>.parquet`, put-if-absent
    newest_revision(folder, stem)    the file of a record's highest revision

`ASSAY_FAULT_KILL` (tests only) SIGKILLs the process at a chosen write or publish: `fault`.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from assay._files import create_new

WRITING, STAGED = ".writing", ".staged"


def listing(folder: Path) -> list[Path]:
    """The entries of `folder`, sorted; none if it does not exist (or no longer: a run deleted)."""
    try:
        return sorted(folder.iterdir())
    except FileNotFoundError:
        return []


def write_parquet(table: pa.Table, path: Path) -> None:
    pq.write_table(table, path, compression="zstd")


def stage(table: pa.Table, batch: Path, dataset: str) -> None:
    """Write a batch's table of `dataset` into its staging folder: `<dataset>.staged` once whole."""
    writing = batch / f"{dataset}{WRITING}"
    if fault("stage", dataset):
        die_midway(table, writing)
    write_parquet(table, writing)
    os.replace(writing, batch / f"{dataset}{STAGED}")


def put(final: Path, write: Callable[[Path], None], staging: Path) -> None:
    """Write a file under `staging`, then give it its final name unless a file has that name
    already (put-if-absent: `FileExistsError`). A hard link publishes without replacing."""
    if not create_new(final, write, temporary=staging / f"{uuid.uuid4().hex}{STAGED}"):
        raise FileExistsError(final)


_REVISION = re.compile(r"-(\d+)")


def revision_of(path: Path, stem: str) -> int | None:
    """`<stem>-<n>.parquet` is revision n; `<stem>.parquet`, from before revisions, is 0."""
    if path.suffix != ".parquet" or not path.name.startswith(stem):
        return None
    rest = path.stem[len(stem) :]
    if not rest:
        return 0
    match = _REVISION.fullmatch(rest)
    return int(match.group(1)) if match else None


def revisions(folder: Path, stem: str) -> dict[int, Path]:
    """The record's files in `folder` by revision."""
    found = {}
    for path in listing(folder):
        revision = revision_of(path, stem)
        if revision is not None:
            found[revision] = path
    return found


def newest_revision(folder: Path, stem: str) -> Path | None:
    """The file of the record's highest revision in `folder`, or None."""
    found = revisions(folder, stem)
    return found[max(found)] if found else None


def write_revision(folder: Path, stem: str, table: Callable[[int], pa.Table], staging: Path) -> int:
    """Write `table(n)` as `<stem>-<n>.parquet`, n one more than the newest revision: if another
    writer took n meanwhile, the next one."""
    while True:
        revision = max(revisions(folder, stem), default=0) + 1
        write = functools.partial(write_parquet, table(revision))
        try:
            put(folder / f"{stem}-{revision:06d}.parquet", write, staging)
        except FileExistsError:
            continue
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
