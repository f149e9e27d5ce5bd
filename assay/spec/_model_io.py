"""What a chat target's request asks of the model beyond its conversation (issue 26 §3–§5, §7):
the tools it offers and how the model may choose among them, what its reply must be (structured
output), how a reasoning model reasons, and any other field its server accepts (`params`).

    RequestFields       both chat kinds: tools, tool_choice, parallel_tool_calls, response_format, params
    ToolLoop            both chat kinds: tool_loop (Assay runs the Python tools and feeds their
                        results back), max_tool_rounds, tool_timeout
    OpenAIReasoning     `openai`: max_completion_tokens, reasoning_effort (and the families that
                        refuse `temperature` and `max_tokens`: `REASONING_MODELS`)
    AnthropicThinking   `anthropic`: thinking (extended thinking) and its rules

Each of these fields left unset is left out of the run's identity (`UNSET_OUTSIDE_IDENTITY`,
`assay.targets._chat.ChatKind.identity`), so a spec that sets none keeps the identity it had
before they existed.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from assay.calls.messages import FunctionTool, NamedTool, ResponseFormat, ToolChoice
from assay.spec._base import StrictModel

CALLABLE_REF = r"^[\w.]+:[\w.]+$"

ToolSpec = FunctionTool | Annotated[str, Field(pattern=CALLABLE_REF)]
"""A tool as a spec gives it: a function definition (`{name, description, parameters, strict}`),
or `module:function`, a Python callable whose signature and docstring give the definition
(`assay.calls.messages.function_tool`; the module relative to the spec's folder)."""

# OpenAI's reasoning models (o1, o3, o4-mini, gpt-5 but its `-chat` models) take neither a
# `temperature` but the default nor `max_tokens` (`max_completion_tokens` bounds their reply,
# reasoning included): said at validation rather than by the first 400. A name may carry a
# gateway's `provider/` prefix (`openai/o3`).
REASONING_MODELS = re.compile(r"(^|/)(o1|o3|o4-mini|gpt-5(?!-chat))([-.]|$)")

# The request fields Assay models, by kind, and the spec field that sets each: `params` may not
# set them behind the spec's back.
_MODELLED: dict[str, dict[str, str]] = {
    "common": {
        "model": "model",
        "messages": "prompt (and system)",
        "temperature": "temperature",
        "max_tokens": "max_tokens",
        "tools": "tools",
        "tool_choice": "tool_choice",
        "stream": "stream",
        "system": "system",
    },
    "openai": {
        "max_completion_tokens": "max_completion_tokens",
        "reasoning_effort": "reasoning_effort",
        "parallel_tool_calls": "parallel_tool_calls",
        "response_format": "response_format",
        "functions": "tools",
        "function_call": "tool_choice",
        "stream_options": "stream (usage is always asked for)",
        "seed": "the spec's top-level `seed`",
    },
    "anthropic": {
        "thinking": "thinking",
        "stop_sequences": "stop_sequences",
        "output_config": "response_format",
    },
}

UNSET_OUTSIDE_IDENTITY = frozenset(
    {
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "response_format",
        "params",
        "max_completion_tokens",
        "reasoning_effort",
        "thinking",
        "tool_loop",
        "max_tool_rounds",
        "tool_timeout",
    }
)
"""The fields of this module: left out of a run's identity while unset."""


class RequestFields(StrictModel):
    """What both chat kinds may ask beyond the conversation. With tools offered, a reply of tool
    calls is the item's answer (`items.tool_calls`, a scorer's `Sample.tool_calls`)."""

    tools: list[ToolSpec] | None = Field(default=None, min_length=1)
    """The functions the model may call: definitions `{name, description, parameters, strict}`
    (`parameters` a JSON schema of an object), or `module:function` references to Python
    callables (their signature and docstring give the definition). A reply of tool calls is then
    the item's answer."""
    tool_choice: ToolChoice | None = None
    """`auto` (the provider's default: call some or answer in words), `none`, `required` (call at
    least one) or `{name: f}` (call `f`). Needs `tools`."""
    parallel_tool_calls: bool | None = None
    """Whether the model may make several calls in one reply (OpenAI `parallel_tool_calls`;
    Anthropic `disable_parallel_tool_use` on the tool choice). Needs `tools`."""
    response_format: ResponseFormat | None = None
    """What the reply must be: `{type: json_schema, json_schema: {name, schema, strict}}` or
    `{type: json_object}` (OpenAI's JSON mode). The reply's JSON is parsed into the item's output
    (the `json_schema` scorer reads the object). On `anthropic`, only `json_schema`: the reply is
    forced through a tool whose input is the object."""
    params: dict[str, Any] | None = None
    """Any other field the server accepts, put into the request body as given (vLLM's `top_k`,
    `min_p`, `guided_json`, `chat_template_kwargs`; OpenRouter's `provider`); part of the run's
    identity. A field Assay models (`temperature`, `tools`, ...) is refused: set it by its own field."""

    @model_validator(mode="after")
    def _request_fields_agree(self) -> RequestFields:
        if self.tools is None:
            for name in ("tool_choice", "parallel_tool_calls"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} needs `tools`: the request offers the model none")
        else:
            names = [tool.name for tool in self.tools if isinstance(tool, FunctionTool)]
            if doubled := sorted({name for name in names if names.count(name) > 1}):
                raise ValueError(f"tools: {', '.join(doubled)} defined twice")
        kind = getattr(self, "kind", "common")
        modelled = {**_MODELLED["common"], **_MODELLED.get(kind, {})}
        for key in self.params or {}:
            if key in modelled:
                raise ValueError(f"params.{key}: Assay sets this field; use the target's `{modelled[key]}`")
        return self


DEFAULT_TOOL_ROUNDS = 8
"""`max_tool_rounds` when a tool loop leaves it unset."""
DEFAULT_TOOL_TIMEOUT = 30.0
"""`tool_timeout` (seconds) when a tool loop leaves it unset."""


class ToolLoop(StrictModel):
    """Assay running the model's tool calls itself (`tool_loop: true`): each call of a
    `module:function` tool is run (sync or async, under `tool_timeout`), its result sent back to
    the model, and the model asked again, until it answers in words. The whole exchange is the
    item's trajectory; every model call goes through the target's retries, rate control,
    budget, capture and cache."""

    tool_loop: bool | None = None
    """`true`: run the model's calls of the `tools` (every one a `module:function`) and feed their
    results back until the model answers in words; the answer is the item's output, the exchange
    its trajectory (`Sample.trajectory`, kept as `trajectory.json`). A tool that raises or times
    out sends the model its error. Not with `batch` (each round needs the last one's reply)."""
    max_tool_rounds: int | None = Field(default=None, ge=1, strict=True)
    """The most rounds of tool calls run for one item (default 8): a model still calling tools
    after them fails the item with `failure_kind` `max_tool_rounds`. Needs `tool_loop`."""
    tool_timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Seconds one tool call may take (default 30); past it the model is told the call timed
    out. Needs `tool_loop`."""

    @model_validator(mode="after")
    def _tool_loop_rules(self) -> ToolLoop:
        if not self.tool_loop:
            for name in ("max_tool_rounds", "tool_timeout"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} needs `tool_loop: true`: no tools are run")
            return self
        tools = getattr(self, "tools", None)
        if not tools:
            raise ValueError("tool_loop needs `tools`: `module:function` references for Assay to run")
        defined = [f"tools.{n} ({t.name})" for n, t in enumerate(tools) if isinstance(t, FunctionTool)]
        if defined:
            raise ValueError(
                f"{', '.join(defined)}: tool_loop runs Python tools; give each as `module:function`"
            )
        choice = getattr(self, "tool_choice", None)
        if choice == "required" or isinstance(choice, NamedTool):
            raise ValueError(
                "tool_loop with a tool_choice that forces a call: the model could never answer in words"
            )
        if getattr(self, "batch", None) is not None:
            raise ValueError("tool_loop cannot be combined with batch: each round needs the last one's reply")
        return self


class OpenAIReasoning(StrictModel):
    """An OpenAI reasoning model's settings (o-series, gpt-5): `REASONING_MODELS` says which
    refuse `temperature` and `max_tokens`."""

    max_completion_tokens: int | None = Field(default=None, ge=1, strict=True)
    """The reply's limit, its reasoning tokens included: what OpenAI's reasoning models take in
    place of `max_tokens` (which they refuse)."""
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    """How hard a reasoning model thinks before it answers."""

    @model_validator(mode="after")
    def _reasoning_rules(self) -> OpenAIReasoning:
        model: str = getattr(self, "model", "")
        if self.max_completion_tokens is not None and getattr(self, "max_tokens", None) is not None:
            raise ValueError(
                "give one of max_tokens and max_completion_tokens (the newer bounds reasoning too)"
            )
        if REASONING_MODELS.search(model):
            if getattr(self, "temperature", None) not in (None, 1):
                raise ValueError(
                    f"{model} is a reasoning model: it refuses a temperature but the default (leave it unset)"
                )
            if getattr(self, "max_tokens", None) is not None:
                raise ValueError(
                    f"{model} is a reasoning model: it refuses max_tokens; use max_completion_tokens"
                )
        return self


class ThinkingSettings(StrictModel):
    """Anthropic's extended thinking (`thinking: {type: enabled, budget_tokens}`)."""

    budget_tokens: int = Field(ge=1024, strict=True)
    """The tokens the model may think with, at least 1024 and below `max_tokens` (thinking
    counts against it)."""


class AnthropicThinking(StrictModel):
    """Extended thinking on `anthropic`, and the rules the API holds it to."""

    thinking: ThinkingSettings | None = None
    """`{budget_tokens: N}`: let the model think first. The API then refuses a `temperature`,
    a `max_tokens` not above the budget, and a tool choice that forces a call (`required`, a
    named tool, or a `response_format` that is not `strict`, which forces one)."""

    @model_validator(mode="after")
    def _thinking_rules(self) -> AnthropicThinking:
        if self.thinking is None:
            return self
        budget = self.thinking.budget_tokens
        if getattr(self, "temperature", None) is not None:
            raise ValueError("thinking refuses a temperature: leave it unset")
        if getattr(self, "max_tokens", 0) <= budget:
            raise ValueError(f"thinking needs max_tokens above its budget_tokens ({budget})")
        choice = getattr(self, "tool_choice", None)
        shaped = getattr(self, "response_format", None)
        forced_shape = shaped is not None and not (shaped.json_schema and shaped.json_schema.strict)
        if choice == "required" or isinstance(choice, NamedTool) or forced_shape:
            raise ValueError(
                "thinking refuses a forced tool call (tool_choice required or named, a response_format "
                "that is not strict: `strict: true` asks for the native structured output)"
            )
        return self
