"""`assay estimate` for a tool loop (issue 26 §9): up to `max_tool_rounds` + 1 calls an item at
most, and as many as a stored run of the same spec made (its items' `operations`) expected —
against a real tool-loop run on the scripted server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from assay.calls.accounting import PriceTable, Usage
from assay.cli import main
from tests.conftest import write_jsonl, write_spec
from tests.helpers.wire_payloads import OPENAI_MODEL, openai

TOOLS_MODULE = '''
def get_weather(city: str) -> str:
    """The weather in a city now."""
    return f"sunny in {city}"
'''


def _spec(folder: Path, base_url: str) -> Path:
    (folder / "est_tools.py").write_text(TOOLS_MODULE)
    rows = [{"id": "a", "question": "Weather in Paris?"}, {"id": "b", "question": "Say hello."}]
    write_jsonl(folder / "data.jsonl", rows)
    return write_spec(
        folder,
        name="loop",
        dataset={"path": "data.jsonl", "id": "id", "input": "question"},
        target={
            "kind": "openai",
            "model": OPENAI_MODEL,
            "base_url": base_url,
            "prompt": "{question}",
            "max_tokens": 50,
            "max_retries": 0,
            "tools": ["est_tools:get_weather"],
            "tool_loop": True,
            "max_tool_rounds": 3,
        },
        scorers=[{"kind": "regex", "pattern": "."}],
    )


def _estimate(spec: Path, store: Path, capsys: Any) -> dict[str, Any]:
    assert main(["estimate", str(spec), "--store", str(store), "--json"]) == 0
    (line,) = json.loads(capsys.readouterr().out)["lines"]
    return line


def test_a_tool_loop_says_its_most_calls_then_those_a_stored_run_made(tmp_path, scripted, capsys):
    spec, store = _spec(tmp_path, scripted.base_url), tmp_path / "store"
    before = _estimate(spec, store, capsys)
    # Nothing measured: one call an item expected, each up to max_tool_rounds + 1 = 4.
    assert (before["calls"], before["calls_max"]) == (2, 8)
    assert before["output_tokens_max"] == 8 * 50
    assert "tool loop: up to 4 calls an item (max_tool_rounds 3 + the answer)" in before["note"]
    assert "tools' results" in before["note"]

    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    scripted.script(openai({"tool_calls": [call]}, "tool_calls"), openai({"content": "Sunny."}), when="Paris")
    scripted.script(openai({"content": "Hello."}), when="hello")
    assert main(["run", str(spec), "--store", str(store), "--json"]) == 0
    capsys.readouterr()

    after = _estimate(spec, store, capsys)
    # Item a took two calls (a round of tools, then the answer), item b one: 3 for the two.
    assert (after["calls"], after["calls_max"]) == (3, 8)
    assert "1.5 calls an item in stored run" in after["note"]


def test_a_tool_loops_maximum_counts_every_call_and_the_replies_resent(tmp_path, capsys):
    spec = _spec(tmp_path, "http://127.0.0.1:9/v1")
    loop = _estimate(spec, tmp_path / "store", capsys)
    # Four calls an item, each resending the replies before it (0 + 1 + 2 + 3 of 50 tokens).
    most_in = 4 * loop["input_tokens"] + 2 * 50 * (0 + 1 + 2 + 3)
    prices = PriceTable.shipped(None)
    assert loop["cost_usd_max"] == prices.cost(
        OPENAI_MODEL, Usage(input_tokens=most_in, output_tokens=8 * 50)
    )
    assert loop["cost_usd_max"] > 4 * loop["cost_usd_expected"]
    # Without the tools' results that is no maximum of the spec: its total has none.
    assert loop["bounded"] is False
    assert main(["estimate", str(spec), "--store", str(tmp_path / "store"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["cost_usd_max"] is None and report["cost_usd_max_bounded"] is False


def test_the_terminal_table_shows_the_most_calls_beside_the_expected(tmp_path, capsys):
    spec = _spec(tmp_path, "http://127.0.0.1:9/v1")
    assert main(["estimate", str(spec), "--store", str(tmp_path / "store")]) == 0
    assert "2 (≤8)" in capsys.readouterr().out
