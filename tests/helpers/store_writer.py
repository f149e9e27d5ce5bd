"""A process that writes a store through `assay.store` in a tight loop, as runs do but faster, for
tests/store/test_store_concurrency.py.

    python -m tests.helpers.store_writer STORE ROUNDS [--batches] [--delete]

It writes ROUNDS rounds as fast as it can. Round n writes the
next revision of run `w<n % 5>`'s record, and every fifth round the next revision of matrix `m`'s
leaderboard. With `--batches` it first commits a batch (items and scores) to that run; with
`--delete` it also creates a run `d<n>` and deletes the one made two rounds before.
"""

from __future__ import annotations

import sys
import uuid
from datetime import UTC, datetime

import pyarrow as pa

from assay import _schema
from assay.store import Store

RUNS = [f"w{i}" for i in range(5)]


def record(run_id: str, n: int) -> dict:
    """A run record whose size changes with `n` (a replaced file of another size is what breaks readers)."""
    return {
        "kind": "run",
        "name": "writer",
        "status": "running" if n % 3 else "completed",
        "created_at": datetime(2026, 1, 1, tzinfo=UTC),
        "n_planned": n,
        "n_completed": n,
        "tags": ["x" * (n % 40)] * (n % 7),
        "spec_json": "{}" + " " * (n % 500),
        "matrix_id": "m",
        "cell": run_id,
    }


def batch(run_id: str, n: int) -> tuple[pa.Table, pa.Table]:
    items = [
        {"item_id": f"{run_id}-{n}-{i}", "item_index": i, "trial": 0, "outcome": "completed"}
        for i in range(3)
    ]
    scores = [
        {"item_id": row["item_id"], "item_index": row["item_index"], "trial": 0, "kind": "score"}
        | {"scorer": "exact", "score": 1.0, "value": 1.0, "outcome": "scored"}
        for row in items
    ]
    return (
        pa.Table.from_pylist(items, schema=_schema.ITEMS),
        pa.Table.from_pylist(scores, schema=_schema.SCORES),
    )


def seed(store: Store) -> None:
    """What the store holds before the loop: each run with a record and a batch, and a leaderboard."""
    for run_id in RUNS:
        store.write_run(run_id, record(run_id, 0))
        store.commit_batch(run_id, f"part-00000-{run_id}-seed", *batch(run_id, 0))
    store.write_leaderboard("m", [{"cell": run_id, "run_id": run_id, "scorer": "exact"} for run_id in RUNS])


def main(root: str, rounds: int, batches: bool, delete: bool) -> None:
    store = Store(root)
    for n in range(1, rounds + 1):
        run_id = RUNS[n % len(RUNS)]
        if batches:
            # Part names are random, as a run's are: two writers never pick the same one.
            store.commit_batch(run_id, f"part-00000-{uuid.uuid4().hex[:12]}", *batch(run_id, n))
        store.write_run(run_id, record(run_id, n))
        if n % len(RUNS) == 0:
            store.write_leaderboard(
                "m", [{"cell": r, "run_id": r, "scorer": "exact", "n_scored": n} for r in RUNS]
            )
        if delete:
            store.write_run(f"d{n}", record(f"d{n}", n))
            store.commit_batch(f"d{n}", "part-00000-d", *batch(f"d{n}", n))
            if n > 2:
                store.delete_run(f"d{n - 2}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), "--batches" in sys.argv[3:], "--delete" in sys.argv[3:])
