"""The chat-model kinds' (`openai`, `anthropic`) checks before anything runs: every prompt
rendered (a template naming a missing field is one line per distinct problem, with the rows it
fails on), every item's conversation made and checked, the tools resolved; their identity, the
files their conversations send, and what their requests meter for the estimate (texts, images by
the provider's rule, the tools' definitions and the reply's schema as sent).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

from pydantic import BaseModel

from assay._templates import named_fields, unknown_field
from assay.calls.batch import BatchSettings
from assay.calls.endpoint import ENDPOINT_SETTINGS, RateLimits
from assay.calls.media import MediaError, image_size, image_tokens, load_media
from assay.calls.messages import DocumentPart, ImagePart, NamedTool, Turn
from assay.spec._model_io import UNSET_OUTSIDE_IDENTITY
from assay.spec.dataset import Item
from assay.spec.targets import MessageEntry
from assay.targets import _conversation
from assay.targets._base import render
from assay.targets._kind import Metered, TargetKind
from assay.targets._model_io import reply_limit, resolve_tools, tool_problems

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
_Part = TypeVar("_Part", ImagePart, DocumentPart)


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

    def identity(self, spec: S, spec_dir: Path | None = None) -> dict[str, Any]:
        """The spec without its operational fields, and without the request fields it leaves unset
        (`messages`, `tools`, ...): a spec that sets none keeps the identity it had before they
        existed. With the spec's folder, its tools are the definitions the model is offered: a
        `module:function`'s schema from its signature and docstring, not its module's name (a
        changed signature is another run, a renamed module the same)."""
        identity = super().identity(spec, spec_dir)
        for name in ("messages", *UNSET_OUTSIDE_IDENTITY):
            if identity.get(name) is None:
                identity.pop(name, None)
        if spec_dir is not None and identity.get("tools"):
            try:
                tools = resolve_tools(spec, spec_dir)
            except ValueError:
                return identity  # a tool that does not resolve is the spec's problem, reported before
            given = spec.tools  # type: ignore[attr-defined]
            identity["tools"] = [
                tool.model_dump(mode="json", exclude_none=True) if isinstance(ref, str) else kept
                for ref, kept, tool in zip(given, identity["tools"], tools, strict=True)
            ]
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
        its images by the provider's rule (`assay.calls.media.image_tokens`), how many documents
        it sends (not counted: no rule is documented), and the reply's limit (`max_completion_tokens` bounds a reasoning model's
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
            return tool_prompt + sum(
                image_tokens(provider, _image_size(part)) for part in _parts(turns, ImagePart)
            )

        def documents(item: Item) -> int:
            if entries is None:
                return 0
            return len(_parts(_conversation.item_turns(entries, item, "target"), DocumentPart))

        bound_by = "max_completion_tokens" if getattr(spec, "max_completion_tokens", None) else "max_tokens"
        return Metered(
            chat.model,
            reply_limit(spec),
            texts,
            batch=chat.batch is not None,
            extra_tokens=extra_tokens,
            bound_by=bound_by,
            documents=documents,
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
    schema = None if getattr(spec, "response_format", None) is None else spec.response_format.json_schema
    shaped = schema is not None and not schema.strict  # strict: the native structured output, no tool
    if not getattr(spec, "tools", None) and not shaped:
        return 0
    forced = shaped or spec.tool_choice == "required" or isinstance(spec.tool_choice, NamedTool)
    return 313 if forced else 346


def _parts(placed: list[_conversation.Placed], kind: type[_Part]) -> list[_Part]:
    """The turns' content parts of one kind (images, documents)."""
    return [
        part
        for p in placed
        if not isinstance(p.turn.content, str)
        for part in p.turn.content
        if isinstance(part, kind)
    ]


def _image_size(part: ImagePart) -> tuple[int, int] | None:
    """The image's size from its bytes' header; None for a `url` (or bytes unread)."""
    try:
        media = load_media(part)
    except MediaError:
        return None
    return None if media is None else image_size(media.data)


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
