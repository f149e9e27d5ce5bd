"""How a file enters the store: written whole under a staging folder, then published under its
final name in one step, never replaced (assay/store/local.py draws the protocol that builds on these).

    write_parquet(table, path)       a table as a Parquet file
    stage(table, batch, dataset)     a batch's table, `<dataset>.staged` once whole (local folders)
    staged_name(final)               the name a batch's file is staged (and crash-tested) under

Revisions of records (put-if-absent on either kind of location) are in `_revisions.py`.

`ASSAY_FAULT_KILL` (tests only) SIGKILLs the process at a chosen write or publish: `fault`.
"""

from __future__ import annotations

import io
import os
import signal
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

WRITING, STAGED = ".writing", ".staged"


def write_parquet(table: pa.Table, path: Path | io.BytesIO) -> None:
    """One table as one Parquet file (zstd), the store's only way to write one."""
    pq.write_table(table, path, compression="zstd")


def staged_name(final: str) -> str:
    """A batch file's staged name: its dataset (`items/run_id=x/part.parquet` -> `items`)."""
    return final.split("/", 1)[0]


def stage(table: pa.Table, batch: Path, dataset: str) -> None:
    """Write a batch's table of `dataset` into its staging folder: `<dataset>.staged` once whole."""
    writing = batch / f"{dataset}{WRITING}"
    if fault("stage", dataset):
        die_midway(table, writing)
    write_parquet(table, writing)
    os.replace(writing, batch / f"{dataset}{STAGED}")


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
