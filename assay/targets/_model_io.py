"""The request fields a chat target adds to every body beyond its conversation (the spec's
`tools`, `tool_choice`, `parallel_tool_calls`: `assay.spec._model_io`), on its API's wire, and
how a reply of tool calls becomes the item's answer (the text beside the calls kept apart).

A tool given as `module:function` is resolved relative to the spec's folder, as a `python`
target's function is, and described by its signature and docstring (`function_tool`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from assay.calls.finish import Finish, answer_calls
from assay.calls.messages import FunctionTool, NamedTool, ToolCall, function_tool
from assay.calls.wire import ChatAPI
from assay.evaluators._imports import resolve_callable


def resolve_tools(spec: Any, spec_dir: str | Path | None) -> list[FunctionTool]:
    """The spec's tools as definitions, in the order given.

    Raises:
        ValueError: naming the tool, when a `module:function` does not import or cannot be a
            tool, or when two tools share a name.
    """
    tools: list[FunctionTool] = []
    for n, tool in enumerate(spec.tools or []):
        if isinstance(tool, FunctionTool):
            tools.append(tool)
            continue
        try:
            tools.append(function_tool(resolve_callable(tool, None if spec_dir is None else str(spec_dir))))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"tools.{n}: {exc}") from None
    names = [tool.name for tool in tools]
    if doubled := sorted({name for name in names if names.count(name) > 1}):
        raise ValueError(f"tools: {', '.join(doubled)} defined twice")
    choice = spec.tool_choice
    if isinstance(choice, NamedTool) and choice.name not in names:
        raise ValueError(f"tool_choice: {choice.name!r} is none of the tools ({', '.join(names)})")
    return tools


def tool_functions(spec: Any, spec_dir: str | Path | None) -> dict[str, Callable[..., Any]]:
    """The spec's `module:function` tools' functions, by the name the model calls each (a tool
    loop's; `resolve_tools` has checked they resolve)."""
    folder = None if spec_dir is None else str(spec_dir)
    functions = [resolve_callable(tool, folder) for tool in spec.tools or [] if isinstance(tool, str)]
    return {function_tool(function).name: function for function in functions}


def tool_problems(spec: Any, spec_dir: Path, where: str) -> list[str]:
    """Why the spec's tools cannot be offered, each line naming its field; empty when they can."""
    try:
        resolve_tools(spec, spec_dir)
    except ValueError as exc:
        return [f"{where}.{exc}"]
    return []


def request_fields(spec: Any, api: ChatAPI, spec_dir: str | Path | None) -> dict[str, Any]:
    """The fields every request of the target carries beyond its conversation, on `api`'s wire;
    empty for a spec that sets none (a plain prompt pays nothing)."""
    fields: dict[str, Any] = {}
    if spec.tools:
        fields |= api.tool_fields(resolve_tools(spec, spec_dir), spec.tool_choice, spec.parallel_tool_calls)
    if spec.response_format is not None:
        fields |= api.format_fields(spec.response_format)
    for name in ("max_completion_tokens", "reasoning_effort"):  # openai's
        if getattr(spec, name, None) is not None:
            fields |= api.option_fields(name, getattr(spec, name))
    if getattr(spec, "thinking", None) is not None:  # anthropic's
        fields["thinking"] = {"type": "enabled", "budget_tokens": spec.thinking.budget_tokens}
    return fields | (spec.params or {})


def reply_limit(spec: Any) -> int | None:
    """The most tokens one reply may take: `max_completion_tokens` (an OpenAI reasoning model's,
    its reasoning included) or `max_tokens`; None when unbounded."""
    limit = getattr(spec, "max_completion_tokens", None)
    return limit if limit is not None else spec.max_tokens


def text_beside(content: Any, calls: list[ToolCall] | None) -> str | None:
    """The text a reply held beside the tool calls that are its answer (kept, never scored: the
    calls are the answer); None when it held none or the calls are not the answer."""
    return content if calls and isinstance(content, str) and content.strip() else None


def answer_of(
    spec: Any, api: ChatAPI, content: Any, finish: Finish, tools_asked: bool
) -> tuple[Any, list[ToolCall] | None]:
    """A reply's answer, and its tool calls when they are that answer: with `response_format`,
    the object it holds (parsed); with tools offered and calls made, the calls (as JSON objects);
    else its content."""
    response_format = spec.response_format
    if response_format is not None and response_format.structured:
        return api.structured(response_format, content, finish), None
    if not tools_asked or not finish.tool_calls:
        return content, None
    calls = answer_calls(finish.tool_calls)
    if not calls:
        return content, None
    return [call.model_dump(mode="json") for call in calls], calls
