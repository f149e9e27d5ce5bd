"""What each provider's chat API looks like on the wire, for `assay.calls.chat.ChatClient`.

    OpenAIChat          `POST {base_url}/chat/completions`, `Authorization: Bearer <key>`;
                        usage `prompt_tokens` (cache reads among them) and `completion_tokens`
    AnthropicMessages   `POST {base_url}/messages`, `x-api-key` and `anthropic-version`; usage
                        `input_tokens` (cache reads and writes *not* among them),
                        `cache_creation_input_tokens`, `cache_read_input_tokens`, `output_tokens`

OpenAI's Responses API (`POST {base_url}/responses`) is a `ChatAPI` too, in a module of its own:
`assay.calls.responses`.

Each says where a request goes and with which headers, whether a reply has the shape it should,
what its content and token usage are, and how a streamed reply (Server-Sent Events) is assembled
back into the reply the same request would have had unstreamed — so caching, capture and
accounting see one shape whether a call streamed or not.

Usage is read into Assay's one meaning of the token kinds (`assay.outcomes.TokenKind`):
`input` counts all input tokens; `cached` (cache reads) and `cache_write` are parts of it.
A count the provider did not send stays None: tokens are never guessed.

How a reply ended (`ChatAPI.finish`) is read into one word over providers
(`assay.outcomes.FinishReason`), the provider's own kept beside it (`assay.calls.finish` says
which endings are no answer at all).

Streams are read as the official SDKs read them: an OpenAI event whose `error` is anything but
empty is a failure (a string as much as an object); a stream that carried no reply at all (only
`data: [DONE]`, or no `message_start`) is one too; Anthropic's `message_delta` usage replaces only
the counts it gives (a null keeps `message_start`'s).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from assay.calls.accounting import Usage
from assay.calls.finish import Finish, reason_of
from assay.calls.messages import FunctionTool, NamedTool, ResponseFormat, ToolChoice, ToolResult
from assay.outcomes import FailureKind, FinishReason

ANTHROPIC_VERSION = "2023-06-01"
# The error types of an Anthropic stream's `error` event that a new attempt may cure.
_ANTHROPIC_TRANSIENT = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})


class StreamFailed(Exception):
    """A stream that broke off: it ended before its final event (`connection`), sent an error
    event (`http`), or an event that does not parse (`protocol`).

    Args:
        message: what happened, for people.
        kind: the failure's kind.
        retryable: whether another attempt may cure it.
    """

    def __init__(self, message: str, kind: FailureKind, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.retryable = retryable


class Assembler(ABC):
    """Builds a streamed reply, event by event, into the shape of an unstreamed one."""

    done: bool = False

    @abstractmethod
    def feed(self, data: str) -> bool:
        """Take one event's data; returns whether it carried answer text (the first such event
        is the call's first token). Raises `StreamFailed` on an error event."""

    @abstractmethod
    def reply(self) -> dict[str, Any]:
        """The reply as the unstreamed request would have had it."""


