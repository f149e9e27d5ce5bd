"""The item page shows `items.tool_call_text` (the text a reply held beside its tool calls) above
the calls, as escaped text, and nothing of it when the reply held none — from a real run of an
`openai` target whose calls are the answer, on the scripted server."""

from __future__ import annotations

import json

import polars as pl
from markupsafe import escape

from assay.cli import main
from assay.store import Store
from tests.conftest import write_jsonl, write_spec
from tests.helpers.wire_payloads import OPENAI_MODEL, openai
from tests.view.conftest import SCRIPT, client

LOOKUP = {
    "name": "lookup",
    "description": "Look a word up.",
    "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
}
BESIDE = "Let me look that up " + SCRIPT


def test_the_text_beside_the_calls_shows_above_them_escaped(tmp_path, scripted):
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "lookup", "arguments": json.dumps({"word": "x"})},
    }
    scripted.script(openai({"content": BESIDE, "tool_calls": [call]}, "tool_calls"), when="q-beside")
    scripted.script(openai({"tool_calls": [{**call, "id": "call_2"}]}, "tool_calls"), when="q-bare")
    write_jsonl(
        tmp_path / "rows.jsonl",
        [{"id": "beside", "question": "q-beside"}, {"id": "bare", "question": "q-bare"}],
    )
    spec = write_spec(
        tmp_path,
        name="calls",
        dataset={"path": "rows.jsonl", "id": "id", "input": "question"},
        target={
            "kind": "openai",
            "base_url": scripted.base_url,
            "model": OPENAI_MODEL,
            "max_retries": 0,
            "prompt": "{question}",
            "tools": [LOOKUP],
        },
        scorers=[{"kind": "regex", "pattern": "."}],
    )
    store = tmp_path / "store"
    assert main(["run", str(spec), "--store", str(store), "-q"]) == 0
    run_id = Store(store).runs().collect()["run_id"][0]
    stored = Store(store).run_items(run_id).filter(pl.col("item_id") == "bare")["tool_call_text"]
    assert stored.to_list() == [None]

    with client(store) as http:
        beside = http.get(f"/runs/{run_id}/item", params={"id": "beside", "trial": "0"})
        bare = http.get(f"/runs/{run_id}/item", params={"id": "bare", "trial": "0"})
    assert beside.status_code == 200 and bare.status_code == 200
    shown = f'<pre class="text" id="tool-call-text">{escape(BESIDE)}</pre>'
    assert shown in beside.text and SCRIPT not in beside.text
    assert beside.text.index(shown) < beside.text.index("<h3>Tool calls</h3>")
    assert 'id="tool-call-text"' not in bare.text and "<h3>Tool calls</h3>" in bare.text
