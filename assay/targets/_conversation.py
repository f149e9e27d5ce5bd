"""A chat target's `messages:` made into one item's conversation, and checked before the run.

item_turns(entries, item, where)   the spec's turns rendered over the item (templates), the
                                   item's own conversation read from its field, in order;
                                   media paths resolved against the dataset file's folder
problems(placed, provider)         what the provider would refuse, or Assay cannot send: roles,
                                   Anthropic's order (system first, then user and assistant
                                   in turn, from a user turn), empty contents, media where
                                   only a user turn may hold it, media unreadable, of another
                                   type than said, or over the provider's limits
media_paths(placed)                the files the conversation sends (the run's identity holds
                                   their bytes' hash)
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from assay.calls.media import LIMITS, MediaError, load_media, media_problem
from assay.calls.messages import DocumentPart, ImagePart, TextPart, Turn
from assay.spec.dataset import Item
from assay.spec.targets import ConversationField, MessageEntry
from assay.targets._base import render

_TURNS: TypeAdapter[list[Turn]] = TypeAdapter(list[Turn])
_SHOWN = 3


class ConversationError(ValueError):
    """An item whose conversation cannot be made: its field is missing or holds no list of turns,
    or a template of the spec's turns cannot be filled from it."""


@dataclass(frozen=True, slots=True)
class Placed:
    """A turn and where it was written, as a problem names it.

    Args:
        label: `target.messages.2` (the spec's) or `field 'messages' turn 3` (the item's).
        turn: the turn, rendered, its paths resolved.
    """

    label: str
    turn: Turn


def _said(error: ValidationError) -> str:
    lines = []
    for detail in error.errors()[:_SHOWN]:
        loc = list(detail["loc"])
        head = f"turn {loc.pop(0) + 1}" if loc and isinstance(loc[0], int) else "the value"
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)
        lines.append(f"{head}{path}: {detail['msg'].removeprefix('Value error, ')}")
    more = error.error_count() - _SHOWN
    return "; ".join(lines) + (f" (and {more} more)" if more > 0 else "")


def _resolved(turn: Turn, folder: Path | None) -> Turn:
    if isinstance(turn.content, str):
        return turn
    parts = [
        part.model_copy(update={"path": str((folder or Path.cwd()) / part.path)})
        if isinstance(part, ImagePart | DocumentPart) and part.path is not None
        else part
        for part in turn.content
    ]
    return turn.model_copy(update={"content": parts})


def _rendered(turn: Turn, item: Item) -> Turn:
    """A spec's turn over the item: its text and its media paths are templates."""
    if isinstance(turn.content, str):
        return turn.model_copy(update={"content": render(turn.content, item)})
    parts = []
    for part in turn.content:
        if isinstance(part, TextPart):
            part = part.model_copy(update={"text": render(part.text, item)})
        elif part.path is not None:
            part = part.model_copy(update={"path": render(part.path, item)})
        parts.append(part)
    return turn.model_copy(update={"content": parts})


def _field_turns(entry: ConversationField, item: Item, where: str) -> list[Placed]:
    said = f"field {entry.field!r} ({where}.messages)"
    if entry.field not in item.fields:
        raise ConversationError(
            f"{said} is missing; the row has {', '.join(map(repr, list(item.fields)[:12]))}"
        )
    value: Any = item.fields[entry.field]
    if isinstance(value, str):  # a CSV cell, or a column of JSON text
        try:
            value = json.loads(value)
        except ValueError:
            raise ConversationError(f"{said} holds text that is not a JSON list of turns") from None
    try:
        turns = _TURNS.validate_python(value)
    except ValidationError as exc:
        raise ConversationError(f"{said}: {_said(exc)}") from None
    return [
        Placed(f"field {entry.field!r} turn {n}", _resolved(turn, item.folder))
        for n, turn in enumerate(turns, start=1)
    ]


