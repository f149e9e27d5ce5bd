"""Synthetic runs written through the store's own writer (`Store.commit_batch`), for the
benchmarks and tests that need a run of a million items without making a million calls: ~3 % of
items failed, the rest scored by a pass/fail `exact` and a continuous `judge`, with inputs,
outputs and an annotation like a real run's."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa

from assay import _schema
from assay.analysis.run_figures import keep_figures, part_figures
from assay.store import Store

PART = 50_000
"""Items a part file holds."""


def record(name: str, n: int) -> dict[str, Any]:
    """A finished run's record of `n` items (a python target's, model `<name>-model`)."""
    now = datetime.now(UTC)
    return {
        "kind": "run",
        "name": name,
        "status": "completed",
        "created_at": now,
        "finished_at": now,
        "spec_hash": "bench",
        "dataset_hash": "bench",
        "target_hash": name,
        "scorers_hash": "bench",
        "target_kind": "python",
        "model": f"{name}-model",
        "trials": 1,
        "seed": 0,
        "tags": ["bench"],
        "n_items": n,
        "n_planned": n,
        "n_completed": n,
        "n_failed": 0,
        "fail_on_item_error_rate": 1.0,
        "assay_version": "bench",
    }


def write_run(
    store: Store, run_id: str, n: int, skill: float = 0.7, seed: int = 0, *, kept: bool = True
) -> None:
    """A finished run of `n` items: ~3 % failed, the rest scored by `exact` (pass with chance
    `skill`) and `judge` (uniform). Its record keeps its summary's figures as a run's closing
    record does (`runs.summary_json`), unless not `kept` (a run an older Assay closed)."""
    rng = np.random.default_rng(seed)
    closing = record(run_id, n)
    revision = store.write_run(run_id, closing)
    topics = np.array(['{"topic": "maths"}', '{"topic": "words"}', '{"topic": "code"}'])
    for start in range(0, n, PART):
        index = np.arange(start, min(n, start + PART))
        ids = [f"q{i}" for i in index]
        failed = rng.random(index.size) < 0.03
        passed = rng.random(index.size) < skill
        outputs = np.where(passed, "the answer is right", "the answer is wrong, sadly")
        items = pa.table(
            {
                "item_id": ids,
                "item_index": index,
                "trial": np.zeros(index.size, dtype=np.int32),
                "input": [f'"What is {i} + {i}?"' for i in index],
                "expected": [f'"{2 * i}"' for i in index],
                "annotations": topics[index % 3],
                "output": [f'"{o}"' for o in outputs],
                "output_text": outputs,
                "outcome": np.where(failed, "failed", "completed"),
                "error": np.where(failed, "HTTP 500 from the model", None),
                "duration_ms": rng.gamma(2.0, 150.0, index.size),
                "cost_usd": rng.random(index.size) * 1e-4,
                "operations": np.ones(index.size, dtype=np.int64),
                "retry": np.zeros(index.size, dtype=np.int32),
            }
        )
        items = conform(items, _schema.ITEMS)
        ok = ~failed
        scored = index[ok]
        scores = pa.table(
            {
                "item_id": [f"q{i}" for i in scored] * 2,
                "item_index": np.concatenate([scored, scored]),
                "trial": np.zeros(2 * scored.size, dtype=np.int32),
                "kind": ["score"] * (2 * scored.size),
                "scorer": ["exact"] * scored.size + ["judge"] * scored.size,
                "scorer_kind": ["deterministic"] * scored.size + ["llm_judge"] * scored.size,
                "score": np.concatenate([passed[ok].astype(float), rng.random(scored.size)]),
                "outcome": ["scored"] * (2 * scored.size),
                "explanation": [None] * scored.size + ["a judge's reason"] * scored.size,
            }
        )
        scores = conform(scores, _schema.SCORES)
        scores = scores.set_column(scores.schema.get_field_index("value"), "value", scores.column("score"))
        store.commit_batch(run_id, f"part-{start // PART:05d}-bench", items, scores)
    if kept:
        figures = part_figures(store, run_id, store.read_run(run_id))
        store.write_run(run_id, {**closing, "summary_json": keep_figures(figures)}, after=revision)


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with every column of `schema`, in its order and types (absent ones null)."""
    columns = [
        table.column(f.name).cast(f.type)
        if f.name in table.column_names
        else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)
