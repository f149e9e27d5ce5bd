"""The `openai` target: any OpenAI-compatible chat-completions endpoint, one call per item."""

from __future__ import annotations

from typing import Any, ClassVar

from assay.calls.chat import ChatClient
from assay.calls.rate import controller_for
from assay.spec import OpenAITarget
from assay.spec.dataset import Item
from assay.targets._base import SessionState, TargetResult, render
from assay.targets._kind import Metered, TargetContext, TargetKind

# More lines than this about unfillable templates add nothing: the first show the pattern.
_MAX_PROBLEMS = 20


class OpenAIKind(TargetKind[OpenAITarget]):
    """`kind: openai`: every prompt is rendered before anything runs; its calls are measured."""

    name = "openai"
    operational: ClassVar[frozenset[str]] = frozenset(
        {"base_url", "api_key_env", "timeout", "max_retries", "cache", "rate_limits"}
    )

    def item_problems(self, spec: OpenAITarget, items: list[Item], where: str) -> list[str]:
        """Render every prompt once, so a template naming a missing field fails before anything runs."""
        problems = []
        for field_name, template in (("prompt", spec.prompt), ("system", spec.system)):
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

    def metered(self, spec: OpenAITarget) -> Metered:
        templates = [t for t in (spec.prompt, spec.system) if t is not None]
        return Metered(spec.model, spec.max_tokens, lambda item: [render(t, item) for t in templates])

    def open(self, spec: OpenAITarget, context: TargetContext) -> OpenAIChatTarget:
        return OpenAIChatTarget(spec, concurrency=context.concurrency, seed=context.seed)


class OpenAIChatTarget:
    """Renders the item's prompt and asks the model once (plus retries).

    Args:
        spec: the target spec.
        concurrency: the run's concurrency; the connection pool is as wide.
        seed: sent as `seed` so providers that support it sample repeatably.
    """

    instrumented = True

    def __init__(self, spec: OpenAITarget, *, concurrency: int, seed: int) -> None:
        self._spec = spec
        self._seed = seed
        # Every attempt passes the endpoint's adaptive controller, shared by the process's runs.
        rpm = spec.rate_limits.rpm if spec.rate_limits is not None else None
        self.rate_controller = controller_for(spec.base_url, spec.model, concurrency, rpm=rpm)
        self._client = ChatClient(
            spec.base_url,
            api_key_env=spec.api_key_env,
            timeout=spec.timeout,
            max_retries=spec.max_retries,
            concurrency=concurrency,
            cache=bool(spec.cache),
            gate=self.rate_controller,
        )

    def request_body(
        self, item: Item, prompt: Any = None, history: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """The chat request: the system prompt (if any), a session's earlier turns, then `prompt`
        (default: the item's rendered prompt) as the user's message."""
        messages = []
        if self._spec.system is not None:
            messages.append({"role": "system", "content": render(self._spec.system, item)})
        if history:
            messages.extend(history)
        content = render(self._spec.prompt, item) if prompt is None else prompt
        messages.append({"role": "user", "content": content})
        body: dict[str, Any] = {"model": self._spec.model, "messages": messages, "seed": self._seed}
        if self._spec.temperature is not None:
            body["temperature"] = self._spec.temperature
        if self._spec.max_tokens is not None:
            body["max_tokens"] = self._spec.max_tokens
        return body

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
            retry_ms=reply.retry_ms,
            retries=reply.retries,
        )

    async def aclose(self) -> None:
        await self._client.aclose()
