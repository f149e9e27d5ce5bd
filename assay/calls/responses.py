"""OpenAI's Responses API on the wire (`POST {base_url}/responses`), a `ChatAPI`
(`assay.calls.wire`) beside chat completions: the `openai` target's `api: responses`.

    ResponsesAPI        the `ChatAPI` of it: bodies, tools, structured output, replies, usage, streams
    responses_input     a conversation's turns as input items (`input_text`, `input_image`, `input_file`)

A request says what a chat-completions one says, in this API's words: the system prompt is
`instructions`, the conversation is `input`, a tool is `{type: function, name, parameters,
strict}` (with `strict: false` when the spec leaves it unset: this API's default is strict, chat
completions' is not), `response_format` is `text.format`, `reasoning_effort` is `reasoning.effort`,
`max_completion_tokens` (or `max_tokens`) is `max_output_tokens`. It sends `store: false`: an
evaluation's requests are not kept on the provider's side for a later `previous_response_id`.

A reply is a list of output items: `message` (its `output_text` parts the answer, a `refusal`
part a refusal), `function_call` (a tool call: `call_id`, `name`, `arguments` as JSON text),
`reasoning` (its summary, or its reasoning text: stored apart from the answer). How it ended is
its `status`: `completed`; `incomplete` with `incomplete_details.reason` `max_output_tokens` (the
length limit) or `content_filter`; a `failed` response carries an `error` and is no reply.
Usage: `input_tokens` (cache reads among them: `input_tokens_details.cached_tokens`),
`output_tokens` (reasoning among them: `output_tokens_details.reasoning_tokens`).

A stream is named events, each with its `type` in its data: `response.created`, the output
items' `response.output_item.added` / `.done`, text in `response.output_text.delta` (the first
token), and one final event — `response.completed` or `response.incomplete` (the whole response),
`response.failed` (its `error`); an `error` event breaks the stream off.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from assay.calls.accounting import Usage
from assay.calls.finish import Finish, reason_of
from assay.calls.media import load_media
from assay.calls.messages import (
    ContentPart,
    FunctionTool,
    ImagePart,
    ResponseFormat,
    TextPart,
    ToolChoice,
    ToolResult,
    Turn,
)
from assay.calls.wire import Assembler, ChatAPI, StreamFailed, bearer_headers, openai_usage, parsed_json
from assay.outcomes import FailureKind, FinishReason

# Why a response is `incomplete` (`incomplete_details.reason`), in Assay's words.
_INCOMPLETE = {
    "max_output_tokens": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
}
# A failed response's or an `error` event's codes that another attempt may cure.
_TRANSIENT = frozenset({"server_error", "rate_limit_exceeded", "vector_store_timeout"})
# The events that end a stream with the whole response in them.
_FINAL = frozenset({"response.completed", "response.incomplete"})


class ResponsesAPI(ChatAPI):
    name = "openai"
    path = "/responses"

    def follow_up(
        self, body: dict[str, Any], reply: dict[str, Any], results: list[ToolResult]
    ) -> dict[str, Any]:
        """The reply's items sent back as input (`_echoed`), then a `function_call_output` per
        result (an error said in its text: the API has no flag)."""
        outputs = [
            {"type": "function_call_output", "call_id": r.call_id, "output": r.content} for r in results
        ]
        echoed = [echo for item in reply["output"] if (echo := _echoed(item)) is not None]
        return {**body, "input": [*body["input"], *echoed, *outputs]}

    def prompt_of(self, body: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
        return body.get("instructions"), body["input"]

    def headers(self, api_key: str | None) -> dict[str, str]:
        return bearer_headers(api_key)

    def prompt_body(
        self,
        *,
        model: str,
        prompt: str,
        system: str | None,
        temperature: float | None,
        max_tokens: int | None,
    ) -> dict[str, Any]:
        return self.body(
            model=model,
            instructions=system,
            input=[{"role": "user", "content": prompt}],
            temperature=temperature,
            max_output_tokens=max_tokens,
        )

    def body(
        self,
        *,
        model: str,
        instructions: str | None,
        input: list[dict[str, Any]],
        temperature: float | None,
        max_output_tokens: int | None,
    ) -> dict[str, Any]:
        """A request body: the conversation as input items, the system prompt as `instructions`."""
        body: dict[str, Any] = {"model": model, "input": input, "store": False}
        if instructions is not None:
            body["instructions"] = instructions
        if temperature is not None:
            body["temperature"] = temperature
        if max_output_tokens is not None:
            body["max_output_tokens"] = max_output_tokens
        return body

    def option_fields(self, name: str, value: Any) -> dict[str, Any]:
        if name == "max_completion_tokens":
            return {"max_output_tokens": value}
        if name == "reasoning_effort":
            return {"reasoning": {"effort": value}}
        return {name: value}

    def check(self, reply: Any) -> None:
        if not isinstance(reply["output"], list):
            raise TypeError("output is not a list")
        for item in reply["output"]:
            if not isinstance(item, dict) or not isinstance(item["type"], str):
                raise TypeError("an output item is not an object with a type")

    @staticmethod
    def _parts(reply: dict[str, Any], kind: str) -> list[dict[str, Any]]:
        """The content parts of this `kind` of the reply's message items, in order."""
        return [
            part
            for item in reply["output"]
            if item["type"] == "message" and isinstance(item.get("content"), list)
            for part in item["content"]
            if isinstance(part, dict) and part.get("type") == kind
        ]

    def content(self, reply: dict[str, Any]) -> Any:
        """The `output_text` of its message items, joined; None when it holds no message."""
        if not any(item["type"] == "message" for item in reply["output"]):
            return None
        return "".join(p["text"] for p in self._parts(reply, "output_text") if isinstance(p.get("text"), str))

    def reasoning(self, reply: dict[str, Any]) -> str | None:
        """Its reasoning items' summaries (OpenAI's), else their reasoning text (open models')."""
        texts: list[str] = []
        for item in reply["output"]:
            if item["type"] != "reasoning":
                continue
            parts = item.get("summary") or item.get("content") or []
            texts += [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "\n\n".join(texts) if texts else None

    def finish(self, reply: dict[str, Any]) -> Finish:
        """`completed` is a stop (a tool call when it holds function calls, a refusal when it holds
        one); `incomplete` says why in `incomplete_details.reason` (the raw word kept)."""
        status = reply.get("status")
        details = reply.get("incomplete_details") or {}
        raw = details.get("reason") if status == "incomplete" else status
        if status == "incomplete":
            reason = reason_of(raw, _INCOMPLETE) if raw is not None else FinishReason.OTHER
        else:
            reason = reason_of(raw, {"completed": FinishReason.STOP})
        # Named by `call_id`, which a tool's result answers (the item's own `id` is not that).
        calls = [
            {"id": item.get("call_id"), "name": item.get("name"), "arguments": item.get("arguments")}
            for item in reply["output"]
            if item["type"] == "function_call"
        ]
        refusal = "".join(
            p["refusal"] for p in self._parts(reply, "refusal") if isinstance(p.get("refusal"), str)
        )
        if refusal:
            reason = FinishReason.REFUSAL
        elif calls and reason is not FinishReason.LENGTH:
            reason = FinishReason.TOOL_CALL
        return Finish(reason, raw if isinstance(raw, str) else None, calls or None, refusal or None)

    def usage(self, reply: dict[str, Any]) -> Usage:
        return openai_usage(reply.get("usage"), "input", "output")

    def format_fields(self, response_format: ResponseFormat) -> dict[str, Any]:
        """`text.format`: the schema's fields beside its `type` (not nested under `json_schema`)."""
        schema = response_format.json_schema
        text_format: dict[str, Any] = {"type": response_format.type}
        if schema is not None:
            text_format |= schema.model_dump(mode="json", exclude_none=True)
        return {"text": {"format": text_format}}

    def structured(self, response_format: ResponseFormat, content: Any, finish: Finish) -> Any:
        return parsed_json(content)

    def tool_fields(
        self, tools: list[FunctionTool], choice: ToolChoice | None, parallel: bool | None
    ) -> dict[str, Any]:
        offered = []
        for tool in tools:
            described = {"description": tool.description} if tool.description else {}
            offered.append(
                {
                    "type": "function",
                    "name": tool.name,
                    **described,
                    "parameters": tool.parameters,
                    # Unset, strict means false, as on chat completions (here the default is true,
                    # which refuses every schema that is not written for it).
                    "strict": bool(tool.strict),
                }
            )
        fields: dict[str, Any] = {"tools": offered}
        if choice is not None:
            fields["tool_choice"] = (
                choice if isinstance(choice, str) else {"type": "function", "name": choice.name}
            )
        if parallel is not None:
            fields["parallel_tool_calls"] = parallel
        return fields

    def streamed(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "stream": True}  # usage comes with the final event, unasked

    def assembler(self) -> Assembler:
        return _ResponsesAssembler()


def _echoed(item: dict[str, Any]) -> dict[str, Any] | None:
    """An output item as the next request's input: a `function_call` as the call (without its own
    `id`, which names a stored item, and no response is stored); a message as the assistant's
    text; a reasoning item only with its `encrypted_content` (asked with `params: {include:
    [reasoning.encrypted_content]}`), the one form a request that is not stored can send back."""
    kind = item["type"]
    if kind == "function_call":
        return {key: item[key] for key in ("type", "call_id", "name", "arguments") if key in item}
    if kind == "message":
        parts = item.get("content") or []
        said = "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))
        return {"role": "assistant", "content": said} if said else None
    if kind == "reasoning" and item.get("encrypted_content"):
        return {key: item[key] for key in ("type", "id", "summary", "encrypted_content") if key in item}
    return None


def _failure(error: Any, said: str) -> StreamFailed:
    error = error if isinstance(error, dict) else {}
    code = error.get("code")
    words = ": ".join(w for w in (code, error.get("message")) if isinstance(w, str) and w)
    return StreamFailed(f"{said}: {words or 'no detail'}", FailureKind.HTTP, retryable=code in _TRANSIENT)


class _ResponsesAssembler(Assembler):
    """The final event's response is the reply; its output, when the final event leaves it out,
    is the items each `response.output_item.done` sent (in `output_index` order)."""

    def __init__(self) -> None:
        self.done = False
        self._response: dict[str, Any] | None = None
        self._items: dict[int, dict[str, Any]] = {}

    def feed(self, data: str) -> bool:
        event = json.loads(data)
        kind = event["type"]
        if kind == "response.output_text.delta":
            return bool(event.get("delta"))
        if kind == "response.created":
            self._response = dict(event["response"])
        elif kind == "response.output_item.done":
            self._items[event["output_index"]] = event["item"]
        elif kind in _FINAL:
            self._response = dict(event["response"])
            self.done = True
        elif kind == "response.failed":
            raise _failure(event["response"].get("error"), "the response failed")
        elif kind == "error":
            raise _failure(event, "stream error")
        return False

    def reply(self) -> dict[str, Any]:
        if self._response is None:
            raise StreamFailed("the stream held no response (no response.created)", FailureKind.PROTOCOL)
        if not self._response.get("output") and self._items:
            self._response["output"] = [self._items[i] for i in sorted(self._items)]
        return self._response


def _input_part(part: ContentPart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "input_text", "text": part.text}
    media = load_media(part)
    if isinstance(part, ImagePart):
        url = part.url if media is None else media.data_url()
        return {"type": "input_image", "image_url": url, "detail": "auto"}
    assert media is not None, "a document on OpenAI's wire is inline (checked before the run)"
    name = Path(part.path).name if part.path is not None else "document.pdf"
    return {"type": "input_file", "filename": name, "file_data": media.data_url()}


def responses_input(turns: list[Turn]) -> list[dict[str, Any]]:
    """The turns as input messages: a user's parts as input parts, an assistant's as its text
    (images and documents come only in user turns)."""
    items: list[dict[str, Any]] = []
    for turn in turns:
        if isinstance(turn.content, str) or turn.role != "user":
            items.append({"role": turn.role, "content": turn.text()})
        else:
            items.append({"role": turn.role, "content": [_input_part(p) for p in turn.content]})
    return items


RESPONSES = ResponsesAPI()
"""The Responses API (the `openai` target's `api: responses`)."""
