"""A chat target that runs its model's tool calls itself (`tool_loop: true`, issue 26 §3b).

    Toolbox          the spec's `module:function` tools by name: runs one reply's calls at once,
                     each (sync in a thread, async on the loop) under `tool_timeout`; a call that
                     raises, times out, names no tool or whose arguments do not fit the
                     function's signature gives the model its error instead of a result
    run_tool_loop    ask the model; while it calls tools, run them, send the reply and the
                     results back (`ChatAPI.follow_up`) and ask again — until
                     it answers in words, or `max_tool_rounds` rounds were run and it still calls
                     (the item fails: `max_tool_rounds`)
    prompt_steps     the request's conversation as the trajectory's first steps

Every model call is the target's own `ChatClient.complete` (retries, rate control, budget,
capture, cache); the exchange becomes the item's trajectory in the steps scorers see
(`Sample.trajectory`: `{role, content, tool_calls}`, each result a `tool` step naming its call),
kept as `trajectory.json` as an agent's are (`assay trajectories export` writes it as ATIF).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pydantic_core
from pydantic import ValidationError, validate_call

from assay.calls.accounting import Usage
from assay.calls.chat import ChatReply
from assay.calls.finish import answer_calls
from assay.calls.messages import ToolCall, ToolResult
from assay.calls.wire import ChatAPI
from assay.errors import TargetFailure
from assay.outcomes import TOKEN_KINDS, FailureKind

# What a result longer than this says is cut: a tool's output goes to the model whole, but a
# trajectory is for people and scorers.
_SHOWN_ERROR = 2000


class Toolbox:
    """The functions a tool loop may run, by tool name.

    Args:
        functions: each tool's function (sync or async), by the name the model calls it.
        timeout: seconds one call may take. A sync function past it keeps its thread until it
            returns (Python cannot stop a thread): the model is told it timed out all the same.
    """

    def __init__(self, functions: dict[str, Callable[..., Any]], timeout: float) -> None:
        # Arguments are validated (and coerced, "3" to 3) by the function's own signature.
        self._checked = {name: validate_call(f) for name, f in functions.items()}
        self._is_async = {name: inspect.iscoroutinefunction(f) for name, f in functions.items()}
        self.timeout = timeout

    async def run(self, calls: list[ToolCall]) -> list[ToolResult]:
        """The results of one reply's calls, in its order (the calls run at once)."""
        return list(await asyncio.gather(*(self._one(n, call) for n, call in enumerate(calls))))

    async def _one(self, n: int, call: ToolCall) -> ToolResult:
        call_id = call.id or f"call_{n}"
        function = self._checked.get(call.name)
        if function is None:
            known = ", ".join(sorted(self._checked))
            return _error(call_id, f"there is no tool {call.name!r} (the tools: {known})")
        if not isinstance(call.arguments, dict):
            return _error(call_id, f"the arguments are not a JSON object: {str(call.arguments)[:200]!r}")
        try:
            if self._is_async[call.name]:
                value = await asyncio.wait_for(function(**call.arguments), self.timeout)
            else:
                value = await asyncio.wait_for(asyncio.to_thread(function, **call.arguments), self.timeout)
        except TimeoutError:
            return _error(call_id, f"the tool {call.name} timed out after {self.timeout:g} s")
        except ValidationError as exc:
            return _error(call_id, f"the arguments do not fit {call.name}: {exc}")
        except Exception as exc:  # noqa: BLE001 - the tool's own error is the model's to read
            return _error(call_id, f"{type(exc).__name__}: {exc}")
        return ToolResult(call_id=call_id, content=_text(value))


def _error(call_id: str, said: str) -> ToolResult:
    return ToolResult(call_id=call_id, content=f"Error: {said}"[:_SHOWN_ERROR], is_error=True)


def _text(value: Any) -> str:
    """A tool's return value as the model reads it: text as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return pydantic_core.to_json(value, fallback=str).decode()


@dataclass(slots=True)
class Exchange:
    """A tool loop that ended in an answer.

    Args:
        answer: the reply in words.
        replies: every reply, the answer last.
        steps: the whole exchange as trajectory steps.
        tool_calls: how many calls were run.
        usage: the replies' usage, summed.
    """

    answer: ChatReply
    replies: list[ChatReply]
    steps: list[dict[str, Any]]
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)


def summed(usages: list[Usage]) -> Usage:
    """The rounds' usage: a kind is known only when every round reported it (never guessed)."""
    counts: dict[str, int | None] = {}
    for kind in TOKEN_KINDS:
        values = [getattr(u, f"{kind}_tokens") for u in usages]
        counts[kind] = None if not values or None in values else sum(v for v in values if v is not None)
    return Usage.of_kinds(counts)


