"""The report's item browser shows issue 26's model I/O: an item's conversation as turns (its
images named by path, size and sha256, a thumbnail while the file is there), the tool calls that
were its answer as structured blocks (with the text the reply held beside them), and the reasoning folded — every string of them inert.

One real run of an `openai` target with `messages:` (a system turn, the item's own turns, an image
and a question) and a tool, against the scripted server on uvicorn (which checks every request and
reply against the SDK's types); the report is read as HTML and opened in headless Chromium."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from assay.cli import main
from assay.store import Store
from assay.testing.scripted import Reply, ScriptedServer
from tests.analysis.test_estimate_model_io import png
from tests.conftest import write_jsonl, write_spec
from tests.helpers.wire_payloads import OPENAI_MODEL, completion, openai
from tests.report.test_report import Opened, browser, report  # noqa: F401  (browser is a fixture)
from tests.report.test_report_escaping import hostile

LOOKUP = {
    "name": "lookup",
    "description": "Look a word up.",
    "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
}
CALL_WORD = hostile("arguments")
REASONING = hostile("reasoning")
HISTORY = hostile("turn")
BESIDE = hostile("beside")


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Iterator[dict[str, object]]:
    folder = tmp_path_factory.mktemp("model_io")
    (folder / "images").mkdir()
    (folder / "images" / "kept.png").write_bytes(png(40, 30))
    (folder / "images" / "gone.png").write_bytes(png(20, 20))
    history = [{"role": "user", "content": HISTORY}, {"role": "assistant", "content": "noted"}]
    rows = [
        {"id": "calls", "image": "kept.png", "question": "q-calls", "history": history},
        {"id": "thinks", "image": "gone.png", "question": "q-thinks", "history": history},
    ]
    write_jsonl(folder / "rows.jsonl", rows)
    with ScriptedServer() as server:
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"word": CALL_WORD})},
        }
        server.script(openai({"content": BESIDE, "tool_calls": [call]}, "tool_calls"), when="q-calls")
        server.script(
            Reply(
                "openai",
                completion(
                    {"content": "an answer", "reasoning_content": REASONING},
                    completion_tokens=30,
                    completion_tokens_details={"reasoning_tokens": 25},
                ),
            ),
            when="q-thinks",
        )
        spec = write_spec(
            folder,
            name="model-io",
            dataset={"path": "rows.jsonl", "id": "id", "input": "question"},
            target={
                "kind": "openai",
                "base_url": server.base_url,
                "model": OPENAI_MODEL,
                "max_retries": 0,
                "tools": [LOOKUP],
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"field": "history"},
                    {
                        "role": "user",
                        "content": [
                            {"type": "image", "path": "images/{image}"},
                            {"type": "text", "text": "{question}"},
                        ],
                    },
                ],
            },
            scorers=[{"kind": "regex", "pattern": "."}],
        )
        assert main(["run", str(spec), "--store", str(folder / "store"), "-q"]) == 0
        assert server.problems == []
    (folder / "images" / "gone.png").unlink()  # gone by the time the report is made
    run_id = Store(folder / "store").runs().collect()["run_id"][0]
    yield {"store": str(folder / "store"), "run": run_id, "folder": folder}


def _payload(source: str) -> dict:
    found = re.search(r'<script type="application/json" id="items-data">(.*?)</script>', source, re.DOTALL)
    assert found
    return json.loads(found.group(1))


def test_the_rows_carry_turns_tool_calls_reasoning_and_images(run, capsys, tmp_path):
    path = report(capsys, str(run["run"]), "--store", str(run["store"]), "--out", str(tmp_path / "r.html"))
    rows = {row["id"]: row for row in _payload(path.read_text())["rows"]}
    calls, thinks = rows["calls"], rows["thinks"]
    assert [turn["role"] for turn in calls["turns"]] == ["system", "user", "assistant", "user"]
    assert calls["turns"][1]["parts"] == [{"type": "text", "text": HISTORY}]
    image, question = calls["turns"][3]["parts"]
    kept = (run["folder"] / "images" / "kept.png").read_bytes()
    assert image["path"].endswith("images/kept.png") and image["bytes"] == len(kept)
    assert image["size"] == "40×30" and len(image["sha256"]) == 64
    assert image["thumbnail"].startswith("data:image/png;base64,")
    assert question == {"type": "text", "text": "q-calls"}
    assert calls["tool_calls"] == [
        {
            "name": "lookup",
            "id": "call_1",
            "arguments": json.dumps({"word": CALL_WORD}, indent=2, ensure_ascii=False),
        }
    ]
    assert calls["tool_call_text"] == BESIDE
    assert calls["reasoning"] is None
    assert thinks["reasoning"] == REASONING and thinks["tool_calls"] is None
    assert thinks["tool_call_text"] is None
    gone = thinks["turns"][3]["parts"][0]
    assert gone["path"].endswith("images/gone.png") and "thumbnail" not in gone and "missing" in gone


def test_a_plain_prompts_rows_carry_none(tmp_path, capsys, mock):
    from tests.conftest import openai_spec

    spec = openai_spec(tmp_path, mock.base_url, n=2)
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "-q"]) == 0
    run_id = Store(tmp_path / "s").runs().collect()["run_id"][0]
    path = report(capsys, run_id, "--store", str(tmp_path / "s"), "--out", str(tmp_path / "r.html"))
    for row in _payload(path.read_text())["rows"]:
        assert row["turns"] is None and row["tool_calls"] is None and row["reasoning"] is None
        assert row["tool_call_text"] is None


def test_a_conversation_runs_stored_spec_reads_back_for_a_rescore(run):
    """The stored spec holds the default `prompt` beside `messages`: it is the spec it was."""
    scorer = json.dumps({"kind": "regex", "name": "again", "pattern": "."})
    assert main(["rescore", str(run["run"]), "--store", str(run["store"]), "--scorer", scorer, "-q"]) == 0


@pytest.mark.browser
def test_turns_calls_reasoning_and_thumbnails_in_chromium(run, browser, capsys, tmp_path):  # noqa: F811
    path = report(capsys, str(run["run"]), "--store", str(run["store"]), "--out", str(tmp_path / "r.html"))
    source = path.read_text()
    for said in (CALL_WORD, REASONING, HISTORY, BESIDE):
        assert said not in source, "a string of the conversation is written into the file unescaped"
    opened = Opened(browser, path)
    page = opened.page
    try:
        calls = page.locator("#items tbody tr", has_text="call_1")
        assert calls.locator(".turn").count() == 4
        assert calls.locator(".turn .role").all_text_contents() == ["system", "user", "assistant", "user"]
        assert calls.locator(".turn.role-user .part").first.text_content() == HISTORY
        assert calls.locator(".calls .said").text_content() == BESIDE, "the text beside the calls"
        assert calls.locator(".tool-call code.name").text_content() == "lookup"
        assert json.loads(calls.locator(".tool-call pre.arguments").text_content()) == {"word": CALL_WORD}
        thumb = calls.locator("figure.media img.thumb")
        assert thumb.count() == 1
        page.wait_for_function("img => img.complete && img.naturalWidth === 40", arg=thumb.element_handle())
        assert "40×30" in calls.locator("figure.media figcaption").text_content()

        thinks = page.locator("#items tbody tr", has_text="an answer")
        details = thinks.locator("details.reasoning")
        assert details.count() == 1 and details.get_attribute("open") is None, "the reasoning is folded"
        assert not thinks.locator("details.reasoning .part").is_visible()
        details.locator("summary").click()
        assert thinks.locator("details.reasoning .part").text_content() == REASONING
        gone = thinks.locator("figure.media")
        assert gone.locator("img").count() == 0 and "not readable now" in gone.text_content()

        page.fill("#f-search", "lookup")
        page.wait_for_timeout(100)
        assert opened.visible_rows() == 1
        page.fill("#f-search", 'alert("beside")')
        page.wait_for_timeout(100)
        assert opened.visible_rows() == 1
        assert opened.dialogs == [], "a string of the conversation ran as script"
        assert opened.errors == [] and opened.requests == [] and opened.aborted == []
        injected = page.evaluate(
            "document.querySelectorAll('#items svg, #items script, #items img:not(.thumb)').length"
        )
        assert injected == 0
    finally:
        opened.close()
