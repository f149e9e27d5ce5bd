"""A conversation's turns (`assay.calls.messages.Turn`) on each provider's wire.

    openai_messages(turns)      chat-completions `messages`: text parts as `text`, an image as
                                `image_url` (a data URL, or its `url`), a PDF as a `file` part
    anthropic_messages(turns)   (system, messages): the leading system turns lifted into the
                                top-level `system`; an image as an `image` block (a `base64`
                                source, or a `url` one), a PDF as a `document` block

Media paths must already be resolved (absolute); their bytes are read here, as each request is
built, so a run holds no image in memory between calls. A conversation is checked before the run
(`assay.targets._conversation`): these functions assume it passed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from assay.calls.media import PDF, load_media
from assay.calls.messages import ContentPart, ImagePart, TextPart, Turn


def _openai_part(part: ContentPart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    media = load_media(part)
    if isinstance(part, ImagePart):
        url = part.url if media is None else media.data_url()
        return {"type": "image_url", "image_url": {"url": url}}
    assert media is not None, "a document on OpenAI's wire is inline (checked before the run)"
    name = Path(part.path).name if part.path is not None else "document.pdf"
    return {"type": "file", "file": {"filename": name, "file_data": media.data_url()}}


def _content(turn: Turn, part_of: Any) -> Any:
    return turn.content if isinstance(turn.content, str) else [part_of(p) for p in turn.content]


def openai_messages(turns: list[Turn]) -> list[dict[str, Any]]:
    """The turns as chat-completions messages."""
    return [{"role": turn.role, "content": _content(turn, _openai_part)} for turn in turns]


def _anthropic_part(part: ContentPart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    kind = "image" if isinstance(part, ImagePart) else "document"
    media = load_media(part)
    if media is None:
        return {"type": kind, "source": {"type": "url", "url": part.url}}
    media_type = media.media_type if isinstance(part, ImagePart) else PDF
    return {"type": kind, "source": {"type": "base64", "media_type": media_type, "data": media.base64}}


def anthropic_messages(
    turns: list[Turn], system: str | None = None
) -> tuple[str | None, list[dict[str, Any]]]:
    """The turns as a Messages request's (`system`, `messages`): `system` (the spec's) and the
    leading system turns' texts joined by blank lines."""
    lead = 0
    while lead < len(turns) and turns[lead].role == "system":
        lead += 1
    texts = [t for t in [system, *(turn.text() for turn in turns[:lead])] if t is not None]
    messages = [{"role": turn.role, "content": _content(turn, _anthropic_part)} for turn in turns[lead:]]
    return ("\n\n".join(texts) if texts else None), messages
