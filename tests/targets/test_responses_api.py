"""OpenAI's Responses API (issue 26 §6): `api: responses` on the `openai` target, through whole
`assay run`s against the scripted server on uvicorn, which checks every request against the SDK's
`ResponseCreateParams` and every reply and stream event against `Response` / `ResponseStreamEvent`.
The same spec fields in the Responses API's words; a reply's output items read back (text, tool
calls, reasoning, a refusal); an incomplete reply a `length` failure; usage with its cached and
reasoning tokens priced."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.cli import main
from assay.run.identity import identity_of
from assay.spec import parse_spec
from assay.store import Store
from assay.testing.scripted import ScriptedServer, Stream
from tests.conftest import write_jsonl, write_spec
from tests.helpers.wire_payloads import (
    REFUSAL,
    RESPONSES_MODEL,
    function_call,
    output_message,
    reasoning_item,
    response,
    responses,
    responses_stream_of,
)
from tests.run.test_sessions import THREE_PROMPTS, write_policy

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
# USD per million tokens: the cached and reasoning tokens priced as OpenAI prices them.
PRICES = {RESPONSES_MODEL: {"input": 1.0, "output": 4.0, "cached_input": 0.25}}


@pytest.fixture(scope="module")
def scripted_server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


@pytest.fixture
def scripted(scripted_server: ScriptedServer) -> Iterator[ScriptedServer]:
    """The scripted server, reset; every request Assay sent it passed the SDK's types."""
    scripted_server.reset()
    yield scripted_server
    assert scripted_server.problems == []


def _target(base_url: str, **fields: Any) -> dict[str, Any]:
    return {
        "kind": "openai",
        "api": "responses",
        "base_url": base_url,
        "model": RESPONSES_MODEL,
        "prompt": "{question}",
        "max_retries": 0,
        **fields,
    }


