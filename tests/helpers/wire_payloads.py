"""Replies as the official SDKs' own test fixtures shape them, for the scripted server
(`assay.testing.scripted`, which checks each against the SDK's types): OpenAI chat completions
and their chunks, Anthropic messages and their stream events."""

from __future__ import annotations

import json
from typing import Any

from assay.testing.scripted import Reply, Stream

OPENAI_MODEL = "gpt-4o-mini-2024-07-18"
CLAUDE = "claude-sonnet-4-5-20250929"
TOOL_CALL = {
    "id": "call_abc123",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
}
TOOL_USE = {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}}
REFUSAL = "I'm sorry, I can't help with that."


# -- OpenAI -----------------------------------------------------------------------------------


def completion(message: dict[str, Any], finish_reason: str = "stop", **usage: int) -> dict[str, Any]:
    """A `chat.completion` of one choice."""
    return {
        "id": "chatcmpl-123",
        "object": "chat.completion",
        "created": 1727389540,
        "model": OPENAI_MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "refusal": None, **message},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16, **usage},
    }


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    """A `chat.completion.chunk` of one choice."""
    return {
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1727389540,
        "model": OPENAI_MODEL,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }


def usage_chunk() -> dict[str, Any]:
    """The final chunk `stream_options.include_usage` asks for: usage, and no choices."""
    return {
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1727389540,
        "model": OPENAI_MODEL,
        "choices": [],
        "usage": {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16},
    }


def openai_stream_of(message: dict[str, Any], finish_reason: str) -> list[Any]:
    """An unstreamed message's chunks as OpenAI streams them: its role first, the content word by
    word (or the refusal, or each tool call's name then its arguments in two pieces), the finish
    reason, the usage, `[DONE]`."""
    first: dict[str, Any] = {
        "role": "assistant",
        "content": "" if message.get("content") is not None else None,
    }
    events = [chunk(first)]
    for n, word in enumerate((message.get("content") or "").split()):
        events.append(chunk({"content": word if n == 0 else f" {word}"}))
    if message.get("refusal"):
        events += [chunk({"refusal": part}) for part in (message["refusal"][:10], message["refusal"][10:])]
    for index, call in enumerate(message.get("tool_calls") or []):
        head = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        arguments = call["function"]["arguments"]
        events.append(chunk({"tool_calls": [head]}))
        for part in (arguments[:5], arguments[5:]):
            events.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]}))
    return [*events, chunk({}, finish_reason), usage_chunk(), "[DONE]"]


def openai(message: dict[str, Any], finish_reason: str = "stop", *, stream: bool = False) -> Reply | Stream:
    """The reply for `message`, whole or streamed."""
    if stream:
        return Stream("openai", openai_stream_of(message, finish_reason))
    return Reply("openai", completion(message, finish_reason))


# -- Anthropic --------------------------------------------------------------------------------


def message(content: list[dict[str, Any]], stop_reason: str = "end_turn", **usage: Any) -> dict[str, Any]:
    """A Messages API `message`."""
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": CLAUDE,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 12,
            "output_tokens": 6,
            "cache_creation_input_tokens": None,
            "cache_read_input_tokens": None,
            **usage,
        },
    }


def anthropic_stream_of(content: list[dict[str, Any]], stop_reason: str, **usage: Any) -> list[Any]:
    """A message as Anthropic streams it: `message_start` (input usage), a `ping`, each block's
    start, deltas (text word by word, a tool call's input as JSON in two pieces) and stop,
    `message_delta` (the stop reason, cumulative usage with the input counts null), `message_stop`."""
    start = message([], stop_reason, output_tokens=1, **usage)
    start["stop_reason"] = None
    events: list[Any] = [{"type": "message_start", "message": start}, {"type": "ping"}]
    for index, block in enumerate(content):
        if block["type"] == "text":
            events.append(
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
            )
            for n, word in enumerate(block["text"].split()):
                text = word if n == 0 else f" {word}"
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": text},
                    }
                )
        else:
            events.append(
                {"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}}
            )
            pieces = json.dumps(block["input"])
            for part in (pieces[:4], pieces[4:]):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": part},
                    }
                )
        events.append({"type": "content_block_stop", "index": index})
    events += [
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            # As the API sends it: the input and cache counts null, the output count cumulative.
            "usage": {
                "output_tokens": 6,
                "input_tokens": None,
                "cache_creation_input_tokens": None,
                "cache_read_input_tokens": None,
            },
        },
        {"type": "message_stop"},
    ]
    return events


