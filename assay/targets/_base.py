"""What every target returns, the protocols it follows, and the prompt templates they share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from assay.calls.accounting import Usage
from assay.calls.messages import ToolCall
from assay.spec.dataset import Item


def render(template: str, item: Item) -> str:
    """Format a prompt template over the item's fields (and `{input}`)."""
    return template.format_map({**item.fields, "input": item.input})


# Not frozen: one is made per item, and a frozen one costs three times as much.
@dataclass(slots=True)
class TargetResult:
    """One successful target call.

    Args:
        output: what the target answered (a chat model's reply of tool calls, when they are its
            answer: those calls as JSON objects).
        model: the model that answered, as the provider named it.
        usage: measured token usage.
        wire_ms: time of the attempt that succeeded, on the wire.
        first_token_ms: for a streamed model call, the time to its first answer token.
        retry_ms: time spent before it, in failed attempts and backoff.
        retries: how many attempts failed before it.
        finish_reason: why a model stopped (an `assay.outcomes.FinishReason` word), where known.
        finish_reason_raw: the provider's own word for it.
        caller_cost: cost the target's own code reported (kept apart from measured cost).
        caller_metadata: metadata the target's own code reported.
        caller_reserved: what it reported under reserved keys (model, tokens, usage, cost, …),
            kept apart from both measured figures and plain metadata.
        artifacts: files kept for the attempt, relative to the run's artifacts partition.
        sandbox: a container attempt's facts (image id, exit code, stage timings).
        trajectory: the agent's steps, as scorers see them (`Sample.trajectory`).
        steps: how many steps an agent took, where known (stored as the `gauge.steps` gauge).
        tool_calls: how many tool calls those steps made, where known (`gauge.tool_calls`).
        calls: a chat model's tool calls, when they are its answer (the request offered tools):
            stored as `items.tool_calls`, seen by scorers as `Sample.tool_calls`.
        tool_call_text: the text the reply held beside those calls (`items.tool_call_text`).
        reasoning: a reasoning model's reasoning text or summary, kept apart from the output
            (`items.reasoning`): scorers see the output only.
    """

    output: Any
    model: str | None = None
    usage: Usage | None = None
    wire_ms: float | None = None
    first_token_ms: float | None = None
    retry_ms: float = 0.0
    retries: int = 0
    finish_reason: str | None = None
    finish_reason_raw: str | None = None
    caller_cost: float | None = None
    caller_metadata: dict[str, Any] | None = None
    caller_reserved: dict[str, Any] | None = None
    artifacts: list[str] | None = None
    sandbox: dict[str, Any] | None = None
    trajectory: list[dict[str, Any]] | None = None
    steps: int | None = None
    tool_calls: int | None = None
    calls: list[ToolCall] | None = None
    tool_call_text: str | None = None
    reasoning: str | None = None


class Target(Protocol):
    """Answers one item. Raises `assay.errors.TargetFailure` for a failure that is data.
    `instrumented`: whether its model calls are measured (else its spend is `uninstrumented`)."""

    instrumented: bool

    async def __call__(self, item: Item, trial: int) -> TargetResult: ...

    async def aclose(self) -> None: ...


class SandboxedTarget(Protocol):
    """A target whose attempts live in a sandbox that scorers may use: `begin()` runs the attempt
    and returns it alive (`assay.targets.container.attempt.ContainerAttempt`); the executor scores
    it, then calls its `close()`. What a kind's targets are is its `TargetKind.live_attempts`."""

    instrumented: bool

    async def begin(self, item: Item, trial: int) -> Any: ...

    async def aclose(self) -> None: ...


@dataclass(slots=True)
class SessionState:
    """What a target needs to continue one session (`assay.run.sessions`): the session's id and its
    completed prompts and answers so far, as chat messages (`{"role": "user" | "assistant",
    "content": ...}`). The session layer appends to `history`; targets only read it.

    Args:
        session_id: the session's id (an `http_agent` harness receives it as `session_id`).
        history: the completed turns so far, oldest first.
    """

    session_id: str
    history: list[dict[str, Any]] = field(default_factory=list)


class SessionTarget(Target, Protocol):
    """A target that can hold a multi-turn session (every built-in kind)."""

    def item_prompt(self, item: Item) -> Any:
        """The item's first prompt: what a session without a policy sends with `start`."""
        ...

    async def turn(self, item: Item, trial: int, prompt: Any, session: SessionState) -> TargetResult:
        """Send one prompt in `session`; raises `TargetFailure` like `__call__`."""
        ...
