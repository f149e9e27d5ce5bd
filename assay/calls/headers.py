"""Where a reply's request id and rate-limit hints are found (`ResponseHeaders`): the documented
header names (`HEADERS`: OpenAI's, Anthropic's, and a LiteLLM proxy's `x-litellm-call-id` and
`llm_provider-*`), after any a spec's `response_headers` adds. Each hint reaches the hook of
`assay.calls.http.Peer` under one standard name (`STANDARD`: the first of its documented names),
so rate control reads one name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

# An HTTP header's name (RFC 9110's token), compared in lower case as HTTP compares names.
HeaderName = Annotated[str, Field(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"), AfterValidator(str.lower)]


class ResponseHeaders(BaseModel):
    """Where a reply's request id and rate-limit hints are read: for each, the header names tried
    in order. The documented names are `HEADERS`; a spec's `response_headers` (a target's, a
    judge's) adds names tried before them, for a gateway or provider that sends a hint under
    another name.

    Args:
        request_id: the provider's id of the request, kept with a failure (for its support).
        retry_after: how long to wait before sending again: seconds or an HTTP-date.
        limit_requests: the requests the account allows a minute.
        remaining_requests: the requests left of that limit.
        reset_requests: when that count is full again: a duration (`1s`, `6m0s`, `20ms`), seconds
            or an RFC 3339 time.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    request_id: tuple[HeaderName, ...] = ()
    retry_after: tuple[HeaderName, ...] = ()
    limit_requests: tuple[HeaderName, ...] = ()
    remaining_requests: tuple[HeaderName, ...] = ()
    reset_requests: tuple[HeaderName, ...] = ()

    def before(self, names: ResponseHeaders) -> ResponseHeaders:
        """These names, then those of `names` not among them."""
        return ResponseHeaders(
            **{hint: (*mine, *(n for n in getattr(names, hint) if n not in mine)) for hint, mine in self}
        )

    def first(self, hint: str, headers: Mapping[str, str]) -> str | None:
        """The value of the first of `hint`'s headers the reply has (a non-empty one)."""
        for name in getattr(self, hint):
            value = headers.get(name)
            if value:
                return value
        return None

    def hints(self, headers: Mapping[str, str]) -> dict[str, str]:
        """The rate-limit hints a reply has, each under its standard name (`STANDARD`), wherever
        it was found: what rate control reads (`Peer.observe`)."""
        found = {}
        for hint in _RATE_HINTS:
            value = self.first(hint, headers)
            if value is not None:
                found[STANDARD[hint]] = value
        return found


# The documented names: OpenAI's, Anthropic's, and LiteLLM's — a LiteLLM proxy sends its own call
# id as `x-litellm-call-id` and the upstream provider's headers prefixed `llm_provider-` (its
# 429s have no `Retry-After`, only `llm_provider-retry-after`). The first name of each is the
# standard one rate control reads a hint under.
HEADERS = ResponseHeaders(
    request_id=(
        "x-request-id",
        "request-id",
        "llm_provider-x-request-id",
        "llm_provider-request-id",
        "x-litellm-call-id",
    ),
    retry_after=("retry-after", "llm_provider-retry-after"),
    limit_requests=(
        "x-ratelimit-limit-requests",
        "anthropic-ratelimit-requests-limit",
        "llm_provider-x-ratelimit-limit-requests",
        "llm_provider-anthropic-ratelimit-requests-limit",
    ),
    remaining_requests=(
        "x-ratelimit-remaining-requests",
        "anthropic-ratelimit-requests-remaining",
        "llm_provider-x-ratelimit-remaining-requests",
        "llm_provider-anthropic-ratelimit-requests-remaining",
    ),
    reset_requests=(
        "x-ratelimit-reset-requests",
        "anthropic-ratelimit-requests-reset",
        "llm_provider-x-ratelimit-reset-requests",
        "llm_provider-anthropic-ratelimit-requests-reset",
    ),
)
STANDARD: dict[str, str] = {hint: names[0] for hint, names in HEADERS}
_RATE_HINTS = ("retry_after", "limit_requests", "remaining_requests", "reset_requests")


def response_headers(names: ResponseHeaders | None) -> ResponseHeaders:
    """The names a spec's `response_headers` adds, before the documented ones (`HEADERS`)."""
    return HEADERS if names is None else names.before(HEADERS)