def anthropic(
    content: list[dict[str, Any]], stop_reason: str = "end_turn", *, stream: bool = False
) -> Reply | Stream:
    """The reply holding `content`, whole or streamed."""
    if stream:
        return Stream("anthropic", anthropic_stream_of(content, stop_reason))
    return Reply("anthropic", message(content, stop_reason))


def text(answer: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": answer}]


# -- OpenAI Responses -------------------------------------------------------------------------

RESPONSES_MODEL = "o4-mini-2025-04-16"


def output_message(answer: str | None = None, *, refusal: str | None = None) -> dict[str, Any]:
    """A `message` output item holding `answer` (an `output_text` part) or a `refusal` part."""
    part = (
        {"type": "refusal", "refusal": refusal}
        if refusal is not None
        else {"type": "output_text", "text": answer, "annotations": [], "logprobs": []}
    )
    return {
        "id": "msg_67cc",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [part],
    }


def function_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A `function_call` output item (its `id` the item's, its `call_id` what a result names)."""
    return {
        "id": f"fc_{call_id}",
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(arguments),
        "status": "completed",
    }


def reasoning_item(summary: str) -> dict[str, Any]:
    """A `reasoning` output item with one summary part."""
    return {"id": "rs_67cc", "type": "reasoning", "summary": [{"type": "summary_text", "text": summary}]}


def response(
    output: list[dict[str, Any]],
    status: str = "completed",
    *,
    incomplete: str | None = None,
    cached: int = 0,
    reasoning_tokens: int = 0,
) -> dict[str, Any]:
    """A `response` object: its output items, how it ended, its usage."""
    return {
        "id": "resp_67cc",
        "object": "response",
        "created_at": 1741476542,
        "status": status,
        "error": None,
        "incomplete_details": None if incomplete is None else {"reason": incomplete},
        "model": RESPONSES_MODEL,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 36,
            "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
            "output_tokens": 87,
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": 123,
        },
    }


def responses_stream_of(whole: dict[str, Any]) -> list[dict[str, Any]]:
    """A response as the Responses API streams it: `response.created` (in progress, no output),
    each item added, its text in word deltas, done; then `response.completed` (or
    `response.incomplete`) with the whole response."""
    number = iter(range(10_000))
    started = {**whole, "status": "in_progress", "output": [], "usage": None, "incomplete_details": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": started, "sequence_number": next(number)}
    ]
    for index, item in enumerate(whole["output"]):
        added = {**item, "content": []} if item["type"] == "message" else item
        events.append(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": added,
                "sequence_number": next(number),
            }
        )
        for part in item.get("content") or [] if item["type"] == "message" else []:
            for n, word in enumerate((part.get("text") or "").split()):
                events.append(
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": word if n == 0 else f" {word}",
                        "logprobs": [],
                        "sequence_number": next(number),
                    }
                )
        events.append(
            {
                "type": "response.output_item.done",
                "output_index": index,
                "item": item,
                "sequence_number": next(number),
            }
        )
    final = "response.incomplete" if whole["status"] == "incomplete" else "response.completed"
    return [*events, {"type": final, "response": whole, "sequence_number": next(number)}]


def responses(whole: dict[str, Any], *, stream: bool = False) -> Reply | Stream:
    """The reply `whole` (a `response`), whole or streamed."""
    if stream:
        return Stream("responses", responses_stream_of(whole))
    return Reply("responses", whole)
