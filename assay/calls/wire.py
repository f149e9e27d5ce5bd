"""What a chat API is on the wire, for `assay.calls.chat.ChatClient`: the `ChatAPI` each provider's
wire format implements, the stream `Assembler`, and the readings they share.

    wire_openai         `OpenAIChat`: `POST {base_url}/chat/completions`, `Authorization: Bearer <key>`
    wire_anthropic      `AnthropicMessages`: `POST {base_url}/messages`, `x-api-key`, `anthropic-version`
    responses           `ResponsesAPI`: `POST {base_url}/responses` (`api: responses`)
    apis                the chat APIs by name (a judge's `provider`)

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
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from assay.calls.accounting import Usage
from assay.calls.finish import Finish
from assay.calls.messages import FunctionTool, ResponseFormat, ToolChoice, ToolResult
from assay.outcomes import FailureKind


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
    def follow_up(
        self, body: dict[str, Any], reply: dict[str, Any], results: list[ToolResult]
    ) -> dict[str, Any]:
        """A tool loop's next request: `body` with the reply of tool calls and the calls' results
        after its conversation."""

    @abstractmethod
    def prompt_of(self, body: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
        """A request's system prompt where it stands apart from the conversation (None where it
        is a turn of it), and the conversation's turns (`{role, content}`, ...)."""

    @abstractmethod
    def streamed(self, body: dict[str, Any]) -> dict[str, Any]:
        """The request body asking for a stream (with usage in it, where that must be asked for)."""

    @abstractmethod
    def assembler(self) -> Assembler:
        """A new assembler for one streamed reply."""


def parsed_json(content: Any) -> Any:
    """Text parsed as JSON; text that does not parse (or no text), as it is."""
    if not isinstance(content, str):
        return content
    try:
        return json.loads(content)
    except ValueError:
        return content


def token_count(value: Any) -> int | None:
    """A count as the provider sent it; None for anything that is not an int."""
    return value if type(value) is int else None  # not a bool (an int subclass), nor any other type


def bearer_headers(api_key: str | None) -> dict[str, str]:
    """OpenAI's `Authorization: Bearer <key>` (none without a key: a local server may need none)."""
    return {} if api_key is None else {"authorization": f"Bearer {api_key}"}


def openai_usage(raw: Any, input_word: str, output_word: str) -> Usage:
    """OpenAI's usage object, whose two APIs name its counts apart (`prompt`/`completion` on chat
    completions, `input`/`output` on the Responses API) and shape them alike: `<word>_tokens`,
    cache reads among the input's (`<input>_tokens_details.cached_tokens`), reasoning among the
    output's (`<output>_tokens_details.reasoning_tokens`)."""
    raw = raw if isinstance(raw, dict) else {}
    input_details = raw.get(f"{input_word}_tokens_details") or {}
    output_details = raw.get(f"{output_word}_tokens_details") or {}
    return Usage(
        input_tokens=token_count(raw.get(f"{input_word}_tokens")),
        output_tokens=token_count(raw.get(f"{output_word}_tokens")),
        reasoning_tokens=token_count(output_details.get("reasoning_tokens")),
        cached_tokens=token_count(input_details.get("cached_tokens")),
    )


class MessagesAPI(ChatAPI):
    """A chat API whose conversation is the request's `messages` (chat completions, Anthropic's
    Messages): a tool loop appends the assistant's reply and the results' messages to it."""

    @abstractmethod
    def assistant_turn(self, reply: dict[str, Any]) -> dict[str, Any]:
        """A reply of tool calls as the assistant's message of the next request (a tool loop's)."""

    @abstractmethod
    def tool_turns(self, results: list[ToolResult]) -> list[dict[str, Any]]:
        """The messages that send the results of a reply's tool calls back to the model."""

    def follow_up(
        self, body: dict[str, Any], reply: dict[str, Any], results: list[ToolResult]
    ) -> dict[str, Any]:
        messages = [*body["messages"], self.assistant_turn(reply), *self.tool_turns(results)]
        return {**body, "messages": messages}

    def prompt_of(self, body: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
        return body.get("system"), body["messages"]  # Anthropic's system prompt is top-level
