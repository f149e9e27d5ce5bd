"""A conversation's parts in one vocabulary for both chat APIs: what Assay sends a model and what
it reads back of a reply, before either is put on a provider's wire (`assay.calls.wire`).

Issue 26 grows this module: the tool call, which replies, stored items and scorers share; a
conversation's turns and their content parts (text, images, documents), which a chat target's
`messages:` lists and a dataset field may hold; tool definitions.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class ToolCall(BaseModel):
    """One function call a model made (OpenAI `tool_calls[]`, Anthropic `tool_use` blocks, an
    agent's ATIF `tool_calls[]`), the same whoever made it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """The function called."""
    arguments: Any = None
    """The arguments as the model wrote them, parsed from JSON (an object, normally); when what the
    model wrote is not JSON, the string as written, so a scorer can fail it rather than guess."""
    id: str | None = None
    """The provider's id of the call (`call_…`, `toolu_…`): the tool's result names it."""


# -- turns and their content parts (issue 26 §1, §2) --------------------------------------------

Role = Literal["system", "user", "assistant"]


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPart(_Part):
    """Text in a turn (`{type: text, text}`); in a spec's turns, a template over the item's fields."""

    type: Literal["text"]
    """`text`."""
    text: str
    """The text (empty is refused when the conversation is checked)."""


class _MediaPart(_Part):
    """A file given to the model: exactly one of `path`, `url` or `data`."""

    path: str | None = None
    """A file, relative to the dataset file's folder (a template in a spec's turns, e.g.
    `images/{image}`); its bytes are read, checked and sent inline, and are part of the run's
    identity."""
    url: str | None = None
    """An `http(s)://` address the provider fetches itself (Assay never does: only the address is
    part of the run's identity)."""
    data: str | None = None
    """The bytes, base64-encoded, or a `data:<media type>;base64,…` URL."""
    media_type: str | None = None
    """The bytes' type (`image/png`); read from the bytes' magic when not given, and checked
    against them when it is."""

    @model_validator(mode="after")
    def _one_source(self) -> _MediaPart:
        given = [name for name in ("path", "url", "data") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of path, url or data (got {', '.join(given) if given else 'none'})"
            )
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must be an http(s):// address (got {self.url[:40]!r}); bytes go in `data`")
        return self


class ImagePart(_MediaPart):
    """An image (`{type: image, path|url|data, media_type}`): PNG, JPEG, GIF or WebP; sent as
    OpenAI's `image_url` (a data URL) and Anthropic's `image` block."""

    type: Literal["image"]
    """`image`: PNG, JPEG, GIF or WebP."""


class DocumentPart(_MediaPart):
    """A PDF (`{type: document, path|url|data}`): Anthropic's `document` block, OpenAI's `file` part
    (inline data only)."""

    type: Literal["document"]
    """`document`: a PDF."""


ContentPart = Annotated[TextPart | ImagePart | DocumentPart, Field(discriminator="type")]
"""One part of a turn's content."""


class Turn(BaseModel):
    """One message of a conversation (`{role, content}`), as a spec's `messages:` lists them (a
    template) or a dataset field holds them (as written)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Role
    """`system`, `user` or `assistant`. (Tool results come with tool calls, not as turns here.)"""
    content: str | list[ContentPart]
    """Text, or a list of parts (text, images, documents); an image or document only in a user turn."""

    @field_validator("role", mode="before")
    @classmethod
    def _known_role(cls, value: Any) -> Any:
        if value == "tool":
            raise ValueError(
                "a `tool` turn is not accepted in messages: tool results belong to a tool call, "
                "which a conversation written here cannot carry"
            )
        return value

    def text(self) -> str:
        """The turn's text: its content, or its text parts joined by blank lines."""
        if isinstance(self.content, str):
            return self.content
        return "\n\n".join(part.text for part in self.content if isinstance(part, TextPart))
