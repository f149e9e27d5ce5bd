"""The `openai` target: any OpenAI-compatible chat-completions endpoint, one call per item; with
`api: responses`, OpenAI's Responses API (`assay.calls.responses`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from assay.calls.conversation import openai_messages
from assay.calls.responses import RESPONSES, responses_input
from assay.calls.wire_openai import OPENAI
from assay.spec import OpenAITarget
from assay.spec.dataset import Item
from assay.targets._base import render
from assay.targets._chat import ChatTarget
from assay.targets._chat_kind import ChatKind
from assay.targets._kind import TargetContext


class OpenAIKind(ChatKind[OpenAITarget]):
    """`kind: openai`: every prompt is rendered before anything runs; its calls are measured."""

    name = "openai"

    def identity(self, spec: OpenAITarget, spec_dir: Path | None = None) -> dict[str, Any]:
        """As every chat kind's; `api` only when it is not the default (chat completions), so a
        spec that does not name it keeps the identity it had before it existed."""
        identity = super().identity(spec, spec_dir)
        if identity.get("api") == "chat_completions":
            del identity["api"]
        return identity

    def open(self, spec: OpenAITarget, context: TargetContext) -> OpenAIChatTarget:
        return OpenAIChatTarget(spec, concurrency=context.concurrency, seed=context.seed, context=context)


class OpenAIChatTarget(ChatTarget):
    """Renders the item's prompt and asks the model once (plus retries).

    Args:
        spec: the target spec.
        concurrency: the run's concurrency; the connection pool is as wide.
        seed: sent as `seed` so providers that support it sample repeatably.
        context: the run (its store keeps batch mode's ledger).
    """

    def __init__(
        self, spec: OpenAITarget, *, concurrency: int, seed: int, context: TargetContext | None = None
    ) -> None:
        api = RESPONSES if spec.api == "responses" else OPENAI
        super().__init__(spec, api, concurrency=concurrency, context=context)
        self._seed = seed

    def request_body(
        self, item: Item, prompt: Any = None, history: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """The chat request: the system prompt (if any), a session's earlier turns, then `prompt`
        (default: the item's rendered prompt) as the user's message; with `messages`, the item's
        conversation (`conversation`) in its place."""
        if self._spec.api == "responses":
            return self._responses_body(item, prompt, history)
        messages = []
        if self._spec.system is not None:
            messages.append({"role": "system", "content": render(self._spec.system, item)})
        if self._spec.messages is None:
            messages += self.messages(item, prompt, history)
        else:
            messages += openai_messages(self.conversation(item, prompt, history))
        body: dict[str, Any] = {"model": self._spec.model, "messages": messages, "seed": self._seed}
        if self._spec.temperature is not None:
            body["temperature"] = self._spec.temperature
        if self._spec.max_tokens is not None:
            body["max_tokens"] = self._spec.max_tokens
        body.update(self.request_fields)
        return body

    def _responses_body(
        self, item: Item, prompt: Any, history: list[dict[str, Any]] | None
    ) -> dict[str, Any]:
        """The same request on the Responses API: the system prompt as `instructions`, the
        conversation as `input` (no `seed`: the API takes none)."""
        if self._spec.messages is None:
            conversation = self.messages(item, prompt, history)
        else:
            conversation = responses_input(self.conversation(item, prompt, history))
        body = RESPONSES.body(
            model=self._spec.model,
            instructions=None if self._spec.system is None else render(self._spec.system, item),
            input=conversation,
            temperature=self._spec.temperature,
            max_output_tokens=self._spec.max_tokens,
        )
        body.update(self.request_fields)
        return body
