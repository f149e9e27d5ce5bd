"""OpenAI's chat completions on the wire (`POST {base_url}/chat/completions`, `Authorization:
Bearer <key>`): usage `prompt_tokens` (cache reads among them) and `completion_tokens` (reasoning
among them).

Streams are read as the official SDK reads them: an event whose `error` is anything but empty is
a failure (a string as much as an object); a stream that carried no reply at all (only
`data: [DONE]`) is one too.
"""

from __future__ import annotations

import json
from typing import Any

from assay.calls.accounting import Usage
from assay.calls.finish import Finish, reason_of
from assay.calls.messages import FunctionTool, ResponseFormat, ToolChoice, ToolResult
from assay.calls.wire import Assembler, MessagesAPI, StreamFailed, bearer_headers, openai_usage, parsed_json
from assay.outcomes import FailureKind, FinishReason


class OpenAIChat(MessagesAPI):
    name = "openai"
    path = "/chat/completions"

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
        return openai_usage(reply.get("usage"), "prompt", "completion")

    def format_fields(self, response_format: ResponseFormat) -> dict[str, Any]:
        return {"response_format": response_format.model_dump(mode="json", exclude_none=True)}

    def structured(self, response_format: ResponseFormat, content: Any, finish: Finish) -> Any:
        return parsed_json(content)

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


OPENAI = OpenAIChat()
"""OpenAI's chat completions (the `openai` target's default API)."""
