"""The nightly benchmark: first night said so, later nights compared with the last good one, pruned."""

from __future__ import annotations

import json

import polars as pl
import pytest

from assay.cli import main
from assay.store import Store
from tests.conftest import openai_spec


def nightly(capsys, spec, store, *extra) -> tuple[int, dict]:
    code = main(["nightly", str(spec), "--store", str(store), "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_nights_compare_with_the_last_good_one_and_old_ones_are_pruned(tmp_path, mock, capsys):
    spec = openai_spec(tmp_path, mock.base_url, n=30, fail_on_item_error_rate=1)
    store = tmp_path / "s"

    code, first = nightly(capsys, spec, store, "--retention", "2")
    (night,) = first["specs"]
    assert code == 0 and night["baseline"] is None and "first night" in night["note"]
    assert "nightly" in Store(store).read_run(night["run_id"])["tags"]

    code, second = nightly(capsys, spec, store, "--retention", "2")
    (night2,) = second["specs"]
    assert code == 0 and night2["baseline"] == night["run_id"]
    assert {row["verdict"] for row in night2["comparison"]["scorers"]} == {"unchanged"}

    # Tonight the model answers worse: the comparison regresses and the nightly fails.
    mock.configure(answers={f"What is {i} + {i}?": "no idea" for i in range(30)})
    code, third = nightly(capsys, spec, store, "--retention", "2")
    (night3,) = third["specs"]
    assert code == 1 and third["passed"] is False
    assert night3["baseline"] == night2["run_id"]
    assert any("regressed" in failure for failure in third["failures"])
    # Retention 2: the first night is gone from every dataset, never half.
    assert night3["removed"] == [night["run_id"]]
    for dataset in ("runs", "items", "scores"):
        assert not (store / dataset / f"run_id={night['run_id']}").exists()
    assert set(Store(store).runs().collect()["run_id"]) == {night2["run_id"], night3["run_id"]}

    # A failed night is no baseline: the next night compares with night 2, the last good one.
    mock.reset()
    code, fourth = nightly(capsys, spec, store, "--retention", "5")
    assert fourth["specs"][0]["baseline"] == night2["run_id"]
    scores = Store(store).scores().filter(pl.col("run_id") == night["run_id"]).collect()
    assert scores.height == 0