class ChatAPI(ABC):
    """One provider's chat API.

    Attributes:
        name: the provider, as failures name it (`<name>:<host>`), and as a judge's `provider`.
        path: appended to the client's base URL.
        needs_max_tokens: a request must bound its reply.
        pins_models: its model names must be exact, dated versions (`model_pin_problem`).
    """

    name: ClassVar[str]
    path: ClassVar[str]
    needs_max_tokens: ClassVar[bool] = False
    pins_models: ClassVar[bool] = False

    @abstractmethod
    def prompt_body(
        self,
        *,
        model: str,
        prompt: str,
        system: str | None,
        temperature: float | None,
        max_tokens: int | None,
    ) -> dict[str, Any]:
        """The body of a one-prompt request (a judge's), with its system prompt if any."""

    @abstractmethod
    def headers(self, api_key: str | None) -> dict[str, str]:
        """The request headers beyond `content-type` (the key only in them, never in a record)."""

    @abstractmethod
    def check(self, reply: Any) -> None:
        """Raise `KeyError`, `IndexError` or `TypeError` when `reply` lacks what `content` and
        `finish` read."""

    @abstractmethod
    def content(self, reply: dict[str, Any]) -> Any:
        """The answer's content."""

    @abstractmethod
    def usage(self, reply: dict[str, Any]) -> Usage:
        """The reply's token usage."""

    @abstractmethod
    def finish(self, reply: dict[str, Any]) -> Finish:
        """How the reply ended: why the model stopped, and its tool calls and refusal if any."""

    def tools_asked(self, body: dict[str, Any]) -> bool:
        """Whether a request offers the model tools (both APIs name them `tools`; OpenAI's
        deprecated `functions` too)."""
        return bool(body.get("tools") or body.get("functions"))

    def option_fields(self, name: str, value: Any) -> dict[str, Any]:
        """The body's fields for the spec's field `name` set to `value` (`max_completion_tokens`,
        `reasoning_effort`): under its own name, unless the API calls it otherwise."""
        return {name: value}

    @abstractmethod
    def reasoning(self, reply: dict[str, Any]) -> str | None:
        """The reasoning text or summary a reply carries apart from its answer, or None."""

    @abstractmethod
    def format_fields(self, response_format: ResponseFormat) -> dict[str, Any]:
        """The body's fields asking for a reply of `response_format` (structured output)."""

    @abstractmethod
    def structured(self, response_format: ResponseFormat, content: Any, finish: Finish) -> Any:
        """A structured reply's answer: the JSON object it holds, parsed (the text as written
        when it does not parse, for the scorer to fail)."""

    @abstractmethod
    def tool_fields(
        self, tools: list[FunctionTool], choice: ToolChoice | None, parallel: bool | None
    ) -> dict[str, Any]:
        """The body's fields offering `tools`, with how the model may choose among them and
        whether it may make several calls at once (None: the provider's default)."""

    @abstractmethod
    def assistant_turn(self, reply: dict[str, Any]) -> dict[str, Any]:
        """A reply of tool calls as the assistant's message of the next request (a tool loop's)."""

    @abstractmethod
    def tool_turns(self, results: list[ToolResult]) -> list[dict[str, Any]]:
        """The messages that send the results of a reply's tool calls back to the model."""

    @abstractmethod
    def streamed(self, body: dict[str, Any]) -> dict[str, Any]:
        """The request body asking for a stream (with usage in it, where that must be asked for)."""

    @abstractmethod
    def assembler(self) -> Assembler:
        """A new assembler for one streamed reply."""


def _parsed(content: Any) -> Any:
    if not isinstance(content, str):
        return content
    try:
        return json.loads(content)
    except ValueError:
        return content


def _count(value: Any) -> int | None:
    return value if type(value) is int else None  # not a bool (an int subclass), nor any other type


# -- OpenAI chat completions ----------------------------------------------------------------------


