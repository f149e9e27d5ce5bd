"""How a model's reply ended, and whether that makes it no answer at all.

    Finish          why the model stopped, in one word over providers (`FinishReason`) and its
                    own, with the tool calls and refusal the reply held (`ChatAPI.finish` reads it)
    answer_calls    a reply's tool calls, in the one vocabulary (`ToolCall`), when they are its answer
    not_an_answer   a refusal (or a content filter's), a reply cut by the length limit, a tool
                    call though the request offered no tools: the failure each is

A chat target fails such an item with that kind (`refusal`, `length`, `unasked_tool_call`) rather
than store an empty answer to score (`assay.targets._chat`). The rule is "a tool call when none
was asked for": once a request offers tools, a tool call is its answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from assay.calls.messages import ToolCall
from assay.outcomes import FailureKind, FinishReason


@dataclass(frozen=True, slots=True)
class Finish:
    """How a reply ended.

    Args:
        reason: in one word over providers; None when the provider sent none.
        raw: the provider's own word (`finish_reason`, `stop_reason`); None when it sent none.
        tool_calls: the tool calls the model made, as the provider sent them; None for none.
        refusal: the refusal the model wrote (OpenAI's `message.refusal`); None for none.
    """

    reason: FinishReason | None
    raw: str | None
    tool_calls: list[Any] | None = None
    refusal: str | None = None


def reason_of(raw: Any, words: dict[str, FinishReason]) -> FinishReason | None:
    """A provider's word as a `FinishReason`, by its table `words`; one it does not list is `other`."""
    if raw is None:
        return None
    return words.get(raw, FinishReason.OTHER) if isinstance(raw, str) else FinishReason.OTHER


def not_an_answer(finish: Finish, *, tools_asked: bool) -> tuple[FailureKind, str] | None:
    """Whether a reply is no answer at all, and if so the failure it is: its kind and what to
    say. A refusal (or a content filter's), a reply cut by the length limit and a tool call when
    the request offered no tools are not answers; with tools asked for, a tool call is one.

    Args:
        finish: how the reply ended (`ChatAPI.finish`).
        tools_asked: whether the request offered the model tools (`ChatAPI.tools_asked`).
    """
    said = f" ({finish.raw})" if finish.raw else ""
    if finish.reason is FinishReason.REFUSAL:
        return FailureKind.REFUSAL, f"the model refused to answer{said}"
    if finish.reason is FinishReason.CONTENT_FILTER:
        return FailureKind.REFUSAL, f"the provider's content filter withheld the answer{said}"
    if finish.reason is FinishReason.LENGTH:
        return FailureKind.LENGTH, f"the reply was cut off by the length limit (max_tokens){said}"
    if finish.reason is FinishReason.TOOL_CALL and not tools_asked:
        names = sorted({name for call in finish.tool_calls or [] if (name := _tool_name(call))})
        return (
            FailureKind.UNASKED_TOOL_CALL,
            f"the model called a tool ({', '.join(names) or 'unnamed'}) but the request offered none{said}",
        )
    return None


def answer_calls(calls: list[Any]) -> list[ToolCall]:
    """A reply's tool calls as its answer, in the order made: OpenAI's `{id, function: {name,
    arguments}}` (the arguments JSON text, parsed; kept as written when it is not JSON) and
    Anthropic's `tool_use` blocks `{id, name, input}`."""
    answer = []
    for call in calls:
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        if isinstance(function, dict):  # OpenAI's (or its deprecated `function_call`: the call itself)
            arguments: Any = function.get("arguments")
        else:
            function, arguments = call, call.get("input", call.get("arguments"))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                pass  # what the model wrote: a scorer fails it rather than guess
        call_id = call.get("id")
        answer.append(
            ToolCall(
                name=str(function.get("name") or ""),
                arguments=arguments,
                id=call_id if isinstance(call_id, str) else None,
            )
        )
    return answer


def _tool_name(call: Any) -> str | None:
    """A tool call's name: OpenAI's `function.name`, Anthropic's `name`."""
    if not isinstance(call, dict):
        return None
    function = call.get("function")
    name = function.get("name") if isinstance(function, dict) else call.get("name")
    return name if isinstance(name, str) else None
