"""What the two chat-model kinds (`openai`, `anthropic`) share: prompts rendered and checked
before anything runs, metered calls, and a target that asks its model once per item — or once
per turn of a session, with the conversation so far."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from assay.calls.chat import ChatClient
from assay.spec.dataset import Item
from assay.targets._base import SessionState, TargetResult, render
from assay.targets._kind import Metered, TargetKind

# More lines than this about unfillable templates add nothing: the first show the pattern.
_MAX_PROBLEMS = 20


class ChatSpec(Protocol):
    """The fields a chat target's spec has."""

    model: str
    prompt: str
    system: str | None
    max_tokens: int | None


S = TypeVar("S", bound=BaseModel)


class ChatKind(TargetKind[S]):
    """A chat model's kind: every prompt is rendered before anything runs; its calls are measured."""

    def item_problems(self, spec: S, items: list[Item], where: str) -> list[str]:
        """Render every prompt once, so a template naming a missing field fails before anything runs."""
        chat: ChatSpec = spec  # type: ignore[assignment]
        problems = []
        for field_name, template in (("prompt", chat.prompt), ("system", chat.system)):
            if template is None:
                continue
            for item in items:
                try:
                    render(template, item)
                except (KeyError, IndexError, ValueError) as exc:
                    problems.append(
                        f"item {item.item_index} (id {item.item_id!r}): {where}.{field_name} {template!r} "
                        f"cannot be filled: {type(exc).__name__} {exc}"
                    )
                if len(problems) >= _MAX_PROBLEMS:
                    break
        return problems

    def metered(self, spec: S) -> Metered:
        chat: ChatSpec = spec  # type: ignore[assignment]
        templates = [t for t in (chat.prompt, chat.system) if t is not None]
        return Metered(chat.model, chat.max_tokens, lambda item: [render(t, item) for t in templates])


class ChatTarget(ABC):
    """Renders the item's prompt and asks the model once (plus retries); a session's turns carry
    the conversation so far. A kind says how its request body looks (`request_body`).

    Args:
        spec: the target spec.
        client: the chat client it asks through.
    """

    instrumented = True

    def __init__(self, spec: Any, client: ChatClient) -> None:
        self._spec = spec
        self._client = client

    @abstractmethod
    def request_body(
        self, item: Item, prompt: Any = None, history: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """The request: the system prompt (if any), a session's earlier turns, then `prompt`
        (default: the item's rendered prompt) as the user's message."""

    def messages(self, item: Item, prompt: Any, history: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
        """A session's earlier turns, then `prompt` (default: the item's) as the user's message."""
        content = render(self._spec.prompt, item) if prompt is None else prompt
        return [*(history or []), {"role": "user", "content": content}]

    def item_prompt(self, item: Item) -> str:
        return render(self._spec.prompt, item)

    async def __call__(self, item: Item, trial: int) -> TargetResult:
        return await self._ask(self.request_body(item))

    async def turn(self, item: Item, trial: int, prompt: Any, session: SessionState) -> TargetResult:
        """One prompt of a session: the conversation so far is sent with it, so the model sees
        every earlier prompt and answer."""
        return await self._ask(self.request_body(item, prompt, session.history))

    async def _ask(self, body: dict[str, Any]) -> TargetResult:
        reply = await self._client.complete(body)
        return TargetResult(
            output=reply.content,
            model=reply.model or self._spec.model,
            usage=reply.usage,
            wire_ms=reply.wire_ms,
            first_token_ms=reply.first_token_ms,
            retry_ms=reply.retry_ms,
            retries=reply.retries,
        )

    async def aclose(self) -> None:
        await self._client.aclose()
