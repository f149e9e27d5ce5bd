"""A conversation's parts in one vocabulary for both chat APIs: what Assay sends a model and what
it reads back of a reply, before either is put on a provider's wire (`assay.calls.wire`).

Issue 26 grows this module (turns, content parts, tool definitions); today it holds the tool call,
which replies, stored items and scorers share.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


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