class OpenAIChat(ChatAPI):
    name = "openai"
    path = "/chat/completions"

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {} if api_key is None else {"authorization": f"Bearer {api_key}"}

    def prompt_body(
        self,
        *,
        model: str,
        prompt: str,
        system: str | None,
        temperature: float | None,
        max_tokens: int | None,
    ) -> dict[str, Any]:
        messages = [] if system is None else [{"role": "system", "content": system}]
        body: dict[str, Any] = {"model": model, "messages": [*messages, {"role": "user", "content": prompt}]}
        if temperature is not None:
            body["temperature"] = temperature
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        return body

    def check(self, reply: Any) -> None:
        if not isinstance(reply["choices"][0]["message"], dict):
            raise TypeError("message is not an object")

    def content(self, reply: dict[str, Any]) -> Any:
        return reply["choices"][0]["message"].get("content")

    def reasoning(self, reply: dict[str, Any]) -> str | None:
        """OpenAI's chat completions send none; the servers that speak its API for reasoning
        models do, beside `content`: vLLM and DeepSeek `reasoning_content`, OpenRouter `reasoning`."""
        message = reply["choices"][0]["message"]
        for key in _OPENAI_REASONING:
            if isinstance(message.get(key), str) and message[key]:
                return str(message[key])
        return None

    def finish(self, reply: dict[str, Any]) -> Finish:
        choice = reply["choices"][0]
        message = choice["message"]
        raw = choice.get("finish_reason")
        refusal = message.get("refusal") if isinstance(message.get("refusal"), str) else None
        calls = message.get("tool_calls") or (
            [message["function_call"]] if message.get("function_call") else []
        )
        reason = reason_of(raw, _OPENAI_REASONS)
        # The message says more than the word: a refusal is sent with `stop`, and some servers
        # (vLLM, gateways) send tool calls with `stop` too. A cut stays a cut.
        if refusal:
            reason = FinishReason.REFUSAL
        elif calls and reason is not FinishReason.LENGTH:
            reason = FinishReason.TOOL_CALL
        return Finish(reason, raw if isinstance(raw, str) else None, list(calls) or None, refusal or None)

    def usage(self, reply: dict[str, Any]) -> Usage:
        raw = reply.get("usage") or {}
        completion_details = raw.get("completion_tokens_details") or {}
        prompt_details = raw.get("prompt_tokens_details") or {}
        return Usage(
            input_tokens=_count(raw.get("prompt_tokens")),
            output_tokens=_count(raw.get("completion_tokens")),
            reasoning_tokens=_count(completion_details.get("reasoning_tokens")),
            cached_tokens=_count(prompt_details.get("cached_tokens")),
        )

    def format_fields(self, response_format: ResponseFormat) -> dict[str, Any]:
        return {"response_format": response_format.model_dump(mode="json", exclude_none=True)}

    def structured(self, response_format: ResponseFormat, content: Any, finish: Finish) -> Any:
        return _parsed(content)

    def tool_fields(
        self, tools: list[FunctionTool], choice: ToolChoice | None, parallel: bool | None
    ) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "tools": [{"type": "function", "function": tool.model_dump(exclude_none=True)} for tool in tools]
        }
        if choice is not None:
            fields["tool_choice"] = (
                choice if isinstance(choice, str) else {"type": "function", "function": {"name": choice.name}}
            )
        if parallel is not None:
            fields["parallel_tool_calls"] = parallel
        return fields

    def assistant_turn(self, reply: dict[str, Any]) -> dict[str, Any]:
        """The message with its content and tool calls only (a server's own fields, such as
        `reasoning_content`, are not sent back)."""
        message = reply["choices"][0]["message"]
        calls = [
            {
                "id": call.get("id"),
                "type": "function",
                "function": {
                    "name": call["function"].get("name"),
                    "arguments": call["function"].get("arguments") or "{}",
                },
            }
            for call in message.get("tool_calls") or []
        ]
        turn: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        return {**turn, "tool_calls": calls} if calls else turn

    def tool_turns(self, results: list[ToolResult]) -> list[dict[str, Any]]:
        """A `tool` message per result (an error is said in its text: the API has no flag)."""
        return [{"role": "tool", "tool_call_id": r.call_id, "content": r.content} for r in results]

    def streamed(self, body: dict[str, Any]) -> dict[str, Any]:
        # Without `include_usage` a stream carries no usage at all: its tokens would be unknown.
        return {**body, "stream": True, "stream_options": {"include_usage": True}}

    def assembler(self) -> Assembler:
        return _OpenAIAssembler()


# Where OpenAI-compatible servers put a reply's reasoning (a message's, a stream delta's).
_OPENAI_REASONING = ("reasoning_content", "reasoning")

_OPENAI_REASONS = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_CALL,
    "function_call": FinishReason.TOOL_CALL,
    "content_filter": FinishReason.CONTENT_FILTER,
}


