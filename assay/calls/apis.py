"""The chat APIs by name: a judge's `provider` (and the `api` it speaks) picks its wire format."""

from __future__ import annotations

from assay.calls.responses import RESPONSES
from assay.calls.wire import ChatAPI
from assay.calls.wire_anthropic import AnthropicMessages
from assay.calls.wire_openai import OPENAI

APIS: dict[str, ChatAPI] = {api.name: api for api in (OPENAI, AnthropicMessages())}
"""The chat APIs by name (a judge's `provider`)."""

OTHER_APIS: dict[str, ChatAPI] = {"responses": RESPONSES}
"""The APIs a judge picks with `api:` instead of its provider's chat API, each the API of the
provider its `name` says (the Responses API is OpenAI's)."""
