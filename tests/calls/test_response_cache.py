"""The opt-in response cache: a repeated request is answered from the store, free, across runs."""

from __future__ import annotations

import polars as pl

from assay.cli import main
from assay.store import Store
from tests.conftest import mock_target, openai_spec
from tests.helpers.cli import assay_json

PRICES = {"mock-1": {"input": 10.0, "output": 30.0}}


def test_a_second_run_is_served_from_the_cache_for_free(tmp_path, mock, capsys):
    spec = openai_spec(
        tmp_path,
        mock.base_url,
        n=5,
        prices=PRICES,
        target=mock_target(mock.base_url, cache=True, temperature=0),
    )
    first = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    assert mock.stats()["requests"] == 5
    second = assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    assert mock.stats()["requests"] == 5, "every call of the second run was a cache hit"

    store = Store(tmp_path / "s")
    items = store.run_items(second["run_id"])
    assert items["operations_cached"].to_list() == [1] * 5
    assert items["cost_usd"].to_list() == [0.0] * 5 and set(items["cost_completeness"]) == {"complete"}
    before = store.run_items(first["run_id"]).sort("item_id")
    assert items.sort("item_id")["output"].to_list() == before["output"].to_list()
    assert first["cost"]["usd"] > 0 and second["cost"]["usd"] == 0

    # Another prompt is another request: a miss.
    spec.write_text(
        spec.read_text()
        .replace('prompt: "{question}"', 'prompt: "Q: {question}"')
        .replace("prompt: '{question}'", "prompt: 'Q: {question}'")
    )
    assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    assert mock.stats()["requests"] == 10


def test_cache_true_needs_temperature_zero(tmp_path, mock, capsys):
    spec = openai_spec(
        tmp_path, mock.base_url, n=2, target=mock_target(mock.base_url, cache=True, temperature=0.7)
    )
    assert main(["run", str(spec), "--store", str(tmp_path / "s")]) == 2
    assert "cache: true needs temperature: 0" in capsys.readouterr().err
    spec = openai_spec(
        tmp_path, mock.base_url, n=2, target=mock_target(mock.base_url, cache="always", temperature=0.7)
    )
    assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    assert mock.stats()["requests"] == 2


def test_without_cache_nothing_is_cached(tmp_path, mock, capsys):
    spec = openai_spec(tmp_path, mock.base_url, n=3)
    assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    assay_json(capsys, "run", spec, "--store", tmp_path / "s")
    assert mock.stats()["requests"] == 6
    assert not (tmp_path / "s" / "cache").exists()
    items = Store(tmp_path / "s").items().collect()
    assert items.filter(pl.col("operations_cached") > 0).height == 0