def item_turns(entries: list[MessageEntry], item: Item, where: str) -> list[Placed]:
    """The item's conversation: the spec's entries in order, each turn rendered or read.

    Raises:
        ConversationError: a field holds no conversation, or a template cannot be filled.
    """
    placed: list[Placed] = []
    for n, entry in enumerate(entries):
        if isinstance(entry, ConversationField):
            placed += _field_turns(entry, item, where)
            continue
        try:
            turn = _rendered(entry, item)
        except (KeyError, IndexError, ValueError) as exc:
            raise ConversationError(
                f"{where}.messages.{n} cannot be filled: {type(exc).__name__} {exc}"
            ) from None
        placed.append(Placed(f"{where}.messages.{n}", _resolved(turn, item.folder)))
    return placed


def _empty(turn: Turn) -> bool:
    if isinstance(turn.content, str):
        return not turn.content.strip()
    return not turn.content or any(isinstance(p, TextPart) and not p.text.strip() for p in turn.content)


def _order_problems(placed: list[Placed]) -> list[str]:
    """The Messages API's order: system turns only first (they become `system`), then a user turn,
    then user and assistant in turn."""
    problems = []
    rest = [p for p in placed if p.turn.role != "system"]
    started = False
    for p in placed:
        if p.turn.role == "system" and started:
            problems.append(
                f"{p.label}: a system turn after the conversation began; Anthropic takes system "
                "text only before it (as `system`)"
            )
        started = started or p.turn.role != "system"
    if rest and rest[0].turn.role != "user":
        problems.append(
            f"{rest[0].label}: the first turn after the system turns must be a user turn (Anthropic)"
        )
    for before, after in itertools.pairwise(rest):
        if before.turn.role == after.turn.role:
            problems.append(
                f"{after.label}: two {after.turn.role} turns in a row; Anthropic needs user and "
                "assistant turns in turn"
            )
    return problems


def _part_problems(p: Placed, provider: str) -> tuple[list[str], int]:
    """A turn's media problems, and the base64 bytes its media add to the request."""
    problems, size = [], 0
    if isinstance(p.turn.content, str):
        return problems, size
    for n, part in enumerate(p.turn.content):
        if isinstance(part, TextPart):
            continue
        said = f"{p.label}.content[{n}] ({part.type})"
        if p.turn.role != "user":
            problems.append(f"{said}: an {part.type} can only be in a user turn")
            continue
        if isinstance(part, DocumentPart) and not LIMITS[provider].document_urls and part.url is not None:
            problems.append(f"{said}: OpenAI's file parts take inline bytes only: give `path` or `data`")
            continue
        try:
            media = load_media(part)
        except MediaError as exc:
            problems.append(f"{said}: {exc}")
            continue
        if media is not None:
            size += media.encoded_size
            if (problem := media_problem(part, media, provider)) is not None:
                problems.append(f"{said}: {problem}")
    return problems, size


# Whether a provider's API wants user and assistant turns alternating, a user turn first.
_ALTERNATING = {"openai": False, "anthropic": True}


def problems(placed: list[Placed], provider: str) -> list[str]:
    """Why the conversation cannot be sent to `provider` (`openai`, `anthropic`); empty when it can."""
    found: list[str] = []
    if not any(p.turn.role != "system" for p in placed):
        found.append("the conversation has no user or assistant turn")
    for p in placed:
        if _empty(p.turn):
            found.append(f"{p.label}: the {p.turn.role} turn's content is empty")
    if _ALTERNATING[provider]:
        found += _order_problems(placed)
    total = 0
    for p in placed:
        part_problems, size = _part_problems(p, provider)
        found += part_problems
        total += size
    if total > LIMITS[provider].request:
        found.append(
            f"the conversation's files are {total:,} bytes (base64), over {provider}'s request "
            f"limit of {LIMITS[provider].request:,}"
        )
    return found


def media_paths(placed: list[Placed]) -> list[Path]:
    """The files the conversation's parts name."""
    return [
        Path(part.path)
        for p in placed
        if not isinstance(p.turn.content, str)
        for part in p.turn.content
        if isinstance(part, ImagePart | DocumentPart) and part.path is not None
    ]
