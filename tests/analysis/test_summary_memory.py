"""A run's summary aggregates over its parts' scan, one statistic at a time, instead of holding
every column it uses (issue 28: the run page of a 1,000,000-item run peaked at ~1.1 GB;
docs/performance.md). Summarised in a fresh process, a large run's peak RSS stays well under what
reading the columns once took."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from assay import _schema
from assay.analysis.summary import RunRows, summarise
from assay.store import Store

ITEMS = 400_000
PART = 50_000
# Measured at 400,000 items (two scorers): 515 MB reading the columns once, 272-274 MB now; the
# process alone (Polars and Assay imported) is ~130 MB.
PEAK_MB = 400

SUMMARISE = """
import json, sys
from assay.analysis.summary import summarise
from assay.store import Store
summary = summarise(Store(sys.argv[1]), "big")
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"peak_mb": int(peak.split()[1]) / 1024, "summary": summary}, default=str))
"""


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with every column of `schema`, in its order and types (absent ones null)."""
    columns = [
        table.column(f.name).cast(f.type)
        if f.name in table.column_names
        else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _write_run(store: Store, n: int) -> None:
    """A finished run of `n` items through the store's writer: ~3 % failed, the rest scored by a
    binary `exact` and a continuous `judge`."""
    rng = np.random.default_rng(1)
    store.write_run(
        "big",
        {"kind": "run", "name": "big", "status": "completed", "trials": 1, "n_planned": n}
        | {"fail_on_item_error_rate": 1.0, "fail_on_scorer_error_rate": 1.0},
    )
    for start in range(0, n, PART):
        index = np.arange(start, min(n, start + PART))
        failed = rng.random(index.size) < 0.03
        items = pa.table(
            {
                "item_id": [f"q{i}" for i in index],
                "item_index": index,
                "trial": np.zeros(index.size, dtype=np.int32),
                "outcome": np.where(failed, "failed", "completed"),
                "error": np.where(failed, "HTTP 500 from the model", None),
                "duration_ms": rng.gamma(2.0, 150.0, index.size),
                "cost_usd": rng.random(index.size) * 1e-4,
                "operations": np.ones(index.size, dtype=np.int64),
                "retry": np.zeros(index.size, dtype=np.int32),
            }
        )
        scored = index[~failed]
        scores = pa.table(
            {
                "item_id": [f"q{i}" for i in scored] * 2,
                "item_index": np.concatenate([scored, scored]),
                "trial": np.zeros(2 * scored.size, dtype=np.int32),
                "kind": ["score"] * (2 * scored.size),
                "scorer": ["exact"] * scored.size + ["judge"] * scored.size,
                "score": np.concatenate(
                    [(rng.random(scored.size) < 0.7).astype(float), rng.random(scored.size)]
                ),
                "outcome": ["scored"] * (2 * scored.size),
            }
        )
        store.commit_batch(
            "big",
            f"part-{start // PART:05d}",
            _conform(items, _schema.ITEMS),
            _conform(scores, _schema.SCORES),
        )


@pytest.mark.slow
def test_summarising_a_large_run_does_not_hold_its_columns(tmp_path) -> None:
    root = str(tmp_path / "store")
    store = Store(root)
    _write_run(store, ITEMS)
    done = subprocess.run(
        [sys.executable, "-c", SUMMARISE, root], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout)
    assert measured["peak_mb"] < PEAK_MB, (
        f"summarising {ITEMS:,} items peaked at {measured['peak_mb']:.0f} MB"
    )

    # The same document as the columns read once into frames (what the summary did before).
    scanned = RunRows.scan(store, "big").narrow()
    read_once = RunRows(
        *(rows.lazy().collect() for rows in (scanned.history, scanned.scores, scanned.requests))
    )
    assert json.dumps(measured["summary"], sort_keys=True) == json.dumps(
        summarise(store, "big", read_once), sort_keys=True, default=str
    )
    assert measured["summary"]["items"]["completed"] + measured["summary"]["items"]["failed"] == ITEMS
