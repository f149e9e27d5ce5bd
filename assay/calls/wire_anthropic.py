"""Anthropic's Messages API on the wire (`POST {base_url}/messages`, `x-api-key` and
`anthropic-version`): usage `input_tokens` (cache reads and writes *not* among them),
`cache_creation_input_tokens`, `cache_read_input_tokens`, `output_tokens`.

Streams are read as the official SDK reads them: a stream with no `message_start` is no reply;
`message_delta`'s usage replaces only the counts it gives (a null keeps `message_start`'s).
"""

from __future__ import annotations

import json
from typing import Any

from assay.calls.accounting import Usage
from assay.calls.finish import Finish, reason_of
from assay.calls.messages import FunctionTool, NamedTool, ResponseFormat, ToolChoice, ToolResult
from assay.calls.wire import Assembler, MessagesAPI, StreamFailed, parsed_json, token_count
from assay.outcomes import FailureKind, FinishReason

ANTHROPIC_VERSION = "2023-06-01"
# The error types of an Anthropic stream's `error` event that a new attempt may cure.
_ANTHROPIC_TRANSIENT = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})


class AnthropicMessages(MessagesAPI):
    """The Messages API.

    Args:
        version: the `anthropic-version` header.
    """

    name = "anthropic"
    path = "/messages"
    needs_max_tokens = True
    pins_models = True

    def __init__(self, version: str = ANTHROPIC_VERSION) -> None:
        self.version = version

    def prompt_body(
        self,
        *,
        model: str,
        prompt: str,
        system: str | None,
        temperature: float | None,
        max_tokens: int | None,
    ) -> dict[str, Any]:
        if max_tokens is None:
            raise ValueError("the Messages API requires max_tokens")
        return messages_body(
            model=model,
            max_tokens=max_tokens,
            messages=[{"role": "user", "content": prompt}],
            system=system,
            temperature=temperature,
        )

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": self.version}
        if api_key is not None:
            headers["x-api-key"] = api_key
        return headers

    def check(self, reply: Any) -> None:
        if not isinstance(reply["content"], list):
            raise TypeError("content is not a list")

    def content(self, reply: dict[str, Any]) -> Any:
        """The text of the reply's text blocks, joined (tool-use and thinking blocks left out)."""
        return "".join(
            block["text"]
            for block in reply["content"]
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
        )

    def reasoning(self, reply: dict[str, Any]) -> str | None:
        """The text of its `thinking` blocks, joined (a redacted block's is not readable)."""
        thought = [
            block["thinking"]
            for block in reply["content"]
            if isinstance(block, dict)
            and block.get("type") == "thinking"
            and isinstance(block.get("thinking"), str)
        ]
        return "\n\n".join(thought) if thought else None

    def finish(self, reply: dict[str, Any]) -> Finish:
        raw = reply.get("stop_reason")
        calls = [b for b in reply["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
        reason = reason_of(raw, _ANTHROPIC_REASONS)
        if calls and reason in (None, FinishReason.STOP):
            reason = FinishReason.TOOL_CALL
        return Finish(reason, raw if isinstance(raw, str) else None, calls or None)

    def usage(self, reply: dict[str, Any]) -> Usage:
        raw = reply.get("usage") or {}
        uncached = token_count(raw.get("input_tokens"))
        written = token_count(raw.get("cache_creation_input_tokens"))
        read = token_count(raw.get("cache_read_input_tokens"))
        return Usage(
            # Anthropic's `input_tokens` leaves out cache reads and writes; Assay's counts all input.
            input_tokens=None if uncached is None else uncached + (written or 0) + (read or 0),
            output_tokens=token_count(raw.get("output_tokens")),
            cached_tokens=read,
            cache_write_tokens=written,
        )

    def format_fields(self, response_format: ResponseFormat) -> dict[str, Any]:
        """With `strict: true`, the native structured output (`output_config.format`, as the SDK's
        `OutputConfigParam` has it: the reply's text is the object, held to the schema); else a
        schema's reply forced through a tool whose input is the object, which every model takes
        (the spec refuses `json_object`, which this API has no word for, and `response_format`
        beside `tools`)."""
        schema = response_format.json_schema
        if schema is None:
            raise ValueError("the Messages API takes a response_format of type json_schema only")
        if schema.strict:
            return {"output_config": {"format": {"type": "json_schema", "schema": schema.schema_}}}
        tool = FunctionTool(
            name=schema.name,
            description=schema.description or "Give the answer as this tool's input.",
            parameters=schema.schema_,
        )
        return self.tool_fields([tool], NamedTool(name=schema.name), None)

    def structured(self, response_format: ResponseFormat, content: Any, finish: Finish) -> Any:
        """The forced tool's input; else (a native structured reply, or a model that answered in
        words instead of calling the tool) the text parsed as JSON."""
        name = response_format.json_schema.name if response_format.json_schema else None
        for call in finish.tool_calls or []:
            if isinstance(call, dict) and call.get("name") == name:
                return call.get("input")
        return parsed_json(content)

    def tool_fields(
        self, tools: list[FunctionTool], choice: ToolChoice | None, parallel: bool | None
    ) -> dict[str, Any]:
        offered = []
        for tool in tools:  # no `strict` on this wire: the input schema is the tool's
            described = {"description": tool.description} if tool.description else {}
            offered.append({"name": tool.name, **described, "input_schema": tool.parameters})
        fields: dict[str, Any] = {"tools": offered}
        how: dict[str, Any] | None = None
        if choice is not None:
            how = (
                {"type": "tool", "name": choice.name}
                if isinstance(choice, NamedTool)
                else {"type": _ANTHROPIC_CHOICE[choice]}
            )
        if parallel is False and (how is None or how["type"] != "none"):
            how = {**(how or {"type": "auto"}), "disable_parallel_tool_use": True}
        if how is not None:
            fields["tool_choice"] = how
        return fields

    def assistant_turn(self, reply: dict[str, Any]) -> dict[str, Any]:
        """The reply's blocks as sent: its text, its `tool_use` blocks, and its thinking blocks
        with their signatures (which the API requires back, unchanged, after a tool call)."""
        blocks = []
        for block in reply["content"]:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind in _ANTHROPIC_ECHOED:
                blocks.append({key: block[key] for key in _ANTHROPIC_ECHOED[kind] if key in block})
        return {"role": "assistant", "content": blocks}

    def tool_turns(self, results: list[ToolResult]) -> list[dict[str, Any]]:
        """One user message of `tool_result` blocks (`is_error: true` for a tool that failed)."""
        blocks = []
        for r in results:
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": r.call_id, "content": r.content}
            blocks.append({**block, "is_error": True} if r.is_error else block)
        return [{"role": "user", "content": blocks}]

    def streamed(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "stream": True}

    def assembler(self) -> Assembler:
        return _AnthropicAssembler()


def messages_body(
    *,
    model: str,
    max_tokens: int,
    messages: list[dict[str, Any]],
    system: str | None = None,
    cache_system: bool = False,
    temperature: float | None = None,
    stop_sequences: list[str] | None = None,
) -> dict[str, Any]:
    """A Messages API request body.

    Args:
        model: the model.
        max_tokens: the reply's limit (required by the API).
        messages: the conversation, alternating `user` and `assistant`.
        system: the system prompt, if any.
        cache_system: mark the system prompt for the prompt cache (`cache_control: ephemeral`).
        temperature: sampling temperature, if set.
        stop_sequences: texts that end the reply, if any.
    """
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": messages}
    if system is not None:
        body["system"] = (
            [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
            if cache_system
            else system
        )
    if temperature is not None:
        body["temperature"] = temperature
    if stop_sequences:
        body["stop_sequences"] = list(stop_sequences)
    return body


# The blocks of a reply a tool loop sends back, and the fields each keeps (the rest, such as a
# text block's `citations: null`, are the reply's, not a request's).
_ANTHROPIC_ECHOED = {
    "text": ("type", "text"),
    "tool_use": ("type", "id", "name", "input"),
    "thinking": ("type", "thinking", "signature"),
    "redacted_thinking": ("type", "data"),
}

# OpenAI's words for a tool choice, in Anthropic's (`required` is its `any`).
_ANTHROPIC_CHOICE = {"auto": "auto", "none": "none", "required": "any"}

_ANTHROPIC_REASONS = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL_CALL,
    "refusal": FinishReason.REFUSAL,
}


class _AnthropicAssembler(Assembler):
    """`message_start` (the message, its input usage), `content_block_start` / `_delta` / `_stop`
    per block, `message_delta` (stop reason, cumulative usage), `message_stop`; `ping`s between,
    and an `error` event when the stream fails. A block's deltas: `text_delta`, `thinking_delta`
    and `signature_delta`, and a tool call's `input_json_delta` pieces (parsed at its stop)."""

    def __init__(self) -> None:
        self.done = False
        self._message: dict[str, Any] | None = None
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, str] = {}

    def feed(self, data: str) -> bool:
        event = json.loads(data)
        kind = event.get("type")
        if kind == "message_start":
            self._message = dict(event["message"])
            self._message["usage"] = dict(self._message.get("usage") or {})
        elif kind == "content_block_start":
            self._blocks[event["index"]] = dict(event["content_block"])
        elif kind == "content_block_delta":
            delta = event["delta"]
            block = self._blocks.setdefault(event["index"], {"type": "text", "text": ""})
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
                return bool(delta["text"])
            if delta.get("type") == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif delta.get("type") == "signature_delta":
                block["signature"] = delta["signature"]
            elif delta.get("type") == "input_json_delta":
                self._json[event["index"]] = self._json.get(event["index"], "") + delta["partial_json"]
        elif kind == "content_block_stop":
            if (pieces := self._json.pop(event["index"], None)) is not None:
                self._blocks[event["index"]]["input"] = json.loads(pieces) if pieces else {}
        elif kind == "message_delta":
            message = self._started()
            message.update(event.get("delta") or {})
            # Its usage is cumulative: each count given replaces the one before, and a count it
            # leaves null (input and cache counts, often) keeps message_start's, as the SDK does.
            usage = message.setdefault("usage", {})
            usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
        elif kind == "message_stop":
            self._started()
            self.done = True
        elif kind == "error":
            error = event.get("error") or {}
            kind_of_error = error.get("type") or "error"
            raise StreamFailed(
                f"stream error: {kind_of_error}: {error.get('message') or ''}".rstrip(": "),
                FailureKind.HTTP,
                retryable=kind_of_error in _ANTHROPIC_TRANSIENT,
            )
        return False

    def _started(self) -> dict[str, Any]:
        if self._message is None:
            raise StreamFailed("the stream held no message (no message_start)", FailureKind.PROTOCOL)
        return self._message

    def reply(self) -> dict[str, Any]:
        return {**self._started(), "content": [self._blocks[i] for i in sorted(self._blocks)]}
