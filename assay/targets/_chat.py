"""What the two chat-model kinds (`openai`, `anthropic`) share: prompts rendered and checked
before anything runs, metered calls, a target that asks its model once per item — or once per
turn of a session, with the conversation so far — and batch mode.

A reply that is no answer (`assay.calls.wire.not_an_answer`: a refusal, a reply cut by the
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
import functools
import json
import os
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

from pydantic import BaseModel

from assay._files import write_atomic
from assay._templates import named_fields, unknown_field
from assay.calls.accounting import Usage
from assay.calls.batch import Batcher, BatchSettings, custom_id
from assay.calls.batch_mode import batched_call, open_batcher
from assay.calls.chat import ChatClient, ChatReply
from assay.calls.endpoint import ENDPOINT_SETTINGS, RateLimits
from assay.calls.finish import Finish, not_an_answer
from assay.calls.media import MediaError, image_size, image_tokens, load_media
from assay.calls.messages import ImagePart, NamedTool, ToolCall, Turn
from assay.calls.rate import controller_for
from assay.calls.wire import ChatAPI
from assay.errors import TargetFailure
from assay.outcomes import FailureKind
from assay.spec._model_io import DEFAULT_TOOL_ROUNDS, DEFAULT_TOOL_TIMEOUT, UNSET_OUTSIDE_IDENTITY
from assay.spec.dataset import Item
from assay.spec.targets import MessageEntry
from assay.targets import _conversation
from assay.targets._base import SessionState, TargetResult, render
from assay.targets._kind import Metered, TargetContext, TargetKind
from assay.targets._model_io import (
    answer_of,
    reply_limit,
    request_fields,
    resolve_tools,
    tool_functions,
    tool_problems,
)
from assay.targets._tool_loop import Exchange, Toolbox, run_tool_loop

# More lines than this about unfillable templates add nothing: the first show the pattern.
_MAX_PROBLEMS = 20


class ChatSpec(Protocol):
    """The fields a chat target's spec has."""

    model: str
    prompt: str
    messages: list[MessageEntry] | None
    system: str | None
    max_tokens: int | None
    batch: BatchSettings | None
    rate_limits: RateLimits | None


S = TypeVar("S", bound=BaseModel)