class _OpenAIAssembler(Assembler):
    """`data: {chat.completion.chunk}` events, then (asked for) one with `usage` and no choices,
    then `data: [DONE]`. A delta carries content, refusal or tool-call pieces (a tool call's
    `id` and name once, its `arguments` in pieces, by `index`)."""

    def __init__(self) -> None:
        self.done = False
        self._text: list[str] | None = None  # None until a delta carries content ("" included)
        self._refusal: list[str] = []
        self._reasoning: dict[str, list[str]] = {}
        self._calls: dict[int, dict[str, Any]] = {}
        self._head: dict[str, Any] = {}
        self._finish: str | None = None
        self._role = "assistant"
        self._usage: dict[str, Any] | None = None
        self._choices = 0

    def feed(self, data: str) -> bool:
        if data.strip() == "[DONE]":
            if not self._choices:
                raise StreamFailed(
                    "the stream ended without a reply (no choice before [DONE])", FailureKind.PROTOCOL
                )
            self.done = True
            return False
        chunk = json.loads(data)
        if error := chunk.get("error"):  # as the SDK: any error that is not empty, an object or a string
            said = error.get("message") if isinstance(error, dict) else error
            raise StreamFailed(
                f"stream error: {said if isinstance(said, str) and said else json.dumps(error)}",
                FailureKind.HTTP,
            )
        for key in ("id", "model", "created"):
            if key in chunk:
                self._head.setdefault(key, chunk[key])
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        token = False
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            self._choices += 1
            delta = choice.get("delta") or {}
            self._role = delta.get("role") or self._role
            if isinstance(delta.get("content"), str):
                self._text = [*(self._text or []), delta["content"]]
                token = token or bool(delta["content"])
            if isinstance(delta.get("refusal"), str):
                self._refusal.append(delta["refusal"])
            for key in _OPENAI_REASONING:
                if isinstance(delta.get(key), str):
                    self._reasoning.setdefault(key, []).append(delta[key])
            for piece in delta.get("tool_calls") or []:
                self._tool_call(piece)
            self._finish = choice.get("finish_reason") or self._finish
        return token

    def _tool_call(self, piece: dict[str, Any]) -> None:
        call = self._calls.setdefault(piece.get("index", len(self._calls)), {"function": {"arguments": ""}})
        for key in ("id", "type"):
            if piece.get(key):
                call[key] = piece[key]
        function = piece.get("function") or {}
        if function.get("name"):
            call["function"]["name"] = function["name"]
        call["function"]["arguments"] += function.get("arguments") or ""

    def reply(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": self._role,
            "content": None if self._text is None else "".join(self._text),
        }
        if self._refusal:
            message["refusal"] = "".join(self._refusal)
        for key, pieces in self._reasoning.items():
            message[key] = "".join(pieces)
        if self._calls:
            message["tool_calls"] = [self._calls[i] for i in sorted(self._calls)]
        reply = {
            **self._head,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish}],
        }
        if self._usage is not None:
            reply["usage"] = self._usage
        return reply


# -- Anthropic messages -------------------------------------------------------------------------


class AnthropicMessages(ChatAPI):
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
        uncached = _count(raw.get("input_tokens"))
        written = _count(raw.get("cache_creation_input_tokens"))
        read = _count(raw.get("cache_read_input_tokens"))
        return Usage(
            # Anthropic's `input_tokens` leaves out cache reads and writes; Assay's counts all input.
            input_tokens=None if uncached is None else uncached + (written or 0) + (read or 0),
            output_tokens=_count(raw.get("output_tokens")),
            cached_tokens=read,
            cache_write_tokens=written,
        )

    def format_fields(self, response_format: ResponseFormat) -> dict[str, Any]:
        """A schema's reply forced through a tool whose input is the object (the spec refuses
        `json_object`, which this API has no word for, and `response_format` beside `tools`)."""
        schema = response_format.json_schema
        if schema is None:
            raise ValueError("the Messages API takes a response_format of type json_schema only")
        tool = FunctionTool(
            name=schema.name,
            description=schema.description or "Give the answer as this tool's input.",
            parameters=schema.schema_,
        )
        return self.tool_fields([tool], NamedTool(name=schema.name), None)

    def structured(self, response_format: ResponseFormat, content: Any, finish: Finish) -> Any:
        """The forced tool's input; if the model answered in words instead, those parsed as JSON."""
        name = response_format.json_schema.name if response_format.json_schema else None
        for call in finish.tool_calls or []:
            if isinstance(call, dict) and call.get("name") == name:
                return call.get("input")
        return _parsed(content)

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


OPENAI = OpenAIChat()
APIS: dict[str, ChatAPI] = {api.name: api for api in (OPENAI, AnthropicMessages())}
"""The chat APIs by name (a judge's `provider`)."""
