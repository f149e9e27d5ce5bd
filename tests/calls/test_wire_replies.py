"""What a reply can hold, OpenAI and Anthropic, streamed and not, against the scripted server on
uvicorn (`assay.testing.scripted`: every reply it sends and every request Assay sends checked
against the official SDKs' types): tool calls, refusals and length cuts are failures of their own
kind, never an empty answer scored; stream error events, empty streams, usage nulls, request ids
of broken streams and JSON replies to streamed requests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from assay.calls.accounting import Usage
from assay.cli import main
from assay.errors import TargetFailure
from assay.store import Store
from assay.testing.scripted import Reply, ScriptedServer, Stream
from tests.conftest import write_jsonl, write_spec
from tests.helpers.cli import assay_run
from tests.helpers.wire_payloads import (
    CLAUDE,
    OPENAI_MODEL,
    REFUSAL,
    TOOL_CALL,
    TOOL_USE,
    anthropic,
    anthropic_stream_of,
    chunk,
    completion,
    message,
    openai,
    text,
)
from tests.targets import test_anthropic, test_openai_target

# -- a reply that is no answer, end to end ------------------------------------------------------

# Each item's question names the reply it gets. The tool call's expected answer is "None": a null
# output once scored 1 against it (`str(None)`).
ROWS = [
    {"id": "tool", "question": "q-tool", "answer": "None"},
    {"id": "refusal", "question": "q-refusal", "answer": "x"},
    {"id": "cut", "question": "q-cut", "answer": "one two three"},
    {"id": "answer", "question": "q-answer", "answer": "42"},
]


def _script_non_answers(server: ScriptedServer, provider: str, stream: bool) -> None:
    if provider == "openai":
        replies = {
            "q-tool": openai({"tool_calls": [TOOL_CALL]}, "tool_calls", stream=stream),
            "q-refusal": openai({"refusal": REFUSAL}, "stop", stream=stream),
            "q-cut": openai({"content": "one two"}, "length", stream=stream),
            "q-answer": openai({"content": "42"}, stream=stream),
        }
    else:
        replies = {
            "q-tool": anthropic([TOOL_USE], "tool_use", stream=stream),
            "q-refusal": anthropic(text("I can't"), "refusal", stream=stream),
            "q-cut": anthropic(text("one two"), "max_tokens", stream=stream),
            "q-answer": anthropic(text("42"), stream=stream),
        }
    for question, reply in replies.items():
        server.script(reply, when=question)


def _target(provider: str, base_url: str, stream: bool) -> dict[str, Any]:
    common = {"base_url": base_url, "prompt": "{question}", "stream": stream, "max_retries": 0}
    if provider == "openai":
        return {"kind": "openai", "model": OPENAI_MODEL, **common}
    return {"kind": "anthropic", "model": CLAUDE, "max_tokens": 64, **common}


def _run(folder: Path, target: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> tuple[dict, Store]:
    write_jsonl(folder / "data.jsonl", ROWS)
    spec = write_spec(
        folder,
        name="replies",
        dataset={"path": "data.jsonl", "id": "id", "input": "question", "expected": "answer"},
        target=target,
        scorers=[{"kind": "exact_match", "name": "exact"}],
        concurrency=2,
        fail_on_item_error_rate=1,
        capture_requests=True,
    )
    store = folder / "store"
    return assay_run(capsys, spec, store)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_tool_calls_refusals_and_cuts_are_failures_of_their_own_never_scored(
    tmp_path, scripted, capsys, provider, stream
):
    _script_non_answers(scripted, provider, stream)
    summary, store = _run(tmp_path, _target(provider, scripted.base_url, stream), capsys)
    items = {row["item_id"]: row for row in store.run_items(summary["run_id"]).iter_rows(named=True)}
    raw = {
        "openai": {"tool": "tool_calls", "refusal": "stop", "cut": "length", "answer": "stop"},
        "anthropic": {"tool": "tool_use", "refusal": "refusal", "cut": "max_tokens", "answer": "end_turn"},
    }[provider]
    expected = {
        "tool": ("failed", "unasked_tool_call", "tool_call"),
        "refusal": ("failed", "refusal", "refusal"),
        "cut": ("failed", "length", "length"),
        "answer": ("completed", None, "stop"),
    }
    for item_id, (outcome, kind, reason) in expected.items():
        row = items[item_id]
        assert (row["outcome"], row["failure_kind"], row["finish_reason"]) == (outcome, kind, reason), row
        assert row["finish_reason_raw"] == raw[item_id]
        assert row["tokens_output"] is not None, row  # the call was made and measured
    assert items["answer"]["output_text"] == "42" and items["answer"]["error"] is None
    # What the model sent instead of an answer is kept as evidence, with a stable message.
    tool_calls = json.loads(items["tool"]["output"])
    assert [c.get("name") or c["function"]["name"] for c in tool_calls] == ["get_weather"]
    assert "called a tool (get_weather) but the request offered none" in items["tool"]["error"]
    # ... and in `tool_calls`, as any calls are (a failed row keeps what the model called).
    assert [(c["name"], json.loads(c["arguments"])) for c in items["tool"]["tool_calls"]] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert items["cut"]["tool_calls"] is None
    assert items["refusal"]["output_text"] == (REFUSAL if provider == "openai" else "I can't")
    assert items["cut"]["output_text"] == "one two"
    assert "cut off by the length limit" in items["cut"]["error"]

    # Only the answer is scored: no score row for a non-answer (the null once scored 1 vs "None").
    scores = store.run_scores(summary["run_id"]).filter(pl.col("kind") == "score")
    assert scores.select("item_id", "score").rows() == [("answer", 1.0)]
    assert summary["items"]["failed"] == 3 and summary["items"]["completed"] == 1
    kinds = summary["failure_kinds"]
    assert (kinds["refusal"], kinds["length"], kinds["unasked_tool_call"], kinds["http"]) == (1, 1, 1, 0)
    assert {k: n for k, n in summary["finish_reasons"].items() if n} == {
        "stop": 1,
        "tool_call": 1,
        "refusal": 1,
        "length": 1,
    }
    # Every captured call says how it ended.
    ends = store.run_requests(summary["run_id"]).filter(pl.col("phase") == "end")
    assert sorted(ends["finish_reason"].to_list()) == ["length", "refusal", "stop", "tool_call"]
    assert sorted(ends["outcome"].to_list()) == ["ok"] * 4

    assert main(["show", summary["run_id"], "--store", str(tmp_path / "store")]) == 0
    shown = capsys.readouterr().out
    assert "not answered (failed, never scored): 1 refusal · 1 length · 1 unasked_tool_call" in shown


def test_with_tools_asked_a_tool_call_is_not_refused_as_unasked(scripted):
    """The rule is a tool call *when none was asked for* (the next issue gives tools their place)."""
    from assay.calls.finish import not_an_answer
    from assay.calls.wire_openai import OPENAI

    finish = OPENAI.finish(completion({"tool_calls": [TOOL_CALL]}, "tool_calls"))
    assert not_an_answer(finish, tools_asked=True) is None
    assert not_an_answer(finish, tools_asked=False)[0] == "unasked_tool_call"
    assert OPENAI.tools_asked({"tools": [{"type": "function"}]}) and not OPENAI.tools_asked({"messages": []})


def test_a_null_content_with_nothing_in_its_place_is_a_protocol_failure(scripted):
    scripted.script(openai({"content": None}))
    with pytest.raises(TargetFailure) as failed:
        test_openai_target.call(scripted.base_url, max_retries=0)
    assert failed.value.kind == "protocol" and "content is null" in failed.value.message


# -- streams: error events, empty streams, usage nulls, request ids, JSON replies --------------


def test_a_stream_error_given_as_a_string_is_a_failure_not_an_empty_answer(scripted):
    scripted.script(
        Stream("openai", [chunk({"role": "assistant", "content": ""}), {"error": "upstream exploded"}])
    )
    with pytest.raises(TargetFailure) as failed:
        test_openai_target.call(scripted.base_url, stream=True, max_retries=0)
    assert failed.value.kind == "http" and failed.value.message == "stream error: upstream exploded"


def test_a_stream_that_is_only_done_is_a_failure_not_an_empty_answer(scripted):
    scripted.script(Stream("openai", ["[DONE]"]))
    with pytest.raises(TargetFailure) as failed:
        test_openai_target.call(scripted.base_url, stream=True, max_retries=0)
    assert failed.value.kind == "protocol" and "without a reply" in failed.value.message


def test_message_delta_usage_nulls_keep_message_starts_counts(scripted):
    events = anthropic_stream_of(
        text("forty two"),
        "end_turn",
        input_tokens=25,
        cache_creation_input_tokens=4,
        cache_read_input_tokens=6,
    )
    scripted.script(Stream("anthropic", events))
    result = test_anthropic.call(scripted.base_url, stream=True, max_retries=0)
    assert result.output == "forty two"
    # 25 uncached + 4 written + 6 read; the delta's nulls erased none of them.
    assert result.usage == Usage(input_tokens=35, output_tokens=6, cached_tokens=6, cache_write_tokens=4)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_stream_that_breaks_off_keeps_its_request_id(scripted, provider):
    if provider == "openai":
        events: list[Any] = [chunk({"role": "assistant", "content": "one"})]
        scripted.script(Stream("openai", events, headers={"x-request-id": "req_cut"}, cut=True))
        call = test_openai_target.call
    else:
        start = anthropic_stream_of(text("one"), "end_turn")[:4]
        scripted.script(Stream("anthropic", start, headers={"request-id": "req_cut"}, cut=True))
        call = test_anthropic.call
    with pytest.raises(TargetFailure) as failed:
        call(scripted.base_url, stream=True, max_retries=0)
    assert failed.value.kind == "connection" and failed.value.request_id == "req_cut"


def test_an_error_event_mid_stream_keeps_its_request_id(scripted):
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    events = [*anthropic_stream_of(text("one two"), "end_turn")[:4], overloaded]
    scripted.script(Stream("anthropic", events, headers={"request-id": "req_011"}))
    with pytest.raises(TargetFailure) as failed:
        test_anthropic.call(scripted.base_url, stream=True, max_retries=0)
    assert failed.value.request_id == "req_011" and "overloaded_error" in failed.value.message


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_json_reply_to_a_streamed_request_is_read_as_json(scripted, provider):
    if provider == "openai":
        scripted.script(Reply("openai", completion({"content": "42"})))
        result = test_openai_target.call(scripted.base_url, stream=True, max_retries=0)
    else:
        scripted.script(Reply("anthropic", message(text("42"))))
        result = test_anthropic.call(scripted.base_url, stream=True, max_retries=0)
    assert result.output == "42" and result.usage.output_tokens is not None
    assert scripted.requests[-1][1]["stream"] is True


def test_a_json_error_in_a_200_to_a_streamed_request_is_an_error(scripted):
    error = {
        "error": {"message": "upstream unavailable", "type": "server_error", "param": None, "code": None}
    }
    scripted.script(Reply("openai", error, headers={"x-request-id": "req_json"}))
    with pytest.raises(TargetFailure) as failed:
        test_openai_target.call(scripted.base_url, stream=True, max_retries=0)
    assert failed.value.kind == "http" and "upstream unavailable" in failed.value.message
    assert failed.value.request_id == "req_json"


# -- the scripted server itself ------------------------------------------------------------------


def test_the_scripted_server_refuses_payloads_off_the_sdks_types():
    with pytest.raises(ValueError, match="ChatCompletionChunk"):
        Stream("openai", [{"choices": [{"delta": {}}]}])
    with pytest.raises(ValueError, match="Message"):
        Reply("anthropic", {"type": "message", "content": []})
    with pytest.raises(ValueError):
        Stream("anthropic", [{"type": "message_delta", "delta": {"stop_reason": "done"}, "usage": {}}])


def _sse_data(body: str) -> list[Any]:
    """The data of each event of an event stream (JSON, or `[DONE]`)."""
    events = []
    for block in body.split("\n\n"):
        data = [line[len("data: ") :] for line in block.split("\n") if line.startswith("data: ")]
        if data:
            text = "\n".join(data)
            events.append(text if text == "[DONE]" else json.loads(text))
    return events


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_mock_servers_send_what_the_sdks_read(mock, claude, provider):
    """The aiohttp mocks (assay/testing/mock_openai, mock_anthropic) checked like the scripted
    server: a reply, a streamed reply event by event, and an error, against the SDKs' types."""
    import httpx

    from assay.testing.scripted import check_event, check_reply, check_request

    server = mock if provider == "openai" else claude
    server.configure(answers={"*": "one two three"})
    path, body = (
        ("/chat/completions", {"model": "mock-1", "messages": [{"role": "user", "content": "hi"}]})
        if provider == "openai"
        else (
            "/messages",
            {"model": CLAUDE, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]},
        )
    )
    streamed = {
        **body,
        "stream": True,
        **({"stream_options": {"include_usage": True}} if provider == "openai" else {}),
    }
    check_request(provider, body)
    check_request(provider, streamed)
    with httpx.Client(
        base_url=server.base_url, headers={"x-api-key": "k", "anthropic-version": "2023-06-01"}
    ) as client:
        reply = client.post(path, json=body)
        assert reply.status_code == 200
        check_reply(provider, reply.json())
        events = _sse_data(client.post(path, json=streamed).text)
        assert len(events) > 4
        for data in events:
            check_event(provider, data)
        server.configure(faults=[{"status": 429, "times": 1}])
        refused = client.post(path, json=body)
        assert refused.status_code == 429
        check_reply(provider, refused.json())


def test_a_refused_turn_of_a_session_fails_it_with_its_finish_reason(tmp_path, scripted, capsys):
    from tests.run.test_sessions import THREE_PROMPTS, session_spec, write_policy

    # Policies propagate a failed prompt: the refusal ends the attempt, and the item, as a refusal.
    scripted.script(openai({"content": "0"}), openai({"refusal": REFUSAL}))
    target = _target("openai", scripted.base_url, stream=False)
    target["prompt"] = "{question}"
    spec = session_spec(tmp_path, target, n=1, policy=write_policy(tmp_path, THREE_PROMPTS))
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--json"]) == 0
    summary, store = json.loads(capsys.readouterr().out), Store(tmp_path / "s")
    turns = store.run_turns(summary["run_id"]).sort("index")
    assert turns.select("outcome", "failure_kind", "finish_reason").rows() == [
        ("completed", None, "stop"),
        ("failed", "refusal", "refusal"),
    ]
    (item,) = store.run_items(summary["run_id"]).iter_rows(named=True)
    assert (item["outcome"], item["failure_kind"], item["finish_reason"]) == ("failed", "refusal", "refusal")
    assert summary["failure_kinds"]["refusal"] == 1
