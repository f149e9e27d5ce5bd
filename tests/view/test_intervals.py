"""The runs page's intervals come from Polars' moments of the scores (a million scores are never
handed over as an array): the same interval, method and digits as `score_interval` over the
values, for a small binary scorer (Wilson), a large binary one and a graded one (t)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from assay import _schema
from assay.analysis.intervals import score_interval
from assay.store import Store
from assay.view.runs import scorer_means


@pytest.mark.parametrize(
    ("n", "values"),
    [
        (40, lambda rng, n: (rng.random(n) < 0.7).astype(float)),
        (5_000, lambda rng, n: (rng.random(n) < 0.7).astype(float)),
        (5_000, lambda rng, n: np.round(rng.random(n) * 10) / 10),
        (1, lambda rng, n: np.ones(n)),
    ],
)
def test_scorer_means_match_score_interval(tmp_path, n, values):
    scores = values(np.random.default_rng(n), n)
    store = Store(tmp_path / "store")
    rows = [{"item_id": f"q{i}", "item_index": i, "trial": 0, "outcome": "completed"} for i in range(n)]
    score_rows = [
        {"item_id": f"q{i}", "item_index": i, "trial": 0, "kind": "score", "scorer": "s"}
        | {"score": float(v), "value": float(v), "outcome": "scored"}
        for i, v in enumerate(scores)
    ]
    store.commit_batch(
        "r",
        "part-00000-x",
        pa.Table.from_pylist(rows, schema=_schema.ITEMS),
        pa.Table.from_pylist(score_rows, schema=_schema.SCORES),
    )
    (shown,) = scorer_means(store, "r")
    low, high, method = score_interval(scores)
    assert shown["n"] == n and shown["ci_method"] == method.value
    assert shown["mean"] == pytest.approx(scores.mean(), abs=1e-12)
    if np.isnan(low):
        assert shown["ci_low"] is None and shown["ci_high"] is None
    else:
        assert (shown["ci_low"], shown["ci_high"]) == pytest.approx((low, high), abs=1e-12)
