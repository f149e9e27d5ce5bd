"""The endpoint a spec names: one model for every HTTP endpoint Assay calls.

The chat targets (`openai`, `anthropic`), the `llm_judge` scorer and the `http_agent` target
*are* endpoints: their spec models inherit `Endpoint`, so the fields that say where an endpoint
is and how it is called are declared here once, flat on the target or scorer as the YAML has
them, and left out of a run's identity together (`ENDPOINT_SETTINGS`): they change how a call is
made, not what it answers, so a run resumes on another port, with another key or more retries,
and is the same run.

`base_url` is normalised where the spec is read (`BaseURL`): checked as a URL with a host, its
trailing `/` dropped. A client appends its path to it (`/chat/completions`, `/messages`,
`/runs`) and names its provider by `Endpoint.host`; none touches the text again.

`ModelEndpoint` is an endpoint that serves models, whose calls are paced per (endpoint, model)
(`rate_limits`, `assay.calls.rate`): the chat targets' and the judge's. A harness is not paced.
"""

from __future__ import annotations

from typing import Annotated, ClassVar
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from assay.calls.headers import ResponseHeaders
from assay.calls.http import HttpURL
from assay.calls.keys import api_key


def _root(url: str) -> str:
    return url.rstrip("/")


# An endpoint's root, as a spec names it: a URL with a host (`HttpURL`), without a trailing `/`.
BaseURL = Annotated[HttpURL, AfterValidator(_root)]


class RateLimits(BaseModel):
    """An endpoint's known limits (`assay/calls/rate.py`): calls are paced to stay under them.

    Args:
        rpm: requests per minute.
        tpm: tokens per minute (prompt and answer; a call's are estimated before it is sent —
            its prompt's size plus `max_tokens` — and corrected by its usage).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    rpm: float | None = Field(default=None, gt=0, strict=True)
    tpm: float | None = Field(default=None, gt=0, strict=True)

    @model_validator(mode="after")
    def _some_limit(self) -> RateLimits:
        if self.rpm is None and self.tpm is None:
            raise ValueError("rate_limits needs rpm, tpm or both")
        return self


class Endpoint(BaseModel):
    """An HTTP endpoint: where it is, the key it takes, and how one call to it is bounded and
    retried. A kind documents what it appends to `base_url` and what it retries.

    Args:
        base_url: the endpoint's root, e.g. `http://127.0.0.1:8000/v1`; a trailing `/` is
            dropped.
        api_key_env: the environment variable holding the API key; the key itself is never stored.
        api_key_secret: a Prefect Secret block holding the key instead, read when the run starts
            (for deployment runs: docs/prefect.md); never stored either.
        timeout: seconds for one HTTP attempt.
        max_retries: retries after the first attempt on a retryable status (408, 409, 429, 5xx;
            `assay.calls.http`), a timeout or a connection error; a rate limit's refusals (429,
            529) are waited out beyond it.
        response_headers: header names to read a reply's request id and rate-limit hints from
            (`request_id`, `retry_after`, `limit_requests`, `remaining_requests`,
            `reset_requests`: lists), tried before the documented ones — OpenAI's, Anthropic's,
            a LiteLLM proxy's (docs/rate-control.md).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # The field that bounds one HTTP attempt: `timeout`, unless a kind's `timeout` bounds more
    # (a harness run's, whose requests are bounded by `request_timeout`).
    attempt_timeout_field: ClassVar[str] = "timeout"

    base_url: BaseURL
    api_key_env: str | None = None
    api_key_secret: str | None = Field(default=None, min_length=1)
    timeout: float = Field(default=60.0, gt=0, strict=True)
    max_retries: int = Field(default=4, ge=0, le=20, strict=True)
    response_headers: ResponseHeaders | None = None

    @property
    def host(self) -> str:
        """`host[:port]` of `base_url`, as failures name the provider (`openai:<host>`)."""
        return urlsplit(self.base_url).netloc

    @property
    def attempt_timeout(self) -> float:
        """Seconds for one HTTP attempt."""
        return float(getattr(self, self.attempt_timeout_field))

    def api_key(self) -> str | None:
        """The key from its source (`assay.calls.keys.api_key`); None when none is named."""
        return api_key(self.api_key_env, self.api_key_secret)


class ModelEndpoint(Endpoint):
    """An endpoint that serves models: its calls are paced per (endpoint, model).

    Args:
        rate_limits: `{rpm, tpm}`: pace calls to this endpoint and model to at most that many
            requests / tokens a minute (the adaptive controller, which reads the providers'
            rate-limit headers, handles the rest: `assay/calls/rate.py`).
    """

    rate_limits: RateLimits | None = None


# The fields kept out of a run's identity wherever an endpoint appears (a target's, a judge's).
ENDPOINT_SETTINGS: frozenset[str] = frozenset(ModelEndpoint.model_fields)