def _run(
    folder: Path, rows: list[dict[str, Any]], target: dict[str, Any], capsys, **spec: Any
) -> tuple[str, Store]:
    write_jsonl(folder / "data.jsonl", rows)
    path = write_spec(
        folder,
        name="responses",
        dataset={"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        target=target,
        scorers=spec.pop("scorers", [{"kind": "exact_match", "name": "exact"}]),
        concurrency=2,
        fail_on_item_error_rate=1,
        prices=PRICES,
        **spec,
    )
    store = folder / "store"
    assert main(["run", str(path), "--store", str(store), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["run_id"], Store(store)


def _items(store: Store, run_id: str) -> dict[str, dict[str, Any]]:
    return {row["item_id"]: row for row in store.run_items(run_id).iter_rows(named=True)}


def _bodies(server: ScriptedServer) -> dict[str, dict[str, Any]]:
    """The requests received, by the question their input asks."""
    found = {}
    for path, body in server.requests:
        assert path == "/v1/responses"
        found[body["input"][-1]["content"]] = body
    return found


def _reply(answer: Any, stream: bool):
    return responses(answer, stream=stream)


ROWS = [
    {"id": "sum", "question": "q-sum", "answer": "4"},
    {"id": "cut", "question": "q-cut", "answer": "4"},
    {"id": "refused", "question": "q-refused", "answer": "4"},
]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_reasoning_models_run_on_the_responses_api(tmp_path, scripted, capsys, stream):
    """The prompt as `input`, the system prompt as `instructions`, the reasoning settings in
    this API's words; the answer read from the message item, the reasoning summary kept apart,
    the usage's cached and reasoning tokens stored and priced; an incomplete reply is a `length`
    failure and a refusal a `refusal`, neither scored."""
    scripted.script(
        _reply(
            response(
                [reasoning_item("2 and 2 make 4."), output_message("4")], cached=20, reasoning_tokens=64
            ),
            stream,
        ),
        when="q-sum",
    )
    cut = response([reasoning_item("Counting...")], "incomplete", incomplete="max_output_tokens")
    scripted.script(_reply(cut, stream), when="q-cut")
    scripted.script(_reply(response([output_message(refusal=REFUSAL)]), stream), when="q-refused")
    target = _target(
        scripted.base_url,
        system="Answer with a number.",
        max_completion_tokens=256,
        reasoning_effort="low",
        stream=stream,
    )
    run_id, store = _run(tmp_path, ROWS, target, capsys)

    body = _bodies(scripted)["q-sum"]
    assert body["input"] == [{"role": "user", "content": "q-sum"}]
    assert body["instructions"] == "Answer with a number."
    assert (body["max_output_tokens"], body["reasoning"], body["store"]) == (256, {"effort": "low"}, False)
    # Neither chat completions' words nor a `seed`, which this API does not take.
    assert not {"messages", "max_completion_tokens", "reasoning_effort", "seed"} & set(body)
    assert body.get("stream", False) is stream

    items = _items(store, run_id)
    done = items["sum"]
    assert (done["outcome"], done["output_text"], done["reasoning"]) == ("completed", "4", "2 and 2 make 4.")
    assert (done["tokens_input"], done["tokens_cached"], done["tokens_output"], done["tokens_reasoning"]) == (
        36,
        20,
        87,
        64,
    )
    # 16 uncached and 20 cached input tokens, 87 output (the 64 of reasoning among them).
    assert done["cost_usd"] == pytest.approx((16 * 1.0 + 20 * 0.25 + 87 * 4.0) / 1e6)
    assert (done["first_token_ms"] is not None) is stream
    assert (items["cut"]["outcome"], items["cut"]["failure_kind"]) == ("failed", "length")
    assert items["cut"]["finish_reason_raw"] == "max_output_tokens"
    assert (items["refused"]["outcome"], items["refused"]["failure_kind"]) == ("failed", "refusal")
    scores = dict(store.run_scores(run_id).select("item_id", "score").rows())
    assert scores == {"sum": 1.0}


LOOKUP = {
    "name": "lookup",
    "description": "Look a word up in the dictionary.",
    "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
}
TOOL_ROWS = [
    {"id": "call", "question": "q-call", "answer": "lookup"},
    {"id": "words", "question": "q-words", "answer": "-"},
]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_function_call_item_is_the_answer(tmp_path, scripted, capsys, stream):
    """Tools in this API's shape (`{type: function, name, parameters, strict}`, strict false
    unless asked), a named tool choice as `{type: function, name}`; a `function_call` item is the
    item's answer, named by its `call_id`."""
    scripted.script(
        _reply(response([function_call("call_7", "lookup", {"word": "eval"})]), stream), when="q-call"
    )
    scripted.script(_reply(response([output_message("no tool needed")]), stream), when="q-words")
    target = _target(
        scripted.base_url,
        tools=[LOOKUP, {**LOOKUP, "name": "define", "strict": True}],
        tool_choice="required",
        parallel_tool_calls=False,
        stream=stream,
    )
    run_id, store = _run(tmp_path, TOOL_ROWS, target, capsys)

    body = _bodies(scripted)["q-call"]
    assert body["tools"] == [
        {"type": "function", **LOOKUP, "strict": False},
        {"type": "function", **LOOKUP, "name": "define", "strict": True},
    ]
    assert (body["tool_choice"], body["parallel_tool_calls"]) == ("required", False)
    items = _items(store, run_id)
    assert items["call"]["outcome"] == "completed"
    assert items["call"]["tool_calls"] == [
        {"id": "call_7", "name": "lookup", "arguments": '{"word": "eval"}'}
    ]
    assert items["words"]["tool_calls"] is None
    assert json.loads(items["words"]["output"]) == "no tool needed"


def test_a_named_tool_choice_and_structured_output_in_this_apis_words(tmp_path, scripted, capsys):
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    rows = [{"id": "a", "question": "q-a", "answer": "-"}]
    scripted.script(responses(response([output_message('{"city": "Paris"}')])))
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "city", "schema": schema, "strict": True},
    }
    run_id, store = _run(
        tmp_path,
        rows,
        _target(scripted.base_url, response_format=response_format),
        capsys,
        scorers=[{"kind": "json_schema", "schema": schema}],
    )
    ((_, body),) = scripted.requests
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "city", "schema": schema, "strict": True}
    }
    assert json.loads(_items(store, run_id)["a"]["output"]) == {"city": "Paris"}
    assert store.run_scores(run_id)["score"].to_list() == [1.0]

    scripted.reset()
    scripted.script(responses(response([function_call("call_1", "lookup", {"word": "x"})])))
    (tmp_path / "named").mkdir()
    _run(
        tmp_path / "named",
        rows,
        _target(scripted.base_url, tools=[LOOKUP], tool_choice={"name": "lookup"}),
        capsys,
    )
    ((_, body),) = scripted.requests
    assert body["tool_choice"] == {"type": "function", "name": "lookup"}


