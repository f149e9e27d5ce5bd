"""Structured output (`response_format`), reasoning models (`max_completion_tokens`,
`reasoning_effort`, Anthropic `thinking`) and `params` on the chat targets (issue 26 §4, §5, §7),
through whole `assay run`s against the scripted server on uvicorn, which checks every request
against the SDK's create-params and every reply against its response types."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from assay.cli import main
from assay.run.identity import identity_of
from assay.spec import parse_spec
from assay.store import Store
from assay.testing.scripted import Reply, Stream
from tests.conftest import write_jsonl, write_spec
from tests.helpers.wire_payloads import (
    CLAUDE,
    OPENAI_MODEL,
    REFUSAL,
    anthropic,
    anthropic_stream_of,
    chunk,
    completion,
    message,
    openai,
    text,
    usage_chunk,
)

CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city", "population"],
    "additionalProperties": False,
}
FORMAT = {"type": "json_schema", "json_schema": {"name": "city", "schema": CITY, "strict": True}}
LOOSE = {"type": "json_schema", "json_schema": {"name": "city", "schema": CITY}}  # not strict
ROWS = [
    {"id": "good", "question": "q-good"},
    {"id": "bad", "question": "q-bad"},
    {"id": "refused", "question": "q-refused"},
]


def _target(provider: str, base_url: str, **fields: Any) -> dict[str, Any]:
    common = {"base_url": base_url, "prompt": "{question}", "max_retries": 0, **fields}
    if provider == "openai":
        return {"kind": "openai", "model": OPENAI_MODEL, **common}
    return {"kind": "anthropic", "model": CLAUDE, "max_tokens": 64, **common}


def _run(
    folder: Path, target: dict[str, Any], capsys, scorers: list[dict[str, Any]] | None = None
) -> tuple[str, Store]:
    write_jsonl(folder / "data.jsonl", ROWS)
    spec = write_spec(
        folder,
        name="io",
        dataset={"path": "data.jsonl", "id": "id", "input": "question"},
        target=target,
        scorers=scorers or [{"kind": "json_schema", "schema": CITY}],
        concurrency=2,
        fail_on_item_error_rate=1,
        fail_on_scorer_error_rate=1,  # its scorers fail on items without an expected answer
    )
    store = folder / "store"
    assert main(["run", str(spec), "--store", str(store), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["run_id"], Store(store)


def _items(store: Store, run_id: str) -> dict[str, dict[str, Any]]:
    return {row["item_id"]: row for row in store.run_items(run_id).iter_rows(named=True)}


# -- §4 structured output ------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_openai_json_schema_reply_is_parsed_scored_and_a_refusal_is_its_own_outcome(
    tmp_path, scripted, capsys, stream
):
    scripted.script(
        openai({"content": '{"city": "Paris", "population": 2100000}'}, stream=stream), when="q-good"
    )
    scripted.script(openai({"content": '{"city": "Paris"}'}, stream=stream), when="q-bad")
    scripted.script(openai({"refusal": REFUSAL}, stream=stream), when="q-refused")
    run_id, store = _run(
        tmp_path, _target("openai", scripted.base_url, stream=stream, response_format=FORMAT), capsys
    )

    _, body = scripted.requests[0]
    assert body["response_format"] == FORMAT
    items = _items(store, run_id)
    assert json.loads(items["good"]["output"]) == {"city": "Paris", "population": 2100000}
    assert (items["refused"]["outcome"], items["refused"]["failure_kind"]) == ("failed", "refusal")
    scores = dict(store.run_scores(run_id).select("item_id", "score").rows())
    assert scores == {"good": 1.0, "bad": 0.0}  # the refusal is not scored


def test_openai_json_object_mode_is_sent_as_such(tmp_path, scripted, capsys):
    for row in ROWS:
        scripted.script(openai({"content": '{"city": "Oslo", "population": 700000}'}), when=row["question"])
    run_id, store = _run(
        tmp_path, _target("openai", scripted.base_url, response_format={"type": "json_object"}), capsys
    )
    assert scripted.requests[0][1]["response_format"] == {"type": "json_object"}
    assert {row["outcome"] for row in _items(store, run_id).values()} == {"completed"}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_anthropic_json_schema_goes_through_a_forced_tool_whose_input_is_the_answer(
    tmp_path, scripted, capsys, stream
):
    def forced(data: dict[str, Any]) -> Reply | Stream:
        return anthropic(
            [{"type": "tool_use", "id": "toolu_9", "name": "city", "input": data}], "tool_use", stream=stream
        )

    scripted.script(forced({"city": "Paris", "population": 2100000}), when="q-good")
    scripted.script(forced({"city": "Paris"}), when="q-bad")
    scripted.script(anthropic(text("I can't"), "refusal", stream=stream), when="q-refused")
    run_id, store = _run(
        tmp_path, _target("anthropic", scripted.base_url, stream=stream, response_format=LOOSE), capsys
    )

    _, body = scripted.requests[0]
    assert "output_config" not in body
    assert body["tools"] == [
        {"name": "city", "description": "Give the answer as this tool's input.", "input_schema": CITY}
    ]
    assert body["tool_choice"] == {"type": "tool", "name": "city"}
    items = _items(store, run_id)
    assert json.loads(items["good"]["output"]) == {"city": "Paris", "population": 2100000}
    assert items["good"]["tool_calls"] is None  # the forced call is the object, not a tool call
    assert (items["refused"]["outcome"], items["refused"]["failure_kind"]) == ("failed", "refusal")
    assert dict(store.run_scores(run_id).select("item_id", "score").rows()) == {"good": 1.0, "bad": 0.0}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_strict_anthropic_schema_asks_for_the_native_structured_output(tmp_path, scripted, capsys, stream):
    """`strict: true` on anthropic is its native structured output, in the SDK's words
    (`output_config: {format: {type: json_schema, schema}}`, which the scripted server checks against
    `MessageCreateParams`): no forced tool, the reply's text the object; so thinking may go with it."""
    scripted.script(anthropic(text('{"city": "Paris", "population": 2100000}'), stream=stream), when="q-good")
    scripted.script(anthropic(text('{"city": "Paris"}'), stream=stream), when="q-bad")
    scripted.script(anthropic(text("I can't"), "refusal", stream=stream), when="q-refused")
    target = _target(
        "anthropic",
        scripted.base_url,
        stream=stream,
        response_format=FORMAT,
        max_tokens=2048,
        thinking={"budget_tokens": 1024},
    )
    run_id, store = _run(tmp_path, target, capsys)

    _, body = scripted.requests[0]
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": CITY}}
    assert "tools" not in body and "tool_choice" not in body
    items = _items(store, run_id)
    assert json.loads(items["good"]["output"]) == {"city": "Paris", "population": 2100000}
    assert (items["refused"]["outcome"], items["refused"]["failure_kind"]) == ("failed", "refusal")
    assert dict(store.run_scores(run_id).select("item_id", "score").rows()) == {"good": 1.0, "bad": 0.0}


