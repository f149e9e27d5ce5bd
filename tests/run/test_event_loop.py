"""The loop items run on where Assay owns it (assay/orchestrate/loop.py): uvloop on the terminal's
embedded path, the standard loop with `ASSAY_EVENT_LOOP=asyncio`, exit 2 naming the setting when
it names no loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.cli import main
from tests.helpers.cli import assay_json

# The target answers with the class of the loop it was called on.
_TARGET = """
import asyncio

async def which_loop(question):
    loop = asyncio.get_running_loop()
    return f"{type(loop).__module__}.{type(loop).__name__}"
"""


def _spec(folder: Path) -> Path:
    (folder / "which.py").write_text(_TARGET)
    (folder / "data.jsonl").write_text(json.dumps({"id": "a", "question": "?", "answer": "x"}) + "\n")
    spec = folder / "spec.yaml"
    spec.write_text(
        "name: which-loop\n"
        "dataset: {path: data.jsonl, id: id, input: question, expected: answer}\n"
        'target: {kind: python, function: "which:which_loop"}\n'
        "scorers: [{kind: exact_match, name: exact}]\n"
        "fail_on_item_error_rate: 1\n"
    )
    return spec


def _loop_of_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    import polars as pl

    store = tmp_path / "store"
    summary = assay_json(capsys, "run", _spec(tmp_path), "--store", store)
    assert summary["items"]["completed"] == 1, summary
    return pl.read_parquet(store / "items" / "**" / "*.parquet")["output_text"][0]


def test_the_embedded_path_runs_items_on_uvloop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ASSAY_EVENT_LOOP", raising=False)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    assert _loop_of_run(tmp_path, capsys) == "uvloop.Loop"


def test_assay_event_loop_asyncio_runs_them_on_the_standard_loop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_EVENT_LOOP", "asyncio")
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    assert _loop_of_run(tmp_path, capsys).startswith("asyncio.")


def test_an_unknown_loop_is_bad_input_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_EVENT_LOOP", "trio")
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    store = tmp_path / "store"
    assert main(["run", str(_spec(tmp_path)), "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert "ASSAY_EVENT_LOOP='trio' names no event loop" in err and "uvloop, asyncio" in err
    assert not store.exists()
