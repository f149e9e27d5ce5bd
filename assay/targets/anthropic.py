"""The `anthropic` target: Anthropic's Messages API, natively, one call per item.

Natively, because its accounting does not fit the OpenAI shape: Anthropic reports cache reads
and cache writes apart from `input_tokens`, and bills writes above the input price
(`assay.calls.wire_anthropic.AnthropicMessages` reads them into Assay's token kinds). Model names must be
pinned: a moving alias is refused before the run starts (`model_pin_problem`). With `batch:`,
items go through the Message Batches API (`assay.targets._chat`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from assay.calls.conversation import anthropic_messages
from assay.calls.pinning import model_pin_problem
from assay.calls.wire_anthropic import AnthropicMessages, messages_body
from assay.spec import AnthropicTarget
from assay.spec.dataset import Item
from assay.targets._base import render
from assay.targets._chat import ChatTarget
from assay.targets._chat_kind import ChatKind
from assay.targets._kind import TargetContext


class AnthropicKind(ChatKind[AnthropicTarget]):
    """`kind: anthropic`: a pinned model; every prompt is rendered before anything runs."""

    name = "anthropic"
    # `cache_system` changes what a call costs, not what it answers.
    operational: ClassVar[frozenset[str]] = ChatKind.operational | {"cache_system"}
    adds_tool_prompt = True

    def problems(self, spec: AnthropicTarget, spec_dir: Path, where: str) -> list[str]:
        problem = model_pin_problem(spec.model)
        pinned = [] if problem is None else [f"{where}.model: {problem}"]
        return [*pinned, *super().problems(spec, spec_dir, where)]

    def open(self, spec: AnthropicTarget, context: TargetContext) -> AnthropicMessagesTarget:
        return AnthropicMessagesTarget(spec, concurrency=context.concurrency, context=context)


class AnthropicMessagesTarget(ChatTarget):
    """Renders the item's prompt and asks the model once (plus retries), or through a batch.

    Args:
        spec: the target spec.
        concurrency: the run's concurrency; the connection pool is as wide.
        context: the run (its store keeps batch mode's ledger).
    """

    def __init__(
        self, spec: AnthropicTarget, *, concurrency: int, context: TargetContext | None = None
    ) -> None:
        super().__init__(
            spec, AnthropicMessages(spec.anthropic_version), concurrency=concurrency, context=context
        )

    def request_body(
        self, item: Item, prompt: Any = None, history: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """The Messages request: the system prompt (top level), a session's earlier turns, then
        `prompt` (default: the item's rendered prompt) as the user's message; with `messages`, the
        item's conversation (`conversation`), its leading system turns lifted into `system`."""
        spec: AnthropicTarget = self._spec
        system = None if spec.system is None else render(spec.system, item)
        if spec.messages is None:
            messages = self.messages(item, prompt, history)
        else:
            system, messages = anthropic_messages(self.conversation(item, prompt, history), system)
        body = messages_body(
            model=spec.model,
            max_tokens=spec.max_tokens,
            messages=messages,
            system=system,
            cache_system=spec.cache_system,
            temperature=spec.temperature,
            stop_sequences=spec.stop_sequences,
        )
        return {**body, **self.request_fields} if self.request_fields else body