class ChatKind(TargetKind[S]):
    """A chat model's kind: every prompt is rendered before anything runs; its calls are measured."""

    # How a chat model is reached, paced, retried, cached, streamed or batched changes what a call
    # costs or how long it takes, not what it answers; a kind adds its own (`cache_system`, ...).
    operational: ClassVar[frozenset[str]] = ENDPOINT_SETTINGS | {"cache", "stream", "batch"}
    # Whether the API adds a system prompt of its own to a request that offers tools (Anthropic's
    # tool use guide: `_tool_prompt_tokens`), which the estimate counts.
    adds_tool_prompt: ClassVar[bool] = False

    def problems(self, spec: S, spec_dir: Path, where: str) -> list[str]:
        """The tools it offers must resolve (a `module:function` imports and can be a tool)."""
        return tool_problems(spec, spec_dir, where)

    def identity(self, spec: S) -> dict[str, Any]:
        """The spec without its operational fields, and without the request fields it leaves unset
        (`messages`, `tools`, ...): a spec that sets none keeps the identity it had before they
        existed."""
        identity = super().identity(spec)
        for name in ("messages", *UNSET_OUTSIDE_IDENTITY):
            if identity.get(name) is None:
                identity.pop(name, None)
        return identity

    def item_problems(self, spec: S, items: list[Item], where: str) -> list[str]:
        """Render every prompt once, so a template naming a missing field fails before anything
        runs (one line per distinct problem, `_unfilled`); with `messages`, make and check every
        item's conversation (`_conversation.problems`), each problem named by the item's line."""
        chat: ChatSpec = spec  # type: ignore[assignment]
        problems = [] if chat.messages is None else self._conversation_problems(chat.messages, items, where)
        prompt = chat.prompt if chat.messages is None else None
        for field_name, template in (("prompt", prompt), ("system", chat.system)):
            if template is not None:
                problems += _unfilled(f"{where}.{field_name}", template, items)
        return problems

    def _conversation_problems(self, entries: list[MessageEntry], items: list[Item], where: str) -> list[str]:
        problems: list[str] = []
        for item in items:
            row = item.where or f"item {item.item_index} (id {item.item_id!r})"
            try:
                found = _conversation.problems(_conversation.item_turns(entries, item, where), self.name)
            except _conversation.ConversationError as exc:
                found = [str(exc)]
            problems += [f"{row}: {problem}" for problem in found]
            if len(problems) >= _MAX_PROBLEMS:
                break
        return problems

    def metered(self, spec: S, spec_dir: Path | None = None) -> Metered:
        """Its texts (prompts or turns, the tools' definitions and the reply's schema as sent),
        its images by the provider's rule (`assay.calls.media.image_tokens`; documents are not
        counted), and the reply's limit (`max_completion_tokens` bounds a reasoning model's
        reasoning too; Anthropic's thinking counts against `max_tokens`)."""
        chat: ChatSpec = spec  # type: ignore[assignment]
        templates = [
            t for t in (chat.prompt if chat.messages is None else None, chat.system) if t is not None
        ]
        entries = chat.messages

        @functools.cache
        def fixed() -> tuple[str, ...]:  # the same for every item: made once, when first asked
            return tuple(_request_texts(spec, spec_dir))

        provider = self.name
        tool_prompt = _tool_prompt_tokens(spec) if self.adds_tool_prompt else 0

        def texts(item: Item) -> list[str]:
            said = [render(t, item) for t in templates]
            if entries is not None:
                said += [p.turn.text() for p in _conversation.item_turns(entries, item, "target")]
            return [*said, *fixed()]

        def extra_tokens(item: Item) -> int:
            if entries is None:
                return tool_prompt
            turns = _conversation.item_turns(entries, item, "target")
            return tool_prompt + sum(image_tokens(provider, _image_size(part)) for part in _images(turns))

        bound_by = "max_completion_tokens" if getattr(spec, "max_completion_tokens", None) else "max_tokens"
        return Metered(
            chat.model,
            reply_limit(spec),
            texts,
            batch=chat.batch is not None,
            extra_tokens=extra_tokens,
            bound_by=bound_by,
        )

    def conversation(self, spec: S, item: Item) -> list[Turn] | None:
        entries = spec.messages  # type: ignore[attr-defined]
        if entries is None:
            return None
        return [placed.turn for placed in _conversation.item_turns(entries, item, "target")]

    def fixture_files(self, spec: S, items: list[Item], spec_dir: Path) -> list[Path]:
        """The images and documents the conversations send by path: their bytes are part of the
        run's identity (a file changed under a run makes a resume refuse)."""
        entries = spec.messages  # type: ignore[attr-defined]
        if entries is None:
            return []
        found: set[Path] = set()
        for item in items:
            try:
                placed = _conversation.item_turns(entries, item, "target")
            except _conversation.ConversationError:
                continue  # reported by item_problems
            found.update(p for p in _conversation.media_paths(placed) if p.is_file())
        # Named from the spec's folder, as a container's fixtures are: a moved project keeps its identity.
        return sorted(spec_dir / os.path.relpath(p, spec_dir.resolve()) for p in found)

    def in_flight(self, spec: S, concurrency: int) -> int:
        """In batch mode `max_batches` batches' worth of items wait at once, whatever `concurrency` is."""
        batch = spec.batch  # type: ignore[attr-defined]
        return concurrency if batch is None else max(concurrency, batch.max_requests * batch.max_batches)


def _request_texts(spec: Any, spec_dir: Path | None) -> list[str]:
    """What every request sends beyond its conversation that the model reads as tokens: the
    tools' definitions and the reply's JSON schema, as JSON text."""
    texts = []
    if getattr(spec, "tools", None):
        tools = resolve_tools(spec, spec_dir)
        texts.append(json.dumps([tool.model_dump(exclude_none=True) for tool in tools]))
    response_format = getattr(spec, "response_format", None)
    if response_format is not None and response_format.json_schema is not None:
        texts.append(json.dumps(response_format.json_schema.model_dump(by_alias=True, exclude_none=True)))
    return texts


