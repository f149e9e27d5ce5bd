"""`ChatReply`: a successful chat completion and how it went, as `ChatClient.complete` returns it
(`assay.calls.chat`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from assay.calls.accounting import Usage
from assay.calls.finish import Finish


# Not frozen: one is made per item, and a frozen one costs three times as much.
@dataclass(slots=True)
class ChatReply:
    """A successful chat completion and how it went.

    Args:
        content: the first choice's message content.
        model: the model that answered, as the provider named it.
        usage: token usage as reported.
        wire_ms: time of the attempt that succeeded.
        retry_ms: time spent before it in failed attempts and backoff.
        retries: failed attempts before it.
        request_id: the provider's request id.
        finish: how the reply ended (why the model stopped; its tool calls and refusal).
        first_token_ms: for a streamed reply, the time from sending the attempt that succeeded
            to its first answer token; None when not streamed (or no token came).
        reasoning: the reasoning text or summary the reply carried apart from its answer
            (`ChatAPI.reasoning`); None when it carried none.
        body: the reply as it came (assembled, when streamed): what a tool loop sends back
            (`ChatAPI.follow_up`).
    """

    content: Any
    model: str | None
    usage: Usage
    wire_ms: float
    retry_ms: float
    retries: int
    request_id: str | None
    finish: Finish
    first_token_ms: float | None = None
    reasoning: str | None = None
    body: dict[str, Any] | None = None