async def run_tool_loop(
    body: dict[str, Any],
    *,
    complete: Callable[[dict[str, Any]], Awaitable[ChatReply]],
    api: ChatAPI,
    toolbox: Toolbox,
    max_rounds: int,
    check: Callable[[dict[str, Any], ChatReply, list[ToolCall] | None], None],
    keep: Callable[[list[dict[str, Any]]], Awaitable[list[str] | None]],
    provider: str,
) -> Exchange:
    """Ask, run the calls, send the results back, until the model answers in words.

    Args:
        body: the first request.
        complete: the target's client's call.
        api: its wire format.
        toolbox: the tools it runs.
        max_rounds: the most rounds of calls run.
        check: raises the item's `TargetFailure` for a reply that is no answer (a refusal, a cut),
            told the reply's calls when it made some.
        keep: writes the steps where the item's trajectory is kept; returns its artifacts.
        provider: who answers, as a failure names it.

    Raises:
        TargetFailure: a call failed, a reply was no answer, or `max_rounds` rounds of calls
            were run and the model called again (`max_tool_rounds`); it carries every round's
            usage, the trajectory so far (kept) and every call the model made (`calls`).
    """
    steps = prompt_steps(*api.prompt_of(body))
    replies: list[ChatReply] = []
    called: list[ToolCall] = []
    calls_run = 0
    try:
        for round_number in range(max_rounds + 1):
            reply = await complete(body)
            replies.append(reply)
            calls = answer_calls(reply.finish.tool_calls or [])
            called += calls
            steps += _reply_steps(reply, calls)
            check(body, reply, calls or None)
            if not calls:
                return Exchange(reply, replies, steps, calls_run, summed([r.usage for r in replies]))
            if round_number == max_rounds:
                raise TargetFailure(
                    f"the model still called tools ({', '.join(c.name for c in calls)}) after "
                    f"{max_rounds} rounds of tool calls (max_tool_rounds)",
                    kind=FailureKind.MAX_TOOL_ROUNDS,
                    provider=provider,
                    request_id=reply.request_id,
                    finish_reason=None if reply.finish.reason is None else reply.finish.reason.value,
                    finish_reason_raw=reply.finish.raw,
                    sent=reply.finish.tool_calls,
                )
            results = await toolbox.run(calls)
            calls_run += len(results)
            steps += [_result_step(r) for r in results]
            assert reply.body is not None, "a reply from the client carries its body"
            body = api.follow_up(body, reply.body, results)
    except TargetFailure as failure:
        usages = [r.usage for r in replies]
        if isinstance(failure.usage, Usage) and (not replies or failure.usage is not replies[-1].usage):
            usages.append(failure.usage)  # a call that failed, after the replies before it
        if usages:
            failure.usage = summed(usages)
        failure.artifacts = [*(failure.artifacts or []), *(await keep(steps) or [])]
        failure.calls = called or failure.calls  # every call the loop saw, the failed reply's among them
        raise
    raise AssertionError("unreachable: the last round returns or raises")


def prompt_steps(system: Any, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A request's system prompt (where it stands apart: `ChatAPI.prompt_of`) and its messages,
    as steps; a part that is no text is named, not copied (an image's bytes have no place in a
    trajectory)."""
    steps = []
    if system:
        steps.append({"role": "system", "content": _said(system), "tool_calls": []})
    for message in messages:
        steps.append({"role": message["role"], "content": _said(message.get("content")), "tool_calls": []})
    return steps


def _said(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            texts.append(f"[{part.get('type', 'part') if isinstance(part, dict) else 'part'}]")
    return "\n\n".join(texts)


def _reply_steps(reply: ChatReply, calls: list[ToolCall]) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    if reply.reasoning:
        steps.append({"role": "reasoning", "content": reply.reasoning, "tool_calls": []})
    step: dict[str, Any] = {
        "role": "assistant",
        "content": reply.content if isinstance(reply.content, str) else _said(reply.content),
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls],
    }
    if reply.usage.input_tokens is not None or reply.usage.output_tokens is not None:
        step["tokens"] = {"input": reply.usage.input_tokens, "output": reply.usage.output_tokens}
    steps.append(step)
    return steps


def _result_step(result: ToolResult) -> dict[str, Any]:
    step: dict[str, Any] = {
        "role": "tool",
        "content": result.content,
        "tool_calls": [],
        "tool_call_id": result.call_id,
    }
    return {**step, "is_error": True} if result.is_error else step
