"""What the two chat-model targets (`openai`, `anthropic`) share: a target that asks its model
once per item — or once per turn of a session, with the conversation so far — and batch mode
(their kinds' checks before anything runs: `assay.targets._chat_kind`).

A reply that is no answer (`assay.calls.finish.not_an_answer`: a refusal, a reply cut by the
length limit, a tool call though the request offered no tools) and one whose content is null
with nothing in its place fail the item with a kind of their own (`refusal`, `length`,
`unasked_tool_call`; `protocol`): they are never an empty answer scored. The call was made and
is measured all the same.

With `tool_loop: true` the target runs the model's calls of its Python tools and asks again
until the model answers in words (`assay.targets._tool_loop`); every round is a call of the same
client, and the exchange is the item's trajectory, kept as `trajectory.json` in its artifacts.

Batch mode (`batch:` on the spec): an item's request goes through the provider's batch API
(`assay.calls.batch`), priced at the model's batch rate and held against the budget at its
maximum cost until its result arrives (`assay.calls.batch_mode`); each batch is recorded in the
store's `batches/`, so a resumed run re-attaches to it. A session's turns are sent online.
"""

from __future__ import annotations

import asyncio
import json
import time
from abc import ABC, abstractmethod
from typing import Any

from assay._files import write_atomic
from assay.calls.accounting import Usage
from assay.calls.batch import Batcher, custom_id
from assay.calls.batch_mode import batched_call, open_batcher
from assay.calls.chat import ChatClient, ChatReply
from assay.calls.finish import Finish, answer_calls, not_an_answer
from assay.calls.messages import ToolCall, Turn
from assay.calls.rate import controller_for
from assay.calls.wire import ChatAPI
from assay.errors import TargetFailure
from assay.outcomes import FailureKind
from assay.spec._model_io import DEFAULT_TOOL_ROUNDS, DEFAULT_TOOL_TIMEOUT
from assay.spec.dataset import Item
from assay.targets import _conversation
from assay.targets._base import SessionState, TargetResult, render
from assay.targets._kind import TargetContext
from assay.targets._model_io import answer_of, reply_limit, request_fields, text_beside, tool_functions
from assay.targets._tool_loop import Exchange, Toolbox, run_tool_loop


def _open_batcher(spec: Any, api: ChatAPI, context: TargetContext | None) -> Batcher | None:
    """The batcher of a spec in batch mode (its ledger the run's `batches/`), else None."""
    if spec.batch is None:
        return None
    return open_batcher(
        spec,
        api,
        store=context.store if context is not None else None,
        run_id=context.run_id if context is not None else None,
    )


def _word(finish: Finish) -> str | None:
    return None if finish.reason is None else finish.reason.value