def test_a_conversation_with_an_image_is_sent_as_input_items(tmp_path, scripted, capsys):
    """`messages` turns as input messages, an image as an `input_image` part (a data URL), and
    the captured request keeps its hash and size, not its bytes."""
    (tmp_path / "dot.png").write_bytes(PNG)
    rows = [{"id": "a", "question": "What colour is it?", "answer": "red", "image": "dot.png"}]
    messages = [
        {"role": "system", "content": "You see pictures."},
        {"role": "user", "content": "Example: a blue square"},
        {"role": "assistant", "content": "blue"},
        {
            "role": "user",
            "content": [{"type": "image", "path": "{image}"}, {"type": "text", "text": "{question}"}],
        },
    ]
    scripted.script(responses(response([output_message("red")])))
    target = _target(scripted.base_url, messages=messages)
    del target["prompt"]
    run_id, store = _run(tmp_path, rows, target, capsys, capture_requests=True)
    ((_, body),) = scripted.requests
    encoded = base64.b64encode(PNG).decode()
    assert body["input"] == [
        {"role": "system", "content": "You see pictures."},
        {"role": "user", "content": "Example: a blue square"},
        {"role": "assistant", "content": "blue"},
        {
            "role": "user",
            "content": [
                {"type": "input_image", "image_url": f"data:image/png;base64,{encoded}", "detail": "auto"},
                {"type": "input_text", "text": "What colour is it?"},
            ],
        },
    ]
    assert _items(store, run_id)["a"]["output_text"] == "red"
    captured = store.run_requests(run_id).filter(phase="start")["request"][0]
    assert encoded not in captured and "sha256:" in captured