# -- §5 reasoning models -------------------------------------------------------------------------


def _reasoning_reply(stream: bool) -> Reply | Stream:
    """A vLLM reasoning model's reply: its reasoning beside the content, its tokens in the usage."""
    if not stream:
        body = completion(
            {"content": "4", "reasoning_content": "2 and 2 make 4."},
            completion_tokens=30,
            completion_tokens_details={"reasoning_tokens": 25},
        )
        return Reply("openai", body)
    usage = {
        **usage_chunk(),
        "usage": {
            "prompt_tokens": 9,
            "completion_tokens": 30,
            "total_tokens": 39,
            "completion_tokens_details": {"reasoning_tokens": 25},
        },
    }
    return Stream(
        "openai",
        [
            chunk({"role": "assistant", "content": ""}),
            chunk({"reasoning_content": "2 and 2 "}),
            chunk({"reasoning_content": "make 4."}),
            chunk({"content": "4"}),
            chunk({}, "stop"),
            usage,
            "[DONE]",
        ],
    )


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_openai_reasoning_fields_are_sent_and_the_reasoning_kept_apart_from_the_output(
    tmp_path, scripted, capsys, stream
):
    for row in ROWS:
        scripted.script(_reasoning_reply(stream), when=row["question"])
    target = _target(
        "openai",
        scripted.base_url,
        stream=stream,
        model="o3-2025-04-16",
        max_completion_tokens=256,
        reasoning_effort="low",
    )
    run_id, store = _run(tmp_path, target, capsys, scorers=[{"kind": "exact_match", "name": "exact"}])
    _, body = scripted.requests[0]
    assert (body["max_completion_tokens"], body["reasoning_effort"]) == (256, "low")
    assert "max_tokens" not in body and "temperature" not in body
    item = _items(store, run_id)["good"]
    assert item["output_text"] == "4"
    assert item["reasoning"] == "2 and 2 make 4."
    assert (item["tokens_output"], item["tokens_reasoning"]) == (30, 25)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_anthropic_thinking_is_sent_and_its_text_kept_apart(tmp_path, scripted, capsys, stream):
    blocks = [{"type": "thinking", "thinking": "Two and two.", "signature": "sig"}, *text("4")]
    for row in ROWS:
        if stream:
            events = anthropic_stream_of(text("4"), "end_turn")
            # The thinking block first: its deltas, then the text block (renumbered).
            thinking = [
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                },
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "thinking_delta", "thinking": "Two and two."},
                },
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "signature_delta", "signature": "sig"},
                },
                {"type": "content_block_stop", "index": 0},
            ]
            for event in events:
                if "index" in event:
                    event["index"] += 1
            reply: Reply | Stream = Stream("anthropic", [*events[:2], *thinking, *events[2:]])
        else:
            reply = Reply("anthropic", message(blocks))
        scripted.script(reply, when=row["question"])
    target = _target(
        "anthropic", scripted.base_url, stream=stream, max_tokens=2048, thinking={"budget_tokens": 1024}
    )
    run_id, store = _run(tmp_path, target, capsys, scorers=[{"kind": "exact_match", "name": "exact"}])
    _, body = scripted.requests[0]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    item = _items(store, run_id)["good"]
    assert (item["output_text"], item["reasoning"]) == ("4", "Two and two.")