def _tool_prompt_tokens(spec: Any) -> int:
    """The system prompt Anthropic's tool use guide says it adds when a request offers tools:
    346 tokens (`auto`, `none`), 313 when a call is forced (`required`, a named tool, or
    `response_format`, sent as a forced tool)."""
    shaped = (
        getattr(spec, "response_format", None) is not None and spec.response_format.json_schema is not None
    )
    if not getattr(spec, "tools", None) and not shaped:
        return 0
    forced = shaped or spec.tool_choice == "required" or isinstance(spec.tool_choice, NamedTool)
    return 313 if forced else 346


def _images(placed: list[_conversation.Placed]) -> list[ImagePart]:
    return [
        part
        for p in placed
        if not isinstance(p.turn.content, str)
        for part in p.turn.content
        if isinstance(part, ImagePart)
    ]


def _image_size(part: ImagePart) -> tuple[int, int] | None:
    """The image's size from its bytes' header; None for a `url` (or bytes unread)."""
    try:
        media = load_media(part)
    except MediaError:
        return None
    return None if media is None else image_size(media.data)


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
            return await self._looped(self.request_body(item), self._toolbox, (item.item_id, trial))
        return await self._ask(self.request_body(item))

    async def turn(self, item: Item, trial: int, prompt: Any, session: SessionState) -> TargetResult:
        """One prompt of a session: the conversation so far is sent with it, so the model sees
        every earlier prompt and answer (with a tool loop, a turn's tool exchange is its own:
        the session's history keeps the prompts and answers)."""
        body = self.request_body(item, prompt, session.history)
        if self._toolbox is not None:
            return await self._looped(body, self._toolbox, None)
        return await self._ask(body)

    async def _looped(
        self, body: dict[str, Any], toolbox: Toolbox, kept_as: tuple[str, int] | None
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
        self, steps: list[dict[str, Any]], kept_as: tuple[str, int] | None
    ) -> list[str] | None:
        """Write the steps to the item x trial's `trajectory.json` (as a container agent's are
        kept: what a rescore's scorers read, what `assay trajectories export` makes ATIF of);
        None outside a run's store, or for a session's turn."""
        if self._store is None or self._run_id is None or kept_as is None:
            return None
        path = self._store.artifacts_dir(self._run_id, *kept_as) / "trajectory.json"
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


def _unfilled(where: str, template: str, items: list[Item]) -> list[str]:
    """Why `template` cannot be filled, one line per distinct problem with the rows it fails on:
    a field no row has gets its nearest (`did you mean`) or the rows' fields; one only some rows
    lack, which rows (a typo is one line, not one per row)."""
    failed: dict[str, list[Item]] = {}
    for item in items:
        try:
            render(template, item)
        except (KeyError, IndexError, ValueError) as exc:
            missing = [name for name in named_fields(template) if name not in item.fields and name != "input"]
            why = f"missing:{missing[0]}" if missing else f"{type(exc).__name__} {exc}"
            failed.setdefault(why, []).append(item)
    known = sorted({name for item in items for name in item.fields} | {"input"})
    lines = []
    for why, rows in failed.items():
        name = why.removeprefix("missing:")
        if why.startswith("missing:") and len(rows) == len(items):
            problem = unknown_field(name, known)
            if "did you mean" in problem:
                problem += f" (the rows' fields: {', '.join(known)})"
        elif why.startswith("missing:"):
            problem = f"{{{name}}} is missing from {len(rows)} of {len(items)} rows: {_rows(rows)}"
        else:
            problem = f"cannot be filled: {why}, in {len(rows)} of {len(items)} rows: {_rows(rows)}"
        lines.append(f"{where} {template!r}: {problem}")
    return lines


def _rows(rows: list[Item], shown: int = 3) -> str:
    """`line 2 (id 'q1'), line 5 (id 'q4') and 8 more`."""
    named = [f"{item.where or f'item {item.item_index}'} (id {item.item_id!r})" for item in rows[:shown]]
    more = f" and {len(rows) - shown} more" if len(rows) > shown else ""
    return ", ".join(named) + more
