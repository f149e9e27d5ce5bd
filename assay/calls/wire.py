"""What each provider's chat API looks like on the wire, for `assay.calls.chat.ChatClient`.

    OpenAIChat          `POST {base_url}/chat/completions`, `Authorization: Bearer <key>`;
                        usage `prompt_tokens` (cache reads among them) and `completion_tokens`
    AnthropicMessages   `POST {base_url}/messages`, `x-api-key` and `anthropic-version`; usage
                        `input_tokens` (cache reads and writes *not* among them),
                        `cache_creation_input_tokens`, `cache_read_input_tokens`, `output_tokens`

Each says where a request goes and with which headers, whether a reply has the shape it should,
what its content and token usage are, and how a streamed reply (Server-Sent Events) is assembled
back into the reply the same request would have had unstreamed — so caching, capture and
accounting see one shape whether a call streamed or not.

Usage is read into Assay's one meaning of the token kinds (`assay.outcomes.TokenKind`):
`input` counts all input tokens; `cached` (cache reads) and `cache_write` are parts of it.
A count the provider did not send stays None: tokens are never guessed.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from assay.calls.accounting import Usage
from assay.outcomes import FailureKind

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
        """Raise `KeyError`, `IndexError` or `TypeError` when `reply` lacks what `content` reads."""

    @abstractmethod
    def content(self, reply: dict[str, Any]) -> Any:
        """The answer's content."""

    @abstractmethod
    def usage(self, reply: dict[str, Any]) -> Usage:
        """The reply's token usage."""

    @abstractmethod
    def streamed(self, body: dict[str, Any]) -> dict[str, Any]:
        """The request body asking for a stream (with usage in it, where that must be asked for)."""

    @abstractmethod
    def assembler(self) -> Assembler:
        """A new assembler for one streamed reply."""


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
        reply["choices"][0]["message"]

    def content(self, reply: dict[str, Any]) -> Any:
        return reply["choices"][0]["message"].get("content")

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

    def streamed(self, body: dict[str, Any]) -> dict[str, Any]:
        # Without `include_usage` a stream carries no usage at all: its tokens would be unknown.
        return {**body, "stream": True, "stream_options": {"include_usage": True}}

    def assembler(self) -> Assembler:
        return _OpenAIAssembler()


class _OpenAIAssembler(Assembler):
    """`data: {chat.completion.chunk}` events, then (asked for) one with `usage` and no choices,
    then `data: [DONE]`."""

    def __init__(self) -> None:
        self.done = False
        self._text: list[str] = []
        self._head: dict[str, Any] = {}
        self._finish: str | None = None
        self._role = "assistant"
        self._usage: dict[str, Any] | None = None

    def feed(self, data: str) -> bool:
        if data.strip() == "[DONE]":
            self.done = True
            return False
        chunk = json.loads(data)
        if isinstance(chunk.get("error"), dict):
            error = chunk["error"]
            raise StreamFailed(f"stream error: {error.get('message') or json.dumps(error)}", FailureKind.HTTP)
        for key in ("id", "model", "created"):
            if key in chunk:
                self._head.setdefault(key, chunk[key])
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        token = False
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            self._role = delta.get("role") or self._role
            if delta.get("content"):
                self._text.append(delta["content"])
                token = True
            self._finish = choice.get("finish_reason") or self._finish
        return token

    def reply(self) -> dict[str, Any]:
        message = {"role": self._role, "content": "".join(self._text)}
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


class _AnthropicAssembler(Assembler):
    """`message_start` (the message, its input usage), `content_block_start` / `_delta` / `_stop`
    per block, `message_delta` (stop reason, cumulative usage), `message_stop`; `ping`s between,
    and an `error` event when the stream fails."""

    def __init__(self) -> None:
        self.done = False
        self._message: dict[str, Any] = {}
        self._blocks: dict[int, dict[str, Any]] = {}

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
        elif kind == "message_delta":
            self._message.update(event.get("delta") or {})
            # Its usage is cumulative: each count given replaces the one before.
            self._message.setdefault("usage", {}).update(event.get("usage") or {})
        elif kind == "message_stop":
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

    def reply(self) -> dict[str, Any]:
        return {**self._message, "content": [self._blocks[i] for i in sorted(self._blocks)]}


OPENAI = OpenAIChat()
APIS: dict[str, ChatAPI] = {api.name: api for api in (OPENAI, AnthropicMessages())}
"""The chat APIs by name (a judge's `provider`)."""