class ChatTarget(ABC):
    """Renders the item's prompt and asks the model once (plus retries); a session's turns carry
    the conversation so far. A kind says how its request body looks (`request_body`).

    Every attempt passes the adaptive rate controller of the spec's (endpoint, model); in batch
    mode items go through the provider's batch API.

    Args:
        spec: the target spec.
        api: the wire format its model speaks.
        concurrency: the run's concurrency; the connection pool is as wide.
        context: the run (its store keeps batch mode's ledger).
    """

    instrumented = True

    def __init__(self, spec: Any, api: ChatAPI, *, concurrency: int, context: TargetContext | None) -> None:
        self._spec = spec
        self._client = ChatClient(
            spec,
            api=api,
            concurrency=concurrency,
            cache=bool(spec.cache),
            # The adaptive controller of its (endpoint, model), shared by the process's runs — or
            # the fleet's member (`assay.calls.aimd`): every attempt passes it.
            gate=controller_for(spec, spec.model, concurrency),
            stream=spec.stream,
        )
        self._api = api
        self._batcher = _open_batcher(spec, api, context)
        self.request_fields = request_fields(spec, api, None if context is None else context.spec_dir)
        """What every request body carries beyond the conversation (tools, ...): each kind's
        `request_body` adds it."""
        self._toolbox = None
        if getattr(spec, "tool_loop", None):
            functions = tool_functions(spec, None if context is None else context.spec_dir)
            self._toolbox = Toolbox(functions, spec.tool_timeout or DEFAULT_TOOL_TIMEOUT)
        self._store = None if context is None else context.store
        self._run_id = None if context is None else context.run_id

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

    def conversation(self, item: Item, prompt: Any, history: list[dict[str, Any]] | None) -> list[Turn]:
        """With `messages`: the item's conversation; in a session, the conversation up to its last
        user turn (which is the session's first prompt, `item_prompt`), then the session's turns
        so far and `prompt` as the user's."""
        turns = [p.turn for p in _conversation.item_turns(self._spec.messages, item, "target")]
        if prompt is None and not history:
            return turns
        if turns and turns[-1].role == "user":
            turns = turns[:-1]
        tail = [*(history or []), {"role": "user", "content": prompt}]
        return [*turns, *(Turn.model_validate(message) for message in tail)]

    def item_prompt(self, item: Item) -> Any:
        """The item's prompt; with `messages`, its conversation's last user turn's content (text,
        or its parts as `messages:` writes them)."""
        if self._spec.messages is None:
            return render(self._spec.prompt, item)
        last = _conversation.item_turns(self._spec.messages, item, "target")[-1].turn
        if last.role != "user":
            return None
        if isinstance(last.content, str):
            return last.content
        return [part.model_dump(exclude_none=True) for part in last.content]

    async def __call__(self, item: Item, trial: int) -> TargetResult:
        if self._batcher is not None:
            return await self._batched(item, trial, self._batcher)
        if self._toolbox is not None:
            return await self._looped(self.request_body(item), self._toolbox, (item.item_id, trial, ""))
        return await self._ask(self.request_body(item))

    async def turn(self, item: Item, trial: int, prompt: Any, session: SessionState) -> TargetResult:
        """One prompt of a session: the conversation so far is sent with it, so the model sees
        every earlier prompt and answer (with a tool loop, a turn's tool exchange is its own:
        the session's history keeps the prompts and answers, the exchange is kept in the item x
        trial's artifacts as `<session id>/turn-<n>/trajectory.json`, n the turn's place from 0)."""
        body = self.request_body(item, prompt, session.history)
        if self._toolbox is not None:
            n = sum(1 for message in session.history if message.get("role") == "user")
            kept_as = (item.item_id, trial, f"{session.session_id}/turn-{n}")
            return await self._looped(body, self._toolbox, kept_as)
        return await self._ask(body)

    async def _looped(
        self, body: dict[str, Any], toolbox: Toolbox, kept_as: tuple[str, int, str]
    ) -> TargetResult:
        """The tool loop (`run_tool_loop`): its answer is the output, its exchange the trajectory
        (kept in the item x trial's artifacts as `trajectory.json`), its rounds' usage summed."""

        async def keep(steps: list[dict[str, Any]]) -> list[str] | None:
            return await self._keep_trajectory(steps, kept_as)

        exchange: Exchange = await run_tool_loop(
            body,
            complete=self._client.complete,
            api=self._api,
            toolbox=toolbox,
            max_rounds=self._spec.max_tool_rounds or DEFAULT_TOOL_ROUNDS,
            check=self._check_reply,
            keep=keep,
            provider=self._client.provider,
        )
        answer, replies = exchange.answer, exchange.replies
        output, _ = answer_of(self._spec, self._api, answer.content, answer.finish, tools_asked=False)
        reasoning = [r.reasoning for r in replies if r.reasoning]
        return TargetResult(
            output=output,
            reasoning="\n\n".join(reasoning) if reasoning else None,
            model=answer.model or self._spec.model,
            usage=exchange.usage,
            wire_ms=sum(r.wire_ms for r in replies),
            first_token_ms=replies[0].first_token_ms,
            retry_ms=sum(r.retry_ms for r in replies),
            retries=sum(r.retries for r in replies),
            finish_reason=_word(answer.finish),
            finish_reason_raw=answer.finish.raw,
            trajectory=exchange.steps,
            steps=len(replies),
            tool_calls=exchange.tool_calls,
            artifacts=await self._keep_trajectory(exchange.steps, kept_as),
        )

    async def _keep_trajectory(
        self, steps: list[dict[str, Any]], kept_as: tuple[str, int, str]
    ) -> list[str] | None:
        """Write the steps to `trajectory.json` in the item x trial's artifacts (`kept_as`: its
        id, trial, and the subfolder of a session's turn), as a container agent's are kept: what
        a rescore's scorers read, what `assay trajectories export` makes ATIF of; None outside a
        run's store."""
        if self._store is None or self._run_id is None:
            return None
        item_id, trial, folder = kept_as
        path = self._store.artifacts_dir(self._run_id, item_id, trial) / folder / "trajectory.json"
        document = json.dumps({"status": "valid", "steps": steps}, ensure_ascii=False, default=str)
        await asyncio.to_thread(write_atomic, path, document.encode())
        return [path.relative_to(self._store.artifacts_root).as_posix()]

    async def _ask(self, body: dict[str, Any]) -> TargetResult:
        reply = await self._client.complete(body)
        output, calls = answer_of(
            self._spec, self._api, reply.content, reply.finish, self._api.tools_asked(body)
        )
        self._check_reply(body, reply, calls)
        return TargetResult(
            output=output,
            calls=calls,
            tool_call_text=text_beside(reply.content, calls),
            reasoning=reply.reasoning,
            model=reply.model or self._spec.model,
            usage=reply.usage,
            wire_ms=reply.wire_ms,
            first_token_ms=reply.first_token_ms,
            retry_ms=reply.retry_ms,
            retries=reply.retries,
            finish_reason=_word(reply.finish),
            finish_reason_raw=reply.finish.raw,
        )

    def _check_reply(self, body: dict[str, Any], reply: ChatReply, calls: list[ToolCall] | None) -> None:
        """`_check_answer` of a reply of the client."""
        self._check_answer(
            body,
            reply.content,
            reply.finish,
            usage=reply.usage,
            request_id=reply.request_id,
            retries=reply.retries,
            calls=calls,
        )

    def _check_answer(
        self,
        body: dict[str, Any],
        content: Any,
        finish: Finish,
        *,
        usage: Usage,
        request_id: str | None,
        retries: int,
        calls: list[ToolCall] | None = None,
    ) -> None:
        """Raise the item's `TargetFailure` when the reply is no answer, keeping what it held.

        Args:
            body: the request (whether it offered tools).
            content: the reply's content.
            finish: how it ended.
            usage: its tokens (a reply, if no answer: billed).
            request_id: the provider's id of the reply.
            retries: failed attempts before it.
            calls: its tool calls, when they are its answer (then a null content is no fault).
        """
        verdict = not_an_answer(finish, tools_asked=self._api.tools_asked(body))
        if verdict is None and content is None and not calls:
            verdict = FailureKind.PROTOCOL, "the reply holds no answer: its content is null"
        if verdict is None:
            return
        kind, message = verdict
        raise TargetFailure(
            message,
            kind=kind,
            provider=self._client.provider,
            request_id=request_id,
            retries=retries,
            usage=usage,
            finish_reason=_word(finish),
            finish_reason_raw=finish.raw,
            sent=finish.refusal or finish.tool_calls or content or None,
            calls=answer_calls(finish.tool_calls or []) or None,
        )

    async def _batched(self, item: Item, trial: int, batcher: Batcher) -> TargetResult:
        """One item through a batch (`batched_call`): admitted by the budget, priced at the batch rate."""
        started = time.perf_counter()
        body = self.request_body(item)
        message, usage = await batched_call(
            batcher,
            custom_id(item.item_id, trial),
            body,
            api=self._api,
            model=self._spec.model,
            max_tokens=reply_limit(self._spec),
        )
        try:
            self._api.check(message)
        except (KeyError, IndexError, TypeError):
            raise TargetFailure(
                f"malformed batch result: {str(message)[:200]!r}",
                kind=FailureKind.PROTOCOL,
                provider=self._client.provider,
            ) from None
        content, finish = self._api.content(message), self._api.finish(message)
        output, calls = answer_of(self._spec, self._api, content, finish, self._api.tools_asked(body))
        self._check_answer(
            body, content, finish, usage=usage, request_id=message.get("id"), retries=0, calls=calls
        )
        return TargetResult(
            output=output,
            calls=calls,
            tool_call_text=text_beside(content, calls),
            reasoning=self._api.reasoning(message),
            model=message.get("model") or self._spec.model,
            usage=usage,
            wire_ms=(time.perf_counter() - started) * 1000,
            finish_reason=_word(finish),
            finish_reason_raw=finish.raw,
        )

    async def aclose(self) -> None:
        if self._batcher is not None:
            await self._batcher.aclose()
        await self._client.aclose()