@pytest.mark.parametrize(
    ("target", "said"),
    [
        (
            {"kind": "openai", "model": "o3-2025-04-16", "temperature": 0.2},
            r"reasoning model: it refuses a temperature",
        ),
        (
            {"kind": "openai", "model": "gpt-5-mini-2025-08-07", "max_tokens": 64},
            r"refuses max_tokens; use max_completion_tokens",
        ),
        (
            {"kind": "openai", "model": "m", "max_tokens": 6, "max_completion_tokens": 6},
            r"give one of max_tokens and max_completion_tokens",
        ),
        ({"kind": "openai", "model": "m", "reasoning_effort": "extreme"}, r"target\.reasoning_effort"),
        (
            {"kind": "anthropic", "model": CLAUDE, "max_tokens": 2000, "thinking": {"budget_tokens": 512}},
            r"target\.thinking\.budget_tokens",
        ),
        (
            {"kind": "anthropic", "model": CLAUDE, "max_tokens": 1024, "thinking": {"budget_tokens": 1024}},
            r"max_tokens above its budget_tokens \(1024\)",
        ),
        (
            {
                "kind": "anthropic",
                "model": CLAUDE,
                "max_tokens": 4000,
                "temperature": 0.5,
                "thinking": {"budget_tokens": 1024},
            },
            r"thinking refuses a temperature",
        ),
        (
            {
                "kind": "anthropic",
                "model": CLAUDE,
                "max_tokens": 4000,
                "thinking": {"budget_tokens": 1024},
                "response_format": LOOSE,
            },
            r"thinking refuses a forced tool call .*`strict: true` asks for the native structured output",
        ),
        (
            {
                "kind": "anthropic",
                "model": CLAUDE,
                "max_tokens": 64,
                "response_format": {"type": "json_object"},
            },
            r"no JSON mode",
        ),
        (
            {"kind": "openai", "model": "m", "response_format": {"type": "json_schema"}},
            r"`json_schema:` goes with `type: json_schema`",
        ),
        (
            {"kind": "openai", "model": "m", "params": {"temperature": 0}},
            r"params\.temperature: Assay sets this field; use the target's `temperature`",
        ),
        ({"kind": "openai", "model": "m", "params": {"seed": 1}}, r"params\.seed: .*top-level `seed`"),
        (
            {"kind": "anthropic", "model": CLAUDE, "max_tokens": 64, "params": {"thinking": {}}},
            r"params\.thinking: .*`thinking`",
        ),
    ],
)
def test_what_a_provider_would_refuse_is_a_spec_error_naming_the_field(tmp_path, capsys, target, said):
    write_jsonl(tmp_path / "data.jsonl", ROWS)
    spec = write_spec(
        tmp_path,
        name="bad",
        dataset={"path": "data.jsonl", "input": "question"},
        target={"base_url": "http://127.0.0.1:9/v1", **target},
        scorers=[{"kind": "exact_match"}],
    )
    assert main(["run", str(spec), "--store", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err
    assert re.search(said, err), err
    assert not (tmp_path / "store").exists()


# -- §7 params -----------------------------------------------------------------------------------


def test_params_reach_the_body_as_given_and_are_part_of_the_identity(tmp_path, scripted, capsys):
    params = {
        "top_k": 20,
        "min_p": 0.05,
        "chat_template_kwargs": {"enable_thinking": False},
        "provider": {"order": ["a"]},
    }
    scripted.extra_body = frozenset(params)
    for row in ROWS:
        scripted.script(openai({"content": "ok"}), when=row["question"])
    _run(
        tmp_path,
        _target("openai", scripted.base_url, params=params),
        capsys,
        scorers=[{"kind": "exact_match"}],
    )
    _, body = scripted.requests[0]
    assert {key: body[key] for key in params} == params

    def digest(**fields: Any) -> str:
        spec = parse_spec(
            {
                "name": "p",
                "dataset": {"path": "d.jsonl"},
                "target": {"kind": "openai", "base_url": "http://h/v1", "model": "m", **fields},
                "scorers": [{"kind": "exact_match"}],
            }
        )
        return identity_of(spec, [], Path(".")).digest

    assert digest(params={"top_k": 20}) != digest(params={"top_k": 40}) != digest()
    assert digest(response_format={"type": "json_object"}) != digest()
    assert digest(reasoning_effort="low") != digest()