@pytest.mark.parametrize(
    ("events", "said", "retried"),
    [
        (
            lambda whole: [
                *responses_stream_of(whole)[:-1],
                {
                    "type": "response.failed",
                    "response": {
                        **whole,
                        "status": "failed",
                        "error": {"code": "server_error", "message": "boom"},
                    },
                    "sequence_number": 99,
                },
            ],
            "the response failed: server_error: boom",
            True,
        ),
        (
            lambda whole: [
                responses_stream_of(whole)[0],
                {
                    "type": "error",
                    "code": "invalid_prompt",
                    "message": "no",
                    "param": None,
                    "sequence_number": 1,
                },
            ],
            "stream error: invalid_prompt: no",
            False,
        ),
    ],
    ids=["response.failed", "error"],
)
def test_a_stream_that_fails_is_an_http_failure_retried_when_transient(
    tmp_path, scripted, capsys, events, said, retried
):
    whole = response([output_message("4")])
    scripted.script(Stream("responses", events(whole)))
    scripted.script(responses(whole, stream=True))
    rows = [{"id": "a", "question": "q-a", "answer": "4"}]
    run_id, store = _run(tmp_path, rows, _target(scripted.base_url, stream=True, max_retries=1), capsys)
    item = _items(store, run_id)["a"]
    if retried:
        assert (item["outcome"], item["output_text"], item["retries"]) == ("completed", "4", 1)
    else:
        assert (item["outcome"], item["failure_kind"]) == ("failed", "http")
        assert said in item["error"]
        assert len(scripted.requests) == 1


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        (
            {"params": {"instructions": "x"}},
            r"params\.instructions: Assay sets this field; use the target's `system`",
        ),
        ({"params": {"text": {}}}, r"params\.text: .*`response_format`"),
        ({"api": "completions"}, r"target\.api"),
    ],
)
def test_what_the_responses_api_cannot_take_is_a_spec_error_naming_the_field(tmp_path, capsys, fields, said):
    write_jsonl(tmp_path / "data.jsonl", ROWS)
    spec = write_spec(
        tmp_path,
        name="bad",
        dataset={"path": "data.jsonl", "input": "question"},
        target=_target("http://127.0.0.1:9/v1", **fields),
        scorers=[{"kind": "exact_match"}],
    )
    assert main(["run", str(spec), "--store", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err
    assert re.search(said, err), err
    assert not (tmp_path / "store").exists()


def test_the_api_is_part_of_the_identity_only_when_it_is_not_the_default():
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

    assert digest(api="chat_completions") == digest()
    assert digest(api="responses") != digest()


def test_a_session_sends_the_conversation_so_far_as_input_items(tmp_path, scripted, capsys):
    """A policy's turns: each request's `input` holds every earlier prompt and answer."""
    for said in ("4", "yes", "4"):
        scripted.script(responses(response([output_message(said)])))
    rows = [{"id": "a", "question": "2 + 2", "answer": "4"}]
    _run(tmp_path, rows, _target(scripted.base_url), capsys, policy=write_policy(tmp_path, THREE_PROMPTS))
    sent = [body["input"] for _, body in scripted.requests]
    assert sent[0] == [{"role": "user", "content": "2 + 2"}]
    assert sent[2] == [
        {"role": "user", "content": "2 + 2"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "Are you sure?"},
        {"role": "assistant", "content": "yes"},
        {"role": "user", "content": "Final answer?"},
    ]


# -- batch mode ---------------------------------------------------------------------------------


def test_batch_mode_sends_responses_requests_through_openais_batch_api(tmp_path, mock, scripted, capsys):
    """The batch's endpoint and every line's url are `/v1/responses` (a value of the SDK's
    `BatchCreateParams.endpoint`); the mock's batch workers answer them at the scripted server,
    which checks each body against `ResponseCreateParams` and each reply against `Response`."""
    from openai.types.batch_create_params import BatchCreateParams
    from pydantic import TypeAdapter

    from assay.calls.batch_apis import BATCH_APIS

    url = BATCH_APIS[("openai", "/responses")].url  # type: ignore[attr-defined]
    TypeAdapter(BatchCreateParams).validate_python(
        {"input_file_id": "file-1", "endpoint": url, "completion_window": "24h"}
    )
    rows = [
        {"id": name, "question": f"q-{name}", "answer": answer} for name, answer in (("a", "4"), ("b", "9"))
    ]
    for row in rows:
        scripted.script(responses(response([output_message(row["answer"])])), when=row["question"])
    mock.configure(batch_upstream=scripted.base_url.removesuffix("/v1"), batch_delay_ms=100)
    batch = {"max_requests": 2, "max_wait_s": 0.2, "poll_s": 0.05}
    target = _target(mock.base_url, batch=batch, max_completion_tokens=64)
    run_id, store = _run(tmp_path, rows, target, capsys)
    items = _items(store, run_id)
    assert [(items[k]["outcome"], items[k]["output_text"]) for k in "ab"] == [
        ("completed", "4"),
        ("completed", "9"),
    ]
    assert sum(items[k]["operations_batched"] for k in "ab") == 2
    assert mock.batch_stats()["batch_submissions"] == 1
    bodies = _bodies(scripted)  # every request at /v1/responses
    assert sorted(bodies) == ["q-a", "q-b"] and all(b["max_output_tokens"] == 64 for b in bodies.values())
    assert store.run_batches(run_id)["provider"].str.starts_with("openai:").all()
